"""``sgm stats``: what a model holds (as ``sa-learn --dump magic`` or ``rspamc stat``).

Reads the newest snapshot in a state directory (a running service's
``--state-dir``: its snapshots trail the live model by at most the snapshot
interval, and the output says how old the snapshot is) and prints the model's
configuration, its version (position in the training log), documents per
label, vocabulary, postings, approximate memory, and model time; given the
service's spam decision (``--preset spam``, ``--min-spam``, ``--min-ham``...),
also the state of its learn guards (documents held against the minimums).
``--json`` prints the same as one JSON object.

Examples::

    sgm stats --state-dir state
    sgm stats --state-dir /var/lib/sgm/state --json
    sgm stats --state-dir state --preset spam --min-spam 200 --min-ham 200
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime, timezone

from .. import config as service_config
from ..userdata.connection import add_decision_arguments


#: Shown by --help.
EXAMPLES = """    sgm stats --state-dir state
    sgm stats --state-dir /var/lib/sgm/state --json
    sgm stats --state-dir state --preset spam --min-spam 200 --min-ham 200"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = "examples:\n" + EXAMPLES + "\n\nguide: docs/YOUR_DATA.md"
    parser.add_argument("--state-dir", default=os.environ.get("SGM_STATE_DIR", "state"), metavar="DIR",
                        help="the service's state directory [env SGM_STATE_DIR; default 'state']")
    parser.add_argument("--labels", type=int, default=30, metavar="N", help="labels listed (default 30, 0 = all)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_decision_arguments(parser, "spam decision (the service's own, e.g. --preset spam: shows its learn guards)")


def run(args: argparse.Namespace) -> int:
    from sgm.model.summary import model_summary

    from ..userdata.snapshots import NoSnapshot, load_saved_model

    try:
        decision = service_config.from_args(args).decision()
        saved = load_saved_model(args.state_dir)
    except (NoSnapshot, ValueError) as exc:
        print(f"sgm stats: {exc}", file=sys.stderr)
        return 2
    summary = model_summary(saved.model)
    if decision is not None:
        learned = decision.learned_from(saved.model)
        summary["decision"] = {**decision.to_dict(), "learned": learned, "ready": decision.ready(learned)}
    summary["snapshot"] = {"path": str(saved.path), "bytes": saved.bytes, "version": saved.version,
                           "train_offsets": {str(p): o for p, o in sorted(saved.train_offsets.items())},
                           "train_topic": saved.extra.get("train_topic"), "written_at": saved.extra.get("written_at"),
                           "age_seconds": saved.age_seconds, "checksum": saved.model.checksum()}
    if args.json:
        print(json.dumps(summary, indent=2, sort_keys=True))
    else:
        print(format_summary(summary, args.labels))
    return 0


def format_summary(summary: dict, max_labels: int = 30) -> str:
    """The human-readable form of ``model_summary`` plus the snapshot facts."""
    snap = summary["snapshot"]
    params = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in summary["params"].items())
    decay = f"half-life {summary['half_life']:g} s" if summary["half_life"] else "no decay"
    age = "" if snap["age_seconds"] is None else f", written {_duration(snap['age_seconds'])} ago"
    lines = [
        f"model       {summary['spec']} ({params or 'no parameters'}; {summary['multilabel']}; {decay})",
        f"snapshot    {snap['path']} ({snap['bytes']:,} bytes{age})",
        f"version     {snap['version']:,} (training offsets of {snap['train_topic']}: "
        f"{', '.join(f'{p}: {o:,}' for p, o in snap['train_offsets'].items()) or 'none'})",
        f"documents   {summary['documents']:,} live ({summary['learned_total']:,} learned in all; "
        f"{summary['pruned_documents']:,} pruned, {summary['expired_documents']:,} expired)",
        f"labels      {len(summary['labels']):,}",
    ]
    shown = summary["labels"] if max_labels <= 0 else summary["labels"][:max_labels]
    width = max((len(item["label"]) for item in shown), default=0)
    decays = bool(summary["half_life"])
    for item in shown:
        weight = f"  (decayed weight {item['weight']:.6g})" if decays else ""
        lines.append(f"  {item['label']:<{width}}  {item['documents']:>10,} documents{weight}")
    if len(shown) < len(summary["labels"]):
        lines.append(f"  ... and {len(summary['labels']) - len(shown):,} more (--labels 0 lists all)")
    lines += [
        f"vocabulary  {summary['vocabulary']:,} terms",
        f"postings    {summary['postings']:,} (label, term) entries",
        f"memory      ~{summary['bytes'] / 1e6:,.1f} MB in a process that loads it",
        f"model time  {_time(summary['model_time'])} (the latest event time learned)",
    ]
    decision = summary.get("decision")
    if decision:
        learned = decision["learned"]
        state = ("met: verdicts are given" if decision["ready"]
                 else "not met: every verdict is not_ready until the model holds enough of both")
        weight = (f" (the posterior with the class prior counted {decision['prior_weight']:g} times)"
                  if "prior_weight" in decision else "")
        lines.append(f"decision    {decision['label']} at p >= {decision['threshold']:g}{weight}; learn guards "
                     f"{decision['label']} {learned['spam']:,} of {decision['min_spam']:,}, others "
                     f"{learned['ham']:,} of {decision['min_ham']:,}: {state}")
    lines.append(f"checksum    {snap['checksum']}")
    return "\n".join(lines)


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h" if seconds < 172800 else f"{seconds / 86400:.1f} days"


def _time(ts) -> str:
    if not ts:  # no document carried an event time (0.0: the clock never moved)
        return "none"
    try:
        return datetime.fromtimestamp(float(ts), tz=timezone.utc).isoformat(timespec="seconds")
    except (OverflowError, OSError, ValueError):
        return str(ts)
