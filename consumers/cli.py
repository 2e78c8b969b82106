"""The ``sgm`` command line: one entry point, one sub-command per module.

Each sub-command lives in its own module under :mod:`consumers.commands` and
exposes ``add_arguments(parser)`` and ``run(args) -> int``. Modules are
imported lazily so ``sgm --help`` stays fast and a broken optional command
cannot take the others down.
"""
from __future__ import annotations

import argparse
import errno
import importlib
import os
import sys

#: sub-command name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {}


def register(name: str, module: str, help_text: str) -> None:
    COMMANDS[name] = (module, help_text)


register("demo", "sgm.consumers.commands.demo", "run the service on an embedded broker fed by a generated stream")
register("broker", "sgm.consumers.commands.broker", "start a local Kafka-compatible broker (memory only) for the other commands")
register("serve", "sgm.consumers.commands.serve", "run the trainer and/or classifier consumers against Kafka")
register("learn", "sgm.consumers.commands.learn", "learn documents from files: JSON Lines, text folders, maildir, mbox, .eml")
register("score", "sgm.consumers.commands.score", "score documents from files, through the service or from a snapshot")
register("stats", "sgm.consumers.commands.stats", "what a model holds: labels, documents, vocabulary, size, version")
register("forget", "sgm.consumers.commands.forget", "remove documents from the model by id (or by the files they came from)")
register("eval", "sgm.consumers.commands.eval", "evaluate a model configuration on a JSON Lines dataset")
register("tune", "sgm.consumers.commands.tune", "Gaussian random search of model parameters on a development split")
register("ensemble", "sgm.consumers.commands.ensemble", "fit a log-linear pool of tuned base configurations on development data")
register("feed", "sgm.consumers.commands.feed", "produce the generated stream to the training and scoring topics (load generator)")
register("chaos", "sgm.consumers.commands.chaos", "fault campaign: kill/restart processes and freeze the broker, then audit")
register("warm", "sgm.consumers.commands.warm", "compile the model kernels into numba's cache (image builds: later starts are warm)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sgm", description="sparse generative models on streams")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        sp = sub.add_parser(name, help=help_text, description=help_text)
        sp.set_defaults(_module=module)
        try:
            importlib.import_module(module).add_arguments(sp)
        except ModuleNotFoundError as exc:
            if exc.name != module:  # the command is there but one of its imports is not: a real error
                raise
            sp.set_defaults(_missing=True)  # the command's module is absent: the others still work
    return parser


def main(argv: list[str] | None = None) -> int:
    if argv is None and sys.argv[1:2] == ["serve"]:
        # `sgm serve` as the program (not a caller's main([...])): its crash watcher, before the ~0.5 s of imports
        # that build the parser, so that a kill in the first moments is said too (consumers/crash_watch.py)
        from .crash_watch import start_crash_watch

        start_crash_watch()
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "_missing", False):
        parser.error(f"command {args.command!r} is not available in this build")
    try:
        status = int(importlib.import_module(args._module).run(args) or 0)
        sys.stdout.flush()  # a write error of the last buffered output surfaces here, not as a message at exit
        return status
    except KeyboardInterrupt:  # Ctrl-C (sgm serve and sgm broker handle SIGINT themselves: a graceful stop)
        print(f"sgm {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader left (`sgm score ... | head`): stop quietly, as other tools do
        _drop_stdout()
        return 1
    except OSError as exc:
        if exc.errno not in _DISK_FULL:
            raise
        # stdout or a file the command writes is on a full disk (or /dev/full): one line, not a traceback
        _drop_stdout()
        where = f": {exc.filename}" if exc.filename else ""
        print(f"sgm {args.command}: cannot write{where}: {exc.strerror}", file=sys.stderr)
        return 1


#: Write errors of a full or failing disk: the command cannot finish its output.
_DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})


def _drop_stdout() -> None:
    """Point stdout at /dev/null, so that flushing it at exit does not raise again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":
    sys.exit(main())
