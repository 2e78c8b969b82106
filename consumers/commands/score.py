"""``sgm score``: labels and posteriors for documents in files (as ``rspamc`` or ``spamassassin -t``).

Prints one line per document, in input order: its id, the output labels, the
top-k posteriors and where it came from (``--json``: one JSON object per line).
Two ways to score:

* through a running service (default): the documents go to the scoring topic
  and the command waits, up to ``--timeout`` seconds, for their outputs;
* ``--state-dir DIR``: locally, with the newest snapshot a service wrote there;
  no broker is needed, and the answers are the ones the service's model at
  that snapshot gives.

Inputs are read as by ``sgm learn`` (JSON Lines, text folders, maildir, mbox,
``.eml``). When the documents carry labels (JSON Lines records, ``--label``,
``--label-from-folder``), the summary also gives the accuracy against them.

Examples::

    sgm score message.eml
    sgm score --state-dir state --json ~/Mail/inbox > verdicts.jsonl
    sgm score --label-from-folder --state-dir state held-out/
"""
from __future__ import annotations

import argparse
import sys

from .. import config as service_config
from ..userdata.connection import add_decision_arguments, add_kafka_arguments
from ..userdata.inputs import add_input_arguments, checked_inputs, documents


#: Shown by --help.
EXAMPLES = """    sgm score message.eml
    sgm score --state-dir state --json ~/Mail/inbox > verdicts.jsonl
    sgm score --label-from-folder --state-dir state held-out/"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = "examples:\n" + EXAMPLES + "\n\nguide: docs/YOUR_DATA.md"
    add_input_arguments(parser, labels="the true label of inputs without labels of their own (for the accuracy "
                                       "in the summary)")
    out = parser.add_argument_group("scoring")
    out.add_argument("--state-dir", default=None, metavar="DIR",
                     help="score locally with the newest snapshot in DIR (no broker); default: through the service")
    out.add_argument("--top-k", type=int, default=3, help="labels with posteriors per document (default 3)")
    out.add_argument("--label-threshold", "--threshold", dest="threshold", type=float, default=None, metavar="T",
                     help="with --state-dir: output every label with probability >= T, as sgm serve --label-threshold "
                          "does (its posterior in per-label mode, its marginal in powerset mode); through the "
                          "service, the service's own --label-threshold applies")
    out.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                     help="through the service: how long to wait for the answers once sent (default 60)")
    out.add_argument("--json", action="store_true", help="one JSON object per line instead of tab-separated text")
    add_decision_arguments(parser, "spam decision (--state-dir: give the service's own, e.g. --preset spam, to get "
                                   "its answers; through the service, the service's decision applies)")
    add_kafka_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from ..userdata.connection import Unreachable, connect
    from ..progress import ProgressLine
    from ..userdata.scoring import format_answer, prepare, score_locally, score_through_service
    from ..userdata.snapshots import NoSnapshot, load_saved_model
    from ..userdata.tally import Tally

    labels = checked_inputs("score", args)
    if labels is None:
        return 2
    if args.top_k < 1:
        print("sgm score: --top-k must be at least 1", file=sys.stderr)
        return 2
    if args.threshold is not None and not 0 < args.threshold <= 1:  # a typo: every label, or none over it
        print(f"sgm score: --label-threshold must lie in (0, 1], got {args.threshold!r}", file=sys.stderr)
        return 2
    if args.threshold is not None and args.state_dir is None:  # the service's labels cannot follow it: say so
        print("sgm score: --label-threshold applies when scoring from a snapshot (--state-dir DIR); through the "
              "service the outputs carry the labels of sgm serve's own --label-threshold", file=sys.stderr)
        return 2
    saved = client = None
    try:
        config = service_config.from_args(args)
        if args.state_dir is not None:
            saved = load_saved_model(args.state_dir)
        else:
            client = connect(config)
    except (NoSnapshot, Unreachable, ValueError) as exc:
        print(f"sgm score: {exc}", file=sys.stderr)
        return 2
    tally = Tally()
    progress = ProgressLine("sgm score", enabled=args.progress)
    entries = prepare(documents(args, labels), tally, progress)
    unanswered: set[str] = set()
    try:
        if saved is not None:
            score_locally(saved, entries, args.top_k, args.threshold, progress, tally, config.decision())
        elif entries:
            unanswered, errors = score_through_service(client, config, entries, args.timeout, progress, tally)
            if errors:
                progress.close()
                print(f"sgm score: the broker did not take the scoring records ({errors[0]})", file=sys.stderr)
                return 1
    except KeyboardInterrupt:
        progress.close()
        print("sgm score: interrupted", file=sys.stderr)
        return 130
    progress.close()
    for entry in entries:
        if entry.answer is not None or entry.doc.id in unanswered:
            print(format_answer(entry.doc, entry.answer, args.json))
    _summary(entries, tally, unanswered, saved, args)
    if unanswered:
        return 1
    return 0 if tally.done else 1


def _summary(entries, tally, unanswered: set[str], saved, args) -> None:
    where = (f"the snapshot {saved.path} (model version {saved.version:,})" if saved is not None
             else "the service")
    print(f"sgm score: {tally.summary('scored', f' by {where}')}", file=sys.stderr)
    if not entries and not tally.skipped_total:
        print(f"sgm score: no documents found in {', '.join(args.paths)}", file=sys.stderr)
    if unanswered:
        print(f"sgm score: {len(unanswered):,} documents got no answer within {args.timeout:g} s "
              "(is sgm serve running on these topics? a busy service may need a longer --timeout)", file=sys.stderr)
    judged = [e for e in entries if e.answer is not None and _usable(e.doc.labels)]
    if judged:
        correct = sum(set(e.answer.labels) == set(e.doc.labels) for e in judged)
        print(f"sgm score: accuracy {correct / len(judged):.4f} ({correct:,} of {len(judged):,} labelled documents)",
              file=sys.stderr)
    if saved is not None:
        known = {label for name in saved.model.classes_
                 for label in (name if isinstance(name, tuple) else (name,))}
        unknown = sorted({label for e in entries if _usable(e.doc.labels) for label in e.doc.labels} - known)
        if unknown:
            print(f"sgm score: labels the model does not know: {', '.join(unknown[:10])} (it knows: "
                  f"{', '.join(sorted(known)[:10]) or 'nothing yet'})", file=sys.stderr)


def _usable(labels) -> bool:
    """Truth labels the summary can judge by: non-empty, each a non-blank string."""
    return bool(labels) and all(isinstance(label, str) and label.strip() for label in labels)
