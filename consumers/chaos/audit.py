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
``silent_deaths``
    Deaths by a signal (the campaign's SIGKILLs of a process whose crash
    watcher was running, crashes) without the watcher's ``ended without
    shutting down`` line in the process's log (``consumers/crash_watch.py``;
    a process killed in its first ~50 ms has no watcher yet).

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

from ..config import ServiceConfig
from ..service.event_time import guard_for
from ..service.training import TrainingEvents, apply_in_log_order
from ..crash_watch import DEATH_LINE
from .processes import Supervised
from .topics import POISON_KEY, Tail


class _ExpectedDeadLetters(TrainingEvents):
    """Collects ``{(partition, offset): reason}`` of every record the dispatch rejects."""

    def __init__(self) -> None:
        self.reasons: dict[tuple[int, int], str] = {}

    def rejected(self, record, reason, detail, doc_id=None) -> None:
        self.reasons[(record.partition, record.offset)] = reason.value


def replay(records, model_config: dict[str, Any], max_event_skew: float | None = None):
    """Apply training records in log order, as the service does; returns (model, expected dead letters).

    The service's own dispatch (``consumers/service/training.py``) applies
    them, with the same event-time guard (``max_event_skew``). Expected dead
    letters are ``{(partition, offset): reason}`` for every record the
    validator or the model refuses (``ApplyReason`` codes included).

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
    apply_in_log_order(model, records, {}, expected, guard=guard_for(max_event_skew))
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


def read_training_log(client, topic: str, end: int, timeout: float = 120.0,
                      stuck_after: float = 8.0) -> tuple[list, list[int]]:
    """The training topic's records from offset 0 up to ``end`` (its single partition), and the offsets this
    client could not fetch (a poison record: nothing arrives for ``stuck_after`` s; read on past it)."""
    tp = TopicPartition(topic, 0)
    records: list = []
    unfetchable: list[int] = []
    position = 0
    read_until = time.monotonic() + timeout
    while position < end and time.monotonic() < read_until:
        # anew after a skip (a too-large response breaks the old one's connection), with the processes' fetch limit
        reader = client.consumer(None, max_response_bytes=ServiceConfig.max_fetch_bytes)
        reader.assign([tp])
        reader.seek(tp, position)
        last_progress = time.monotonic()
        while position < end and time.monotonic() < read_until:
            try:
                batch = reader.poll(10_000, 1.0)
            except Exception:  # noqa: BLE001 - a broken connection: judged like a stall below
                batch = []
            if batch:
                records.extend(batch)
                position = batch[-1].offset + 1
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > stuck_after:
                unfetchable.append(position)
                position += 1
                break
        reader.close()
    return records, unfetchable


def audit(config, *, client, topics: dict[str, str], processes: list[Supervised], exits: dict[str, int | None],
          tail: Tail, fault_log: list[dict[str, Any]], train_end: int, scoring_records: int, valid_ids: set[str],
          started: float, work: Path) -> dict[str, Any]:
    """The result of a finished campaign (the dict ``sgm chaos`` prints), every process stopped.

    ``config`` is the :class:`~.campaign.CampaignConfig`; ``started`` the
    campaign's start on the monotonic clock.
    """
    log_records, unfetchable = read_training_log(client, topics["train"], train_end)
    reference, expected_train = replay(log_records, config.model_config(), config.max_event_skew)
    for offset in unfetchable:  # what no client fetches, the service must dead-letter by position
        expected_train[(0, offset)] = "unfetchable"
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
            elif msg == "training log reset: the training topic is not the log the model was built from":
                events["training log reset"] += 1
            elif msg == "service started":
                events["started"] += 1
        # every death the campaign caused (SIGKILL) or saw (a signal) must be said by the process's crash watcher
        info["deaths"] = proc.watched_kills + sum(1 for crash in proc.crashes if (crash["returncode"] or 0) < 0)
        info["deaths_said"] = proc.log_path.read_text(errors="replace").count(DEATH_LINE)
        info["transport_errors"] = dict(errors)
        info["rescore_events"] = {k: v for k, v in events.items() if k not in ("training log reset", "started")}
        info["training_log_resets"] = events["training log reset"]
        info["service_starts"] = events["started"]
        per_process[proc.name] = info
    crashes = sum(len(p.crashes) for p in processes) + sum(1 for code in exits.values() if code != 0)
    silent_deaths = sum(max(info["deaths"] - info["deaths_said"], 0) for info in per_process.values())
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
        "silent_deaths": silent_deaths,
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
        "field_faults": field_fault_outcomes(fault_log, per_process, letters, topics, expected_train,
                                             sorted(unfetchable + [r.offset for r in log_records if r.key == POISON_KEY])),
        "seconds": round(time.monotonic() - started, 1),
        "work_dir": str(work),
        "config": {k: v for k, v in asdict(config).items() if k != "work_dir"},
    }
    result["ok"] = (lost == 0 and doubled == 0 and unanswered == 0 and crashes == 0 and silent_deaths == 0
                    and checksum_match
                    and not missing and duplicates <= bound and result["field_faults"]["ok"])
    if tail.error is not None:
        result["ok"] = False
        result["tail_error"] = repr(tail.error)
    return result


def field_fault_outcomes(fault_log: list[dict[str, Any]], per_process: dict[str, dict[str, Any]], letters: list,
                         topics: dict[str, str], expected_train: dict, poison_offsets: list[int]) -> dict[str, Any]:
    """What the field faults of the campaign (issue #15) came to, and whether each was handled.

    ``broker_down_at_start``: every process came up (no crash counted elsewhere) after retrying;
    ``topic_recreated``: every process noticed the new training log and rebuilt (its checksum then
    matches the replay of the new log, checked with ``lost`` / ``double_counted``);
    ``clock_skewed``: each future record dead-lettered as ``future_timestamp``;
    ``poison_record``: the 101 MB record dead-lettered by position: ``too_large`` when the client's fetch limit
    (``--max-fetch-bytes``) lets it be read, ``unfetchable`` when not, and the partition moved on.
    """
    faults = {entry["fault"]: entry for entry in fault_log if entry["fault"] not in ("kill", "freeze")}
    train_letters = Counter((o, r) for t, _p, o, r in letters if t == topics["train"])
    out: dict[str, Any] = {}
    ok = True
    if "broker_down_at_start" in faults:
        retries = {name: info["transport_errors"].get("start", 0) for name, info in per_process.items()}
        up = all(info["service_starts"] >= 1 for info in per_process.values())
        out["broker_down_at_start"] = {"seconds": faults["broker_down_at_start"]["seconds"],
                                       "start_retries": retries, "all_came_up": up}
        ok &= up and all(count >= 1 for count in retries.values())
    if "topic_recreated" in faults:
        resets = {name: info["training_log_resets"] for name, info in per_process.items()}
        out["topic_recreated"] = {**{k: v for k, v in faults["topic_recreated"].items() if k != "fault"},
                                  "policy": "rebuild", "resets": resets}
        ok &= all(count >= 1 for count in resets.values())
    future = sorted(o for (_p, o), r in expected_train.items() if r == "future_timestamp")
    got_future = sum(1 for o in future if train_letters[(o, "future_timestamp")])
    out["clock_skewed"] = {"records": len(future), "dead_lettered": got_future}
    ok &= got_future == len(future)
    if "poison_record" in faults:
        reasons = {o: r for (_p, o), r in expected_train.items() if o in poison_offsets}
        out["poison_record"] = {"bytes": faults["poison_record"]["bytes"], "offsets": poison_offsets,
                                "reasons": reasons,
                                "dead_lettered": [o for o in poison_offsets if train_letters[(o, reasons.get(o))]]}
        ok &= len(poison_offsets) == 1 and out["poison_record"]["dead_lettered"] == poison_offsets
    out["ok"] = bool(ok)
    return out
