"""Where a service stands and when that is saved: snapshots of the training side, commits of the scoring side.

Training (exactly once): the model and the training offsets it includes move
together (:class:`ModelState`) and are saved together in one snapshot file,
on a schedule (every ``snapshot_every_records`` records or
``snapshot_every_seconds`` seconds) and at graceful shutdown, never while a
batch is half applied. :func:`restore` reads them back at start.

Scoring (at least once): the offsets of a batch are committed to the group
only after its outputs were acknowledged; a commit that fails for a Kafka
error is kept and merged into the next; a batch whose outputs failed is
rewound and scored again. docs/PROTOCOL.md has the whole protocol.
"""
from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

from sgm.model import Ensemble, GenerativeTextModel, SpecError, build_model, model_config
from sgm.model.persistence import SnapshotError, load as load_snapshot
from sgm.stream.kafka import CommitFailedError, KafkaTransportError, Record, TopicPartition
from sgm.stream.snapshot_store import SnapshotStore
from sgm.stream.records import model_version

from ..config import ServiceConfig
from ..prometheus import ServiceMetrics
from .connections import Connections
from .housekeeping import freeze_long_lived_heap, release_free_memory
from .retry import KafkaErrors

log = logging.getLogger("sgm.service")

#: After a failed snapshot the next try waits this long, doubling per failure in a row up to the maximum (s).
SNAPSHOT_RETRY_MIN, SNAPSHOT_RETRY_MAX = 1.0, 60.0


class ConfigMismatch(RuntimeError):
    """The snapshot on disk was made with another model configuration or topic (:func:`restore` refuses it;
    ``sgm serve`` says so in one line and exits 2).

    Examples
    --------
    >>> import tempfile
    >>> from sgm.model import MNB
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     store = SnapshotStore(folder)
    ...     _ = store.save(MNB("u_jm").to_bytes({"train_topic": "sgm-train", "train_offsets": {}}))
    ...     restore(ServiceConfig(model="u_dp", state_dir=folder), store, None)
    Traceback (most recent call last):
    ...
    sgm.consumers.service.checkpoint.ConfigMismatch: ...snapshot-000000000001.sgm was made with another model \
configuration than requested: model 'mnb_u_jm' (requested: 'mnb_u_dp'), ...; start with the snapshot's settings ...
    """


@dataclass
class LogIdentity:
    """What a model remembers of the training log it applied (kept in its snapshots; log_identity.py)."""

    topic_id: str | None = None
    partitions: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"topic_id": self.topic_id, "partitions": self.partitions}

    @classmethod
    def from_dict(cls, data: Any) -> "LogIdentity":
        if not isinstance(data, dict):
            return cls()
        topic_id, partitions = data.get("topic_id"), data.get("partitions")
        return cls(topic_id if isinstance(topic_id, str) else None,
                   partitions if isinstance(partitions, int) and not isinstance(partitions, bool) else None)


@dataclass
class ModelState:
    """The model and, per training partition, the next offset it has not applied: they only move together.

    Examples
    --------
    >>> from sgm.model import MNB
    >>> state = ModelState(MNB("u_jm"), {0: 2})
    >>> state.model.learn_one("cheap pills", ["spam"], id="m1")
    True
    >>> state.info()
    {'kind': 'mnb', 'spec': 'mnb_u_jm', 'documents': 1, 'version': 2, 'train_offsets': {'0': 2}}
    """

    model: GenerativeTextModel | None = None
    train_offsets: dict[int, int] = field(default_factory=dict)
    log: LogIdentity = field(default_factory=LogIdentity)  # the training log the offsets refer to

    def info(self) -> dict[str, Any]:
        """Which model scored (written into every output): the training offsets it had applied, its
        version (the position in the training log, :func:`sgm.stream.records.model_version`) and size."""
        model = self.model
        return {"kind": model.family, "spec": model.spec.name, "documents": len(model),
                "version": model_version(self.train_offsets),
                "train_offsets": {str(p): o for p, o in sorted(self.train_offsets.items())}}


