"""``sgm learn`` and ``sgm forget``: documents from files -> checked training records -> the training topic.

One loop for both: read (:mod:`sgm.stream.sources`), give labels, check each
record with the service's validator, send it keyed by its id, count. The same
id twice in one run is sent once (the second is ``duplicate``); relearning in
a later run is a no-op in the model, which is what makes a rerun safe.
"""
from __future__ import annotations

import argparse
import difflib
import sys
from typing import Iterable

from sgm.stream.kafka import KafkaTransportError, TopicPartition
from sgm.stream.sources import SourceDoc, Skipped

from .. import config as service_config
from .connection import Unreachable, connect
from ..progress import ProgressLine
from .records import checked_record
from .sending import TopicSender
from .tally import Tally

__all__ = ["send_training"]


def send_training(job: str, args: argparse.Namespace, items: Iterable[SourceDoc | Skipped], saved=None) -> int:
    """Send ``items`` as ``job`` records (``learn`` or ``forget``); print the summary; the exit code.

    ``saved`` (a :class:`~.snapshots.SavedModel`): the summary also names the labels sent that its model does
    not know (:func:`new_labels_note`)."""
    command = f"sgm {job}"
    try:
        config = service_config.from_args(args)
    except ValueError as exc:  # an SGM_* variable with a value of the wrong type
        print(f"{command}: {exc}", file=sys.stderr)
        return 2
    dry_run = getattr(args, "dry_run", False)
    sender = None
    if not dry_run:
        try:
            client = connect(config)
        except Unreachable as exc:
            print(f"{command}: {exc}", file=sys.stderr)
            return 2
        sender = TopicSender(client.producer(), config.train_topic)
    verb = "checked" if dry_run else "sent"
    tally, first_origin = Tally(), {}
    progress = ProgressLine(command, enabled=args.progress)
    interrupted = False
    try:
        for item in items:
            if isinstance(item, SourceDoc):
                item = _record(job, item, first_origin)
            if isinstance(item, Skipped):
                tally.skip(item)
                progress.update(**{verb: 0}, skipped=1)
                continue
            doc, value = item
            if sender is not None:
                sender.send(doc.id, value)
            tally.handled(doc.labels)
            progress.update(**{verb: 1})
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if sender is not None:
            sender.close()
        progress.close()
    if not tally.done and not tally.skipped_total:
        print(f"{command}: nothing to {job}: no documents found in {', '.join(map(str, args.paths)) or 'the ids given'}",
              file=sys.stderr)
        return 1
    print(f"{command}: {tally.summary(verb)}")
    note = None if saved is None else new_labels_note(tally.labels, saved)
    if note:
        print(f"{command}: {note}", file=sys.stderr)
    if sender is not None and sender.failed:
        print(f"{command}: the broker did not confirm {sender.failed:,} of {tally.done:,} records "
              f"({'; '.join(sender.errors[:2])}); run the same command again: relearning is a no-op per id",
              file=sys.stderr)
        return 1
    if sender is not None and tally.done:
        end = _log_end(client, config.train_topic)
        where = f"{config.train_topic} at {config.bootstrap_servers}"
        if config.client == "memory":  # (SGM_CLIENT=memory copied from a test set-up): no service will ever read them
            where += " (--client memory: this process's own in-memory broker; they are gone when it exits)"
        print(f"{command}: {tally.done:,} records are in {where}" + (
            f"; the training log ends at {end:,}: a model at version {end:,} or later includes them "
            "(sgm stats shows a model's version)" if end is not None else ""))
    if interrupted:
        print(f"{command}: interrupted; what is counted above was {verb}", file=sys.stderr)
        return 130
    return 0 if tally.done else 1


def new_labels_note(sent, saved) -> str | None:
    """The labels in ``sent`` that the snapshot's model does not know, each with the known labels closest to it.

    >>> from types import SimpleNamespace
    >>> from sgm.model import MNB
    >>> model = MNB("u_jm"); model.learn_many(["wheat", "oil"], [["grain", "wheat"], ["crude"]])
    2
    >>> new_labels_note({"grian": 1, "crude": 3}, SimpleNamespace(model=model, version=2, path="state/s.sgm"))
    'labels new to the model (version 2, state/s.sgm): grian (close to grain); they are learned as given: \
if one is a typo, learn those documents again under their ids with the right label'
    """
    known = {label for name in saved.model.classes_ for label in (name if isinstance(name, tuple) else (name,))}
    new = sorted(set(sent) - known)
    if not new:
        return None
    named = []
    for label in new[:20]:
        close = difflib.get_close_matches(label, known, n=2, cutoff=0.7)
        named.append(f"{label} (close to {', '.join(close)})" if close else label)
    more = f" and {len(new) - 20:,} more" if len(new) > 20 else ""
    return (f"labels new to the model (version {saved.version:,}, {saved.path}): {', '.join(named)}{more}; they are "
            "learned as given: if one is a typo, learn those documents again under their ids with the right label")


def _record(job: str, doc: SourceDoc, first_origin: dict[str, str]) -> tuple[SourceDoc, bytes] | Skipped:
    if job == "learn" and not doc.labels:
        return Skipped(doc.origin, "unlabelled", "no labels of its own: give --label LABEL")
    if isinstance(doc.id, str):
        if doc.id in first_origin:
            return Skipped(doc.origin, "duplicate", f"id {doc.id} already read from {first_origin[doc.id]}")
        first_origin[doc.id] = doc.origin
    value = checked_record(doc, job)
    return value if isinstance(value, Skipped) else (doc, value)


def _log_end(client, topic: str) -> int | None:
    """The training topic's end offset summed over partitions (the version that includes what was sent)."""
    try:
        consumer = client.consumer(None)
        try:
            tps = [TopicPartition(topic, p) for p in consumer.partitions_for(topic)]
            return sum(consumer.end_offsets(tps).values())
        finally:
            consumer.close()
    except KafkaTransportError:
        return None
