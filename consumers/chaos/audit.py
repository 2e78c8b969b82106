"""The audit of a fault campaign: the reference replay, and every check ``sgm chaos`` reports.

``lost`` / ``double_counted``
    The training log is read back and replayed in order into a fresh model,
    as an uninterrupted service would apply it: the reference. Each process's
    final snapshot must have the reference's state checksum. When it does not,
    its documents are compared with the reference's: ids the reference holds
    that the model lacks or holds with other content are *lost*; ids the model
    holds that the reference does not (a learn re-applied after its forget) and
    changed ids learned later than in the reference are *double counted*.
    Totals over processes.
``unanswered``
    Valid scoring ids without any output.
``duplicates`` and ``duplicate_bound``
    Outputs beyond the first per id (scoring is at least once), and what can
    explain them: for each classifier kill, the outputs that were written but
    not committed when it died (measured: answered ids at or above the group's
    committed offsets, after the kill), plus one batch (``max_poll_records``)
    for every batch the classifiers' logs say they rescored or could not commit
    (delivery failure, commit refused after a rebalance, commit error).
``bad_inputs`` and ``dead_letters_missing``
    Records that must be rejected (malformed ones, and the hostile ones the
    reference model refuses) and how many of them have no dead letter with the
    expected reason.
``crashes``
    Processes that exited without being killed by the campaign, or exited
    non-zero on SIGTERM.

``ok`` is true when nothing is lost, double counted, unanswered, missing from
the DLQ or crashed, the checksums match and duplicates are within the bound.
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from sgm.model import build_model
from sgm.model.persistence import loads as load_snapshot, read_meta
from sgm.stream.kafka import TopicPartition
from sgm.stream.snapshot_store import SnapshotStore

from ..service.training import TrainingEvents, apply_in_log_order
from .processes import Supervised
from .topics import Tail


class _ExpectedDeadLetters(TrainingEvents):
    """Collects ``{(partition, offset): reason}`` of every record the dispatch rejects."""

    def __init__(self) -> None:
        self.reasons: dict[tuple[int, int], str] = {}

    def rejected(self, record, reason, detail, doc_id=None) -> None:
        self.reasons[(record.partition, record.offset)] = reason.value


def replay(records, model_config: dict[str, Any]):
    """Apply training records in log order, as the service does; returns (model, expected dead letters).

    The service's own dispatch (``consumers/service/training.py``) applies
    them. Expected dead letters are ``{(partition, offset): reason}`` for every
    record the validator or the model refuses (``ApplyReason`` codes included).

    Examples
    --------
    >>> from sgm.stream.kafka import Record
    >>> values = [b'{"id": "m1", "labels": ["spam"], "text": "cheap pills"}', b'{"id": "m1", "op": "forget"}',
    ...           b'{"id": "m1", "op": "forget"}']
    >>> model, expected = replay([Record("train", 0, i, None, v) for i, v in enumerate(values)], {"model": "u_jm"})
    >>> len(model), expected
    (0, {(0, 2): 'unknown_id'})
    """
    model = build_model(model_config)
    expected = _ExpectedDeadLetters()
    apply_in_log_order(model, records, {}, expected)
    return model, expected.reasons


def compare_models(model, reference) -> tuple[int, int]:
    """(lost, double counted) documents of ``model`` against ``reference`` (see the module docstring)."""
    have, want = model.document_ids(), reference.document_ids()
    lost = len(want - have)
    doubled = len(have - want)
    for doc_id in want & have:
        mine, theirs = model.document(doc_id), reference.document(doc_id)
        if mine[:3] != theirs[:3]:  # labels, event time, term counts
            if mine.seq > theirs.seq:
                doubled += 1
            else:
                lost += 1
    return lost, doubled


def read_training_log(client, topic: str, end: int, timeout: float = 120.0) -> list:
    """The training topic's records from offset 0 up to ``end`` (its single partition)."""
    reader = client.consumer(None)
    reader.assign([TopicPartition(topic, 0)])
    records: list = []
    read_until = time.monotonic() + timeout
    while len(records) < end and time.monotonic() < read_until:
        records.extend(reader.poll(10_000, 1.0))
    reader.close()
    return records


