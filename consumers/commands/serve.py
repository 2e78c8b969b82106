"""``sgm serve``: the trainer and/or classifier consumers (see consumers/service/)."""
from __future__ import annotations

import argparse
import faulthandler
import logging
import signal
import sys
import threading

from .. import config as service_config
from ..logs import setup_logging

log = logging.getLogger("sgm.serve")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    service_config.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Exit status: 0 after a graceful stop, 1 when the final snapshot failed, 2 when the process cannot start.

    Every start-up mistake (configuration, model parameters, snapshot, state
    directory, metrics address, Kafka unreachable past ``--connect-timeout``)
    is one line on stderr, ``sgm serve: <what>``, never a traceback.
    """
    from ..service import STARTUP_ERRORS, Service, StartupError

    try:
        cfg = service_config.from_args(args)
    except (ValueError, OSError) as exc:
        return _cannot_start(exc, logged=False)  # (no log handler before the configuration is read)
    setup_logging(cfg.log_format, cfg.log_level)
    stop = threading.Event()

    def on_signal(signum, _frame) -> None:  # finish the batch, snapshot, commit, exit 0
        log.info("stopping", extra={"signal": signal.Signals(signum).name})
        stop.set()

    # Before the first line is logged: a supervisor (or a test) that stops the service once it has said anything
    # must get a graceful stop, not the default action of SIGTERM (an exit the watcher reports as a death).
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    # A fault in native code run by a Python thread (a compiled kernel, a Kafka client's poll) would end the
    # process without a line: the fault handler writes the signal and every thread's stack first. (Not for
    # librdkafka's own threads: they block signals, so the kernel ends the process; docs/RELIABILITY.md.)
    try:
        faulthandler.enable(all_threads=True)
    except (OSError, ValueError, AttributeError, RuntimeError):  # stderr is no file (a caller's stream object)
        pass  # or closed (`2>&-`: sys.stderr is None): nowhere to write a fault
    # A death no handler sees (librdkafka's threads, SIGKILL, the OOM killer) still gets one line from the watcher
    # process `sgm serve` starts first thing (consumers/cli.py: main, consumers/crash_watch.py).
    settings = cfg.redacted()
    try:  # the model the preset / --config file / flags resolve to, not the "model" setting's default
        settings["model"] = cfg.model_config()["model"]
    except (ValueError, OSError):
        pass  # a bad configuration file: prepare() below says so in one line
    log.info("configuration", extra={"config": settings})
    unknown = service_config.unknown_variables()
    if unknown:  # a misspelt variable would otherwise leave its setting at the default, unnoticed
        log.warning("unknown SGM_* environment variables ignored", extra={"variables": unknown})
    try:
        service = Service(cfg)
        service.prepare()  # snapshot, model configuration, state directory, metrics endpoint: before Kafka
    except STARTUP_ERRORS as exc:  # (a SpecError is a ValueError)
        return _cannot_start(exc)
    try:
        return service.run(stop)
    except StartupError as exc:
        return _cannot_start(exc)


def _cannot_start(exc: BaseException, logged: bool = True) -> int:
    message = str(exc) if not isinstance(exc, OSError) or not exc.filename else (
        f"{exc.filename}: {exc.strerror or exc}")
    message = " ".join(message.split())  # one line, whatever the error text held
    if logged:
        log.error("cannot start", extra={"error": message, "error_type": type(exc).__name__})
    print(f"sgm serve: {message}", file=sys.stderr)
    return 2
