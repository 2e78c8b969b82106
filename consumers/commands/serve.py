"""``sgm serve``: the trainer and/or classifier consumers (see consumers/service/)."""
from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

from sgm.model.persistence import SnapshotError

from .. import config as service_config
from ..logs import setup_logging

log = logging.getLogger("sgm.serve")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    service_config.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from ..service import ConfigMismatch, Service

    cfg = service_config.from_args(args)
    setup_logging(cfg.log_format, cfg.log_level)
    log.info("configuration", extra={"config": cfg.redacted()})
    stop = threading.Event()

    def on_signal(signum, _frame) -> None:  # finish the batch, snapshot, commit, exit 0
        log.info("stopping", extra={"signal": signal.Signals(signum).name})
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        Service(cfg).run(stop)
    except (SnapshotError, ConfigMismatch) as exc:
        log.error("cannot start", extra={"error": str(exc)})
        print(f"sgm serve: {exc}", file=sys.stderr)
        return 2
    return 0