def audit(config, *, client, topics: dict[str, str], processes: list[Supervised], exits: dict[str, int | None],
          tail: Tail, fault_log: list[dict[str, Any]], train_end: int, scoring_records: int, valid_ids: set[str],
          started: float, work: Path) -> dict[str, Any]:
    """The result of a finished campaign (the dict ``sgm chaos`` prints), every process stopped.

    ``config`` is the :class:`~.campaign.CampaignConfig`; ``started`` the
    campaign's start on the monotonic clock.
    """
    reference, expected_train = replay(read_training_log(client, topics["train"], train_end), config.model_config())
    ref_checksum = reference.checksum()
    per_process: dict[str, dict[str, Any]] = {}
    lost = doubled = 0
    for proc in processes:
        found = SnapshotStore(proc.state_dir).latest()
        info: dict[str, Any] = {"role": proc.role, "starts": proc.starts, "kills": proc.kills,
                                "crashes": len(proc.crashes), "exit": exits[proc.name]}
        if found is None:
            info.update(checksum_match=False, train_offset=0)
            lost += len(reference)
        else:
            meta = read_meta(found[1])
            info["train_offset"] = int(meta["extra"]["train_offsets"].get("0", 0))
            info["checksum_match"] = meta["state_checksum"] == ref_checksum
            if not info["checksum_match"]:
                model, _ = load_snapshot(found[1])
                p_lost, p_doubled = compare_models(model, reference)
                info.update(lost=p_lost, double_counted=p_doubled,
                            adds_delta=model.stats()["learned_total"] - reference.stats()["learned_total"])
                lost += p_lost
                doubled += p_doubled
        errors = Counter()
        events = Counter()
        for line in proc.log_lines():
            msg = line.get("msg")
            if msg == "kafka error; retrying":
                errors[line.get("stage", "?")] += 1
            elif msg in ("commit failed after rebalance; outputs of this batch may be duplicated",
                         "output delivery failed; rescoring the batch"):
                events[msg.split(";")[0]] += 1
        info["transport_errors"] = dict(errors)
        info["rescore_events"] = dict(events)
        per_process[proc.name] = info
    crashes = sum(len(p.crashes) for p in processes) + sum(1 for code in exits.values() if code != 0)
    with tail.lock:
        outputs = Counter(tail.outputs)
        letters = list(tail.letters)
        score_invalid = dict(tail.score_invalid)
    unanswered = len(valid_ids - outputs.keys())
    duplicates = sum(n - 1 for doc_id, n in outputs.items() if doc_id in valid_ids)
    rescore_batches = sum(sum(info["rescore_events"].values()) + info["transport_errors"].get("score_commit", 0)
                          for info in per_process.values() if info["role"] == "classifier")
    measured = sum(max(f.get("in_flight", 0), 0) for f in fault_log)
    bound = measured + config.max_poll_records * rescore_batches
    got_letters = Counter()
    for topic, partition, offset, reason in letters:
        source = "train" if topic == topics["train"] else "score" if topic == topics["score"] else "?"
        got_letters[(source, partition, offset, reason)] += 1
    expected_letters = {("train", p, o, r) for (p, o), r in expected_train.items()}
    expected_letters |= {("score", p, o, r) for (p, o), r in score_invalid.items()}
    missing = expected_letters - got_letters.keys()
    unexpected = got_letters.keys() - expected_letters
    transport_errors = Counter()
    for info in per_process.values():
        transport_errors.update(info["transport_errors"])
    checksum_match = all(info.get("checksum_match") for info in per_process.values())
    result = {
        "faults": len(fault_log),
        "kills": {"trainer": sum(f.get("role") == "trainer" for f in fault_log),
                  "classifier": sum(f.get("role") == "classifier" for f in fault_log)},
        "freezes": sum(f["fault"] == "freeze" for f in fault_log),
        "freeze_seconds": config.freeze_seconds,
        "lost": lost,
        "double_counted": doubled,
        "unanswered": unanswered,
        "bad_inputs": len(expected_letters),
        "dead_letters_missing": len(missing),
        "dead_letters_unexpected": len(unexpected),
        "dead_letter_duplicates": sum(n - 1 for n in got_letters.values()),
        "crashes": crashes,
        "checksum_match": checksum_match,
        "reference_checksum": ref_checksum,
        "training_records": train_end,
        "scoring_records": scoring_records,
        "valid_scoring_ids": len(valid_ids),
        "duplicates": duplicates,
        "duplicate_bound": bound,
        "in_flight_at_faults": measured,
        "rescored_or_uncommitted_batches": rescore_batches,
        "transport_errors": dict(transport_errors),
        "processes": per_process,
        "fault_log": fault_log,
        "seconds": round(time.monotonic() - started, 1),
        "work_dir": str(work),
        "config": {k: v for k, v in asdict(config).items() if k != "work_dir"},
    }
    result["ok"] = (lost == 0 and doubled == 0 and unanswered == 0 and crashes == 0 and checksum_match
                    and not missing and duplicates <= bound)
    if tail.error is not None:
        result["ok"] = False
        result["tail_error"] = repr(tail.error)
    return result
