"""``sgm forget``: remove documents from the model by id (as ``sa-learn --forget``).

Ids come from ``--id`` (repeatable), from files listing one id per line
(``--id-file``), or from the documents themselves: give the same files as to
``sgm learn`` (with the same ``--ids`` scheme) and their ids are derived the
same way. Each id becomes a ``forget`` record on the training topic; the
service removes exactly what the id contributed. An id the model does not
hold is dead-lettered by the service as ``unknown_id``.

Examples::

    sgm forget ~/Mail/spam-folder/cur/1030000000.M1.host:2,S
    sgm forget --id mail:3f2a9c...
"""
from __future__ import annotations

import argparse
import sys
from typing import Iterator

from sgm.stream.sources import SourceDoc, Skipped

from ..userdata.connection import add_kafka_arguments
from ..userdata.inputs import add_input_arguments, documents


#: Shown by --help.
EXAMPLES = """    sgm forget ~/Mail/spam-folder/cur/1030000000.M1.host:2,S
    sgm forget --id mail:3f2a9c..."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = "examples:\n" + EXAMPLES + "\n\nguide: docs/YOUR_DATA.md"
    add_input_arguments(parser, labels=None)
    parser.add_argument("--id", action="append", default=[], metavar="ID", help="a document id (repeatable)")
    parser.add_argument("--id-file", action="append", default=[], metavar="FILE",
                        help="a file of ids, one per line (repeatable)")
    parser.add_argument("--dry-run", action="store_true", help="read and check everything, send nothing")
    add_kafka_arguments(parser)


def _given_ids(args: argparse.Namespace) -> Iterator[SourceDoc | Skipped]:
    for doc_id in args.id:
        yield SourceDoc(id=doc_id, origin=f"--id {doc_id}")
    for name in args.id_file:
        try:
            with open(name, encoding="utf-8") as handle:
                for number, line in enumerate(handle, start=1):
                    if line.strip():
                        yield SourceDoc(id=line.strip(), origin=f"{name}:{number}")
        except (OSError, UnicodeDecodeError) as exc:
            yield Skipped(name, "unreadable", getattr(exc, "strerror", None) or str(exc))


def run(args: argparse.Namespace) -> int:
    from ..userdata.training import send_training

    if not (args.paths or args.id or args.id_file):
        print("sgm forget: give ids (--id, --id-file) or the files whose documents to forget", file=sys.stderr)
        return 2

    def items() -> Iterator[SourceDoc | Skipped]:
        yield from _given_ids(args)
        if args.paths:
            yield from documents(args)

    return send_training("forget", args, items())