def restore(config: ServiceConfig, store: SnapshotStore, metrics: ServiceMetrics) -> ModelState:
    """The newest snapshot's model and offsets, or an empty model at offsets 0 when there is none.

    A corrupt or oversized snapshot raises :class:`SnapshotError`, one made
    with another model configuration or training topic :class:`ConfigMismatch`:
    the process stops instead of silently starting from older state. An ensemble's
    snapshot is read the same way (:data:`sgm.model.persistence.COMPOSITE_FORMAT`).
    """
    wanted = build_model(config.model_config())
    if isinstance(wanted, Ensemble):
        if not wanted.reads_messages_one_way:  # the service reads a message once, for every base
            raise SpecError("an ensemble served must have bases with the same mail options (one reading of a message)")
        decision = config.decision()
        if decision is not None and decision.prior_weight is not None:  # the pool has no one class prior
            raise SpecError("a spam decision's prior weight does not apply to an ensemble (its pool has no single "
                            "class prior): leave --spam-prior-weight unset")
    store.remove_leftovers()
    path = store.latest_path()
    if path is None:
        return ModelState(wanted, {})
    try:
        with open(path, "rb") as handle:  # read one array at a time: no copy of the file in memory
            model, extra = load_snapshot(handle, max_bytes=config.max_snapshot_bytes)
        if not isinstance(extra, dict) or not isinstance(extra.get("train_offsets", {}), dict):
            raise SnapshotError("its offsets header is not a mapping")
        offsets = {int(p): int(o) for p, o in extra.get("train_offsets", {}).items()}
        if any(p < 0 or o < 0 for p, o in offsets.items()):
            raise SnapshotError("it holds a negative partition or offset")
    except (SnapshotError, TypeError, ValueError, OverflowError) as exc:
        raise SnapshotError(f"{path}: {exc}; refusing to start (move the file away to start from older state)") from None
    if extra.get("train_topic") != config.train_topic:
        raise ConfigMismatch(f"{path} holds training offsets of topic {extra.get('train_topic')!r}, "
                             f"not {config.train_topic!r}")
    have, want = model_config(model), model_config(wanted)
    if have != want:
        raise ConfigMismatch(f"{path} was made with another model configuration than requested: "
                             f"{config_differences(have, want)}; start with the snapshot's settings to keep its model, "
                             "or use another --state-dir (or delete it) to start a new model (snapshot: "
                             f"{have}; requested: {want})")
    written_at = extra.get("written_at")
    metrics.snapshot_restored(written_at if isinstance(written_at, (int, float)) else None)
    log.info("restored snapshot", extra={"path": str(path), "documents": len(model), "train_offsets": offsets})
    return ModelState(model, offsets, LogIdentity.from_dict(extra.get("train_log")))


def config_differences(have: dict[str, Any], want: dict[str, Any]) -> str:
    """The settings in which two model configurations differ, named, for an operator to fix.

    >>> config_differences({"model": "mnb_u_jm", "params": {"beta": 0.5}, "multilabel": "per_label"},
    ...                    {"model": "mnb_u_jm", "params": {"beta": 0.3}, "multilabel": "powerset"})
    "params.beta 0.5 (requested: 0.3), multilabel 'per_label' (requested: 'powerset')"
    """
    def named(have: dict[str, Any], want: dict[str, Any], prefix: str) -> list[str]:
        found = []
        for key in list(have) + [k for k in want if k not in have]:
            old, new = have.get(key), want.get(key)
            if isinstance(old, dict) and isinstance(new, dict):
                found += named(old, new, f"{prefix}{key}.")
            elif old != new:
                found.append(f"{prefix}{key} {old!r} (requested: {new!r})")
        return found

    return ", ".join(named(have, want, ""))


