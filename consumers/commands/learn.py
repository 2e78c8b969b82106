"""``sgm learn``: teach the model documents from files a user has (as ``sa-learn --spam DIR`` does).

Reads JSON Lines (the record fields of docs/SCHEMAS.md), folders of text files
(one document per file), maildir folders, mbox files and ``.eml`` messages
(sent whole, as ``raw_b64``); ``--label`` labels the inputs that carry no
labels. Each document becomes a training record, checked with the service's
own validator and sent to the training topic keyed by a stable id (by default
a digest of its content), so learning the same files again changes nothing.
Prints a progress line and a summary: what was sent, by label, and what was
skipped with the reason and where.

Examples::

    sgm learn --label spam ~/Mail/spam-folder          # a maildir, or any folder of messages
    sgm learn --label ham archive.mbox notes/*.eml
    sgm learn data.jsonl.gz                           # records carry their own labels
    sgm learn --label-from-folder corpus/             # corpus/spam/..., corpus/ham/...
"""
from __future__ import annotations

import argparse
import sys

from ..userdata.connection import add_kafka_arguments
from ..userdata.inputs import add_input_arguments, checked_inputs, documents


#: Shown by --help.
EXAMPLES = """    sgm learn --label spam ~/Mail/spam-folder          # a maildir, or any folder of messages
    sgm learn --label ham archive.mbox notes/*.eml
    sgm learn data.jsonl.gz                           # records carry their own labels
    sgm learn --label-from-folder corpus/             # corpus/spam/..., corpus/ham/..."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = "examples:\n" + EXAMPLES + "\n\nguide: docs/YOUR_DATA.md"
    add_input_arguments(parser, labels="label for inputs without labels of their own (repeat for several)")
    parser.add_argument("--dry-run", action="store_true", help="read and check everything, send nothing")
    parser.add_argument("--state-dir", default=None, metavar="DIR",
                        help="the service's --state-dir: name the labels its newest snapshot does not know yet, with "
                             "the known ones they are closest to (a misspelt label is learned as given)")
    add_kafka_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from ..userdata.training import send_training

    labels = checked_inputs("learn", args)
    if labels is None:
        return 2
    saved = None
    if args.state_dir is not None:
        from ..userdata.snapshots import NoSnapshot, load_saved_model
        try:
            saved = load_saved_model(args.state_dir)
        except NoSnapshot as exc:
            print(f"sgm learn: {exc}", file=sys.stderr)
            return 2
    return send_training("learn", args, documents(args, labels), saved)
