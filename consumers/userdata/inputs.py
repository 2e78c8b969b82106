"""The input arguments shared by ``sgm learn``, ``sgm forget`` and ``sgm score``, and the documents they name.

Paths are files or folders (see :mod:`sgm.stream.sources`); ``--label``
gives labels to inputs that carry none (a folder of spam, say); a record's
own labels (JSON Lines) win. Labels given on the command line are checked
at once, so a bad one is a one-line error before anything is read.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Iterator

from sgm.stream.records import DEFAULT_LIMITS, InvalidRecord, parse_train
from sgm.stream.sources import FORMATS, ID_SCHEMES, SourceDoc, Skipped, read_paths

__all__ = ["add_input_arguments", "check_labels", "documents"]


def add_input_arguments(parser: argparse.ArgumentParser, *, labels: str | None) -> None:
    """``PATH...``, ``--format``, ``--ids`` and, when ``labels`` (its help text) is given, ``--label``."""
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="files or folders: JSON Lines (.jsonl, .jsonl.gz), maildir, mbox, .eml, "
                             "or any other file as one text document")
    group = parser.add_argument_group("input")
    if labels:
        group.add_argument("--label", action="append", default=[], metavar="LABEL", help=labels)
        group.add_argument("--label-from-folder", action="store_true",
                           help="label a document by the first folder below the one given (DIR/spam/1.txt -> spam)")
    group.add_argument("--format", choices=FORMATS, default="auto",
                       help="read every file as this (default auto: by name and content)")
    group.add_argument("--ids", choices=ID_SCHEMES, default="content",
                       help="document ids from the content (default: the same message has the same id wherever "
                            "it is) or from the path relative to the folder given")
    group.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                       help="progress line on stderr (default: when stderr is a terminal)")


def check_labels(labels: list[str]) -> tuple[str, ...]:
    """The ``--label`` values, validated as the service validates labels; ``ValueError`` with the reason."""
    if not labels:
        return ()
    probe = {"id": "x", "text": "", "labels": labels}
    try:
        record = parse_train(json.dumps(probe).encode("utf-8"), DEFAULT_LIMITS)
    except InvalidRecord as exc:
        raise ValueError(f"--label: {exc.detail}") from None
    return record.labels


def checked_inputs(command: str, args: argparse.Namespace) -> tuple[str, ...] | None:
    """The checked ``--label`` values of ``sgm COMMAND``, or ``None`` once a one-line error is printed
    (a bad label, or no paths given)."""
    try:
        labels = check_labels(args.label)
    except ValueError as exc:
        print(f"sgm {command}: {exc}", file=sys.stderr)
        return None
    if not args.paths:
        print(f"sgm {command}: give files or folders to {command} (sgm {command} --help)", file=sys.stderr)
        return None
    if not any(os.path.lexists(path) for path in args.paths):  # a typo: say so before waiting for a broker
        named = ", ".join(repr(str(path)) for path in args.paths[:3]) + (", ..." if len(args.paths) > 3 else "")
        print(f"sgm {command}: no such file or folder: {named}", file=sys.stderr)
        return None
    return labels


def documents(args: argparse.Namespace, labels: tuple[str, ...] = ()) -> Iterator[SourceDoc | Skipped]:
    """The documents under ``args.paths``; ``labels`` go to those without labels of their own."""
    for item in read_paths(args.paths, fmt=args.format, ids=args.ids,
                           label_from_folder=getattr(args, "label_from_folder", False)):
        if labels and isinstance(item, SourceDoc) and not item.labels:
            item = item.with_labels(labels)
        yield item