class Checkpoint:
    """The snapshot schedule of the training side and the commits of the scoring side.

    Parameters
    ----------
    config : ServiceConfig
    state : ModelState
        What a snapshot saves.
    store : SnapshotStore
    metrics : ServiceMetrics
    connections : Connections
        Its scoring consumer commits, seeks back and reports its assignment.
    errors : KafkaErrors
    """

    def __init__(self, config: ServiceConfig, state: ModelState, store: SnapshotStore, metrics: ServiceMetrics,
                 connections: Connections, errors: KafkaErrors) -> None:
        self.config, self.state, self.store, self.metrics = config, state, store, metrics
        self.connections, self.errors = connections, errors
        # training side
        self.pending = 0  # training records applied since the last snapshot
        self.last_attempt = time.time()  # the schedule counts from the last snapshot written or failed
        self.last_written: float | None = None
        self.half_applied = False  # True while a training batch is half applied: never snapshot then
        self.failures_in_row = 0  # snapshot writes that failed since the last one written
        self.retry_at = 0.0  # no try before this time after a failure (backoff)
        # scoring side
        self.uncommitted: dict[TopicPartition, int] = {}  # acknowledged offsets a failed commit left behind
        self.acknowledged: dict[TopicPartition, int] = {}  # end of the last acknowledged batch per partition (lag)

    # ------------------------------------------------------------------ training: snapshots
    @contextlib.contextmanager
    def applying(self) -> Iterator[None]:
        """Around one training batch: until it ends, the model and the offsets may disagree.

        An exception inside leaves :attr:`half_applied` set, so that no
        snapshot of the half-applied batch is ever written.
        """
        self.half_applied = True
        yield
        self.half_applied = False

    def applied(self) -> None:
        """One more training record applied (or rejected) and its offset advanced."""
        self.pending += 1

    def snapshot_due(self, now: float) -> bool:
        cfg = self.config
        if not self.pending or now < self.retry_at:
            return False
        return self.pending >= cfg.snapshot_every_records or now - self.last_attempt >= cfg.snapshot_every_seconds

    def snapshot(self) -> bool:
        """Write the model with its training offsets, atomically; True when written.

        Before writing, every total of the model is re-summed from its live
        documents (``model.resum_totals()``: every base of an ensemble): any drift is counted in
        ``sgm_model_totals_drift_total``, logged and repaired. A failed write
        (disk full, permissions, larger than ``--max-snapshot-bytes``) leaves
        no partial file and is retried with a backoff (1 s doubling to 60 s),
        the service serving meanwhile.
        """
        started = time.perf_counter()
        model = self.state.model
        drift = model.resum_totals()
        if drift:
            self.metrics.totals_drift.inc(drift)
            log.error("model totals drifted from a re-summation of the live documents; repaired",
                      extra={"totals": drift})
        extra = {"train_topic": self.config.train_topic,
                 "train_offsets": {str(p): o for p, o in self.state.train_offsets.items()},
                 "train_log": self.state.log.to_dict(),
                 "written_at": time.time(), "role": self.config.role}
        try:
            saved = self.store.save(lambda handle: model.write_snapshot(handle, extra))
        except (OSError, SnapshotError) as exc:  # disk full, permissions, too large: keep serving, retry later
            self.last_attempt = time.time()
            self.failures_in_row += 1
            wait = min(SNAPSHOT_RETRY_MIN * 2 ** (self.failures_in_row - 1), SNAPSHOT_RETRY_MAX)
            self.retry_at = self.last_attempt + wait
            self.metrics.snapshot_failures.inc()
            log.error("snapshot failed; will retry", extra={"error": str(exc), "state_dir": self.config.state_dir,
                                                            "retry_in": wait, "failures_in_row": self.failures_in_row})
            return False
        finally:
            release_free_memory()  # the serialization buffers (about one array at a time) go back to the OS
        freeze_long_lived_heap()  # what was learned since the last snapshot is long-lived too
        self.pending = 0
        self.failures_in_row, self.retry_at = 0, 0.0
        self.last_attempt = self.last_written = time.time()
        self.metrics.snapshot_written(saved.bytes, time.perf_counter() - started, self.last_written)
        log.info("snapshot written", extra={"path": str(saved.path), "bytes": saved.bytes,
                                            "train_offsets": self.state.train_offsets})
        return True

    def final_snapshot(self) -> bool:
        """At shutdown: save what was applied since the last snapshot, unless a batch was interrupted.

        False when the snapshot was needed and could not be written (the process then exits non-zero;
        nothing is lost: a restart replays the records since the last snapshot from Kafka).
        """
        if self.state.model is None or not self.pending:
            return True
        if self.half_applied:
            # An exception interrupted a training batch: the model may hold part of it while the offsets
            # say otherwise. Restart from the last good snapshot instead (nothing is lost: the records are
            # still in Kafka).
            log.error("training batch interrupted; not writing a snapshot of a half-applied batch",
                      extra={"train_offsets": self.state.train_offsets})
            return True
        return self.snapshot()

    # ------------------------------------------------------------------ scoring: commits
    def commit_batch(self, offsets: dict[TopicPartition, int]) -> None:
        """A batch's outputs are acknowledged: commit its next offsets and remember them as positions."""
        self.commit(offsets)
        self.acknowledged.update(offsets)

    def commit(self, offsets: dict[TopicPartition, int]) -> None:
        """Commit acknowledged scoring offsets; a commit that fails for a Kafka error is kept and retried."""
        merged = dict(self.uncommitted)
        for tp, offset in offsets.items():
            merged[tp] = max(merged.get(tp, 0), offset)
        consumer = self.connections.score_consumer
        assigned = consumer.assignment()
        # Progress on partitions this member no longer owns is forgotten: committing it would move
        # the new owner's offset. They are rescored from the last commit (at least once).
        merged = {tp: o for tp, o in merged.items() if tp in assigned}
        self.uncommitted = {}
        if not merged:
            return
        self.errors.stage = "score_commit"
        try:
            consumer.commit(merged)
        except CommitFailedError as exc:
            # A rebalance moved these partitions: their new owner rescores from the last commit.
            log.warning("commit failed after rebalance; outputs of this batch may be duplicated",
                        extra={"error": str(exc)})
        except KafkaTransportError as exc:
            # The outputs are acknowledged; only the commit is missing. Keep it and retry with the next
            # batch (or on the next idle poll): the offsets only move forward.
            self.uncommitted = merged
            self.errors.report("score_commit", exc)

    def final_commit(self) -> None:
        """At shutdown: commit what a failed commit left behind (best effort)."""
        if self.uncommitted and self.connections.score_consumer is not None:
            try:
                self.commit({})
            except Exception as exc:  # noqa: BLE001 - best effort at shutdown
                log.warning("final commit failed", extra={"error": str(exc)})

    def rewind(self, records: list[Record]) -> None:
        """Seek back to a batch's first offsets so that it is scored again (its outputs were not acknowledged)."""
        first: dict[TopicPartition, int] = {}
        for record in records:
            first[record.tp] = min(first.get(record.tp, record.offset), record.offset)
        self.errors.stage = "score_rewind"
        try:
            for tp, offset in first.items():
                try:
                    self.connections.score_consumer.seek(tp, offset)
                except ValueError:
                    pass  # no longer assigned: the new owner starts from the last commit
        except KafkaTransportError as exc:
            # Cannot go back by seeking: rejoin the group, which restarts from the last commit.
            self.errors.report("score_rewind", exc)
            self.connections.rejoin()
        time.sleep(0.5)
