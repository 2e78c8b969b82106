"""The trainer and classifier consumers (``sgm serve``), wired to Kafka, snapshots and metrics.

One :class:`Service` is one process's loop. Depending on its role it holds

* a training consumer, manually assigned to every partition of the training
  topic (outside any group: every model replica reads the whole log itself),
  positioned at the offsets stored in its latest snapshot;
* a scoring consumer in the classifier group, sharing the scoring topic's
  partitions with the other replicas;
* a producer for outputs and dead letters.

The commit protocol, step by step, is in ``docs/PROTOCOL.md``. In short:
training records are applied in log order and the next offset per partition is
kept *inside* the model snapshot, so restoring a snapshot and seeking there
applies every record exactly once; scoring offsets are committed only after the
outputs of the batch are acknowledged by the broker (at least once, outputs
carry the input id).
"""
from __future__ import annotations

import dataclasses
import gc
import hashlib
import logging
import threading
import time
from collections import OrderedDict
from typing import Any

import numpy as np

from sgm.model import GenerativeTextModel, LearnGuardError, build_model, model_config
from sgm.model.persistence import SnapshotError, loads as load_snapshot
from sgm.stream.records import (
    DEFAULT_LIMITS,
    ApplyReason,
    DeadLetter,
    InvalidRecord,
    Limits,
    Op,
    encode_dead_letter,
    encode_outputs,
    model_version,
    parse_dead_letter,
    parse_score,
    parse_train,
)
from sgm.stream.snapshot_store import SnapshotStore
from sgm.stream.kafka import Client, CommitFailedError, DeliveryError, KafkaTransportError, Record, TopicPartition, open_client

from .config import ServiceConfig
from .logs import record_context, undelivered_ids
from .prometheus import ServiceMetrics, observe_values

log = logging.getLogger("sgm.service")

#: Scored ids remembered for prequential accuracy (feedback arriving later as training records).
RECENT_PREDICTIONS = 100_000
#: Seconds between refreshes of gauges that cost a broker request (lag) or a model walk (sizes).
GAUGE_INTERVAL = 2.0
#: Backoff after a Kafka error, doubling per consecutive error: first and longest wait, seconds.
RETRY_BACKOFF_MIN = 0.1
RETRY_BACKOFF_MAX = 5.0
#: After this many consecutive errors in a consumer's poll, that consumer is closed and re-created.
RESET_AFTER_ERRORS = 5
#: What a dead letter keeps of the rejected record at most (see fit_dead_letter): the envelope stays
#: under librdkafka's default message.max.bytes of 1,000,000.
DLQ_MAX_VALUE_BYTES = 600_000
DLQ_MAX_KEY_BYTES = 1024
DLQ_MAX_HEADER_BYTES = 16_384


class ConfigMismatch(RuntimeError):
    """The snapshot on disk was made with another model configuration or topic."""


class Service:
    """One ``sgm serve`` process: trainer, classifier, or both around one model.

    Parameters
    ----------
    config : ServiceConfig
    client : stream.transport.Client, optional
        Defaults to ``open_client(config.client, config.kafka())``.
    """

    def __init__(self, config: ServiceConfig, client: Client | None = None) -> None:
        self.config = config
        self.client = client or open_client(config.client, config.kafka())
        self.metrics = ServiceMetrics(config.role)
        self.limits: Limits = DEFAULT_LIMITS
        self.store = SnapshotStore(config.state_dir, keep=config.snapshot_keep, max_bytes=config.max_snapshot_bytes)
        self.model: GenerativeTextModel | None = None
        self.train_offsets: dict[int, int] = {}
        self.train_consumer = None
        self.score_consumer = None
        self.producer = None
        self.metrics_address: tuple[str, int] | None = None
        self._recent: OrderedDict[str, str] = OrderedDict()
        self._since_snapshot = 0
        self._last_snapshot = time.time()
        self._last_snapshot_written: float | None = None
        self._last_gauges = 0.0
        self._scored_ends: dict[TopicPartition, int] = {}
        self.started = threading.Event()
        # Robustness state (see run() and docs/RELIABILITY.md).
        self._stage = "start"  # what the loop was doing when a Kafka error surfaced (metric label)
        self._applying = False  # True while a training batch is half applied: never snapshot then
        self._uncommitted: dict[TopicPartition, int] = {}  # acknowledged scoring offsets a failed commit left behind
        self._dlq_unflushed = False  # training dead letters sent but not yet acknowledged
        self._errors_in_row = 0

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Restore the model, create topics, open consumers/producer, expose metrics.

        The snapshot is checked first: a corrupt or oversized one stops the
        process before it touches Kafka. :meth:`run` retries the Kafka part
        with backoff; a direct call raises :class:`KafkaTransportError`.
        """
        if self.model is None:
            self._restore()
        self._open_metrics_endpoint()
        self._connect()
        self._serve_metrics()
        freeze_long_lived_heap()

    def _connect(self) -> None:
        cfg = self.config
        self._stage = "start"
        if cfg.create_topics:
            with self.client.admin() as admin:
                admin.create_topics([
                    (cfg.train_topic, cfg.train_partitions, cfg.replication_factor),
                    (cfg.score_topic, cfg.score_partitions, cfg.replication_factor),
                    (cfg.output_topic, cfg.score_partitions, cfg.replication_factor),
                    (cfg.dlq_topic, 1, cfg.replication_factor),
                ])
        if self.producer is None:
            self.producer = self.client.producer()
        self._open_train_consumer()
        if cfg.classifies:
            self._open_score_consumer()

    def _open_train_consumer(self) -> None:
        """Assign every training partition and seek to the offsets the model holds (exactly once)."""
        cfg = self.config
        self.train_consumer = self.client.consumer(None, **self._consumer_overrides())
        partitions = self._wait_for_partitions(self.train_consumer, cfg.train_topic)
        if len(partitions) > 1:
            log.warning("training topic has several partitions: replicas agree only up to the order of records "
                        "across partitions", extra={"partitions": len(partitions)})
        tps = [TopicPartition(cfg.train_topic, p) for p in partitions]
        self.train_consumer.assign(tps)
        for tp in tps:
            self.train_consumer.seek(tp, self.train_offsets.get(tp.partition, 0))

    def _open_score_consumer(self) -> None:
        """Join the classifier group; reading resumes at the group's committed offsets."""
        cfg = self.config
        self.score_consumer = self.client.consumer(cfg.group, auto_offset_reset="earliest",
                                                   **self._consumer_overrides())
        self.score_consumer.subscribe([cfg.score_topic])
        self._scored_ends.clear()

    def _open_metrics_endpoint(self) -> None:
        # Before Kafka: a process retrying an unreachable broker is still scraped, with sgm_up 0 and
        # sgm_transport_errors_total{stage="start"} rising, instead of looking like a dead target.
        if self.metrics_address is None:
            self.metrics_address = self.metrics.serve(self.config.metrics_address)
            self.metrics.up.labels(self.config.role).set(0)

    def _serve_metrics(self) -> None:
        cfg = self.config
        self._open_metrics_endpoint()
        self.metrics.up.labels(cfg.role).set(1)
        log.info("service started", extra={"role": cfg.role, "model": self.model.spec.name, "documents": len(self.model),
                                           "train_offsets": self.train_offsets, "metrics": self.metrics_address})
        self.started.set()

    def _consumer_overrides(self) -> dict[str, Any]:
        return {"fetch_wait_ms": self.config.fetch_wait_ms}

    def _wait_for_partitions(self, consumer, topic: str, timeout: float = 30.0) -> list[int]:
        deadline = time.monotonic() + timeout
        while True:
            partitions = consumer.partitions_for(topic)
            if partitions:
                return partitions
            if time.monotonic() > deadline:
                raise KafkaTransportError(f"topic {topic!r} does not exist (start with --create-topics true)")
            time.sleep(0.2)

    def _restore(self) -> None:
        cfg = self.config
        wanted = build_model(cfg.model_config())
        self.store.remove_leftovers()
        found = self.store.latest()
        if found is None:
            self.model, self.train_offsets = wanted, {}
            return
        path, data = found
        try:
            model, extra = load_snapshot(data, max_bytes=cfg.max_snapshot_bytes)
        except SnapshotError as exc:
            raise SnapshotError(f"{path}: {exc}; refusing to start (move the file away to start from older state)") from None
        if extra.get("train_topic") != cfg.train_topic:
            raise ConfigMismatch(f"{path} holds training offsets of topic {extra.get('train_topic')!r}, "
                                 f"not {cfg.train_topic!r}")
        have, want = model_config(model), model_config(wanted)
        if have != want:
            raise ConfigMismatch(f"{path} was made with model configuration {have}, but {want} was requested; "
                                 "use another --state-dir (or delete it) to start a new model")
        self.model = model
        self.train_offsets = {int(p): int(o) for p, o in extra.get("train_offsets", {}).items()}
        self.metrics.snapshot_restored(extra.get("written_at"))
        log.info("restored snapshot", extra={"path": str(path), "documents": len(model),
                                             "train_offsets": self.train_offsets})

    def close(self) -> None:
        """Snapshot, commit, leave the group and release everything (graceful shutdown)."""
        try:
            if self.model is not None and self._since_snapshot:
                if self._applying:
                    # An exception interrupted a training batch: the model may hold part of it while the
                    # offsets say otherwise. Restart from the last good snapshot instead (nothing is lost:
                    # the records are still in Kafka).
                    log.error("training batch interrupted; not writing a snapshot of a half-applied batch",
                              extra={"train_offsets": self.train_offsets})
                else:
                    self.snapshot()
        finally:
            if self._uncommitted and self.score_consumer is not None:
                try:
                    self._commit({})
                except Exception as exc:  # noqa: BLE001 - best effort at shutdown
                    log.warning("final commit failed", extra={"error": str(exc)})
            for closable in (self.score_consumer, self.train_consumer):
                if closable is not None:
                    try:
                        closable.close()
                    except KafkaTransportError as exc:
                        log.warning("error closing consumer", extra={"error": str(exc)})
            if self.producer is not None:
                try:
                    self.producer.close()
                except KafkaTransportError as exc:
                    log.warning("error closing producer", extra={"error": str(exc)})
            self.metrics.up.labels(self.config.role).set(0)
            self.metrics.close()

    def run(self, stop: threading.Event, *, idle_exit: float | None = None) -> None:
        """Loop until ``stop`` is set (or, with ``idle_exit``, after that many idle seconds).

        Kafka errors (:class:`KafkaTransportError`: timeouts, a frozen or
        unreachable broker, failed deliveries or commits) do not end the loop:
        each is logged with its stage, counted in ``sgm_transport_errors_total``
        and retried after a backoff (0.1 s doubling to 5 s). Training stays
        exactly once (the model and its offsets only move together), scoring
        at least once. A bad snapshot or a configuration mismatch still stops
        the process at start, as does any other exception (a bug).
        """
        try:
            if not self.started.is_set():
                if self.model is None:
                    self._restore()
                self._open_metrics_endpoint()
                self._retry(stop, self._connect)
                if stop.is_set():
                    return
                self._serve_metrics()
                freeze_long_lived_heap()
            idle_since = time.monotonic()
            backoff = RETRY_BACKOFF_MIN
            while not stop.is_set():
                try:
                    worked = self.step()
                except KafkaTransportError as exc:
                    self._errors_in_row += 1
                    self._transport_error(self._stage, exc, retry_in=backoff)
                    if self._errors_in_row % RESET_AFTER_ERRORS == 0:
                        self._reset_consumer(self._stage)
                    stop.wait(backoff)
                    backoff = min(backoff * 2, RETRY_BACKOFF_MAX)
                    continue
                self._errors_in_row = 0
                backoff = RETRY_BACKOFF_MIN
                if worked:
                    idle_since = time.monotonic()
                elif idle_exit is not None and time.monotonic() - idle_since > idle_exit:
                    break
        finally:
            self.close()

    def _retry(self, stop: threading.Event, action) -> None:
        """Run ``action`` until it succeeds or ``stop`` is set, backing off on Kafka errors."""
        backoff = RETRY_BACKOFF_MIN
        while not stop.is_set():
            try:
                action()
                return
            except KafkaTransportError as exc:
                self._transport_error(self._stage, exc, retry_in=backoff)
                self._close_consumers()
                stop.wait(backoff)
                backoff = min(backoff * 2, RETRY_BACKOFF_MAX)

    def _transport_error(self, stage: str, exc: BaseException, retry_in: float | None = None) -> None:
        self.metrics.transport_errors.labels(stage).inc()
        log.error("kafka error; retrying", extra={"stage": stage, "error": str(exc), "error_type": type(exc).__name__,
                                                  "retry_in": retry_in, "errors_in_row": self._errors_in_row})

    def _close_consumers(self) -> None:
        for name in ("score_consumer", "train_consumer"):
            consumer = getattr(self, name)
            setattr(self, name, None)
            if consumer is not None:
                try:
                    consumer.close()
                except Exception as exc:  # noqa: BLE001 - a broken consumer is being replaced
                    log.warning("error closing consumer", extra={"consumer": name, "error": str(exc)})

    def _reset_consumer(self, stage: str) -> None:
        """Replace the consumer of a stage that keeps failing (a fatal client error does not heal)."""
        try:
            if stage == "train_poll" and self.train_consumer is not None:
                old, self.train_consumer = self.train_consumer, None
                _close_quietly(old)
                self._open_train_consumer()  # seeks to the model's offsets: nothing skipped, nothing twice
            elif stage in ("score_poll", "score_rewind") and self.score_consumer is not None:
                self._reset_score_consumer()
            else:
                return
            log.warning("consumer re-created after repeated errors", extra={"stage": stage})
        except KafkaTransportError as exc:
            self._transport_error(stage, exc)

    def _reset_score_consumer(self) -> None:
        """Leave the group and join again: reading restarts from the last committed offsets."""
        old, self.score_consumer = self.score_consumer, None
        _close_quietly(old)
        self._open_score_consumer()

    # ------------------------------------------------------------------ the loop
    def step(self) -> bool:
        """One round: apply available training records, then score one batch."""
        cfg = self.config
        worked = False
        if self.train_consumer is None:  # a reset failed half-way: open it again
            self._stage = "train_poll"
            self._open_train_consumer()
        if cfg.classifies and self.score_consumer is None:
            self._stage = "score_poll"
            self._open_score_consumer()
        if self._dlq_unflushed:
            self._flush_training_letters()
        self._stage = "train_poll"
        records = self.train_consumer.poll(cfg.max_poll_records, timeout=0.0 if self.score_consumer else cfg.poll_timeout)
        if records:
            self.apply_training(records)
            worked = True
        if self.score_consumer is not None:
            self._stage = "score_poll"
            records = self.score_consumer.poll(cfg.max_poll_records, timeout=0.0 if worked else cfg.poll_timeout)
            if records:
                self.score_batch(records)
                worked = True
            elif self._uncommitted:
                self._commit({})  # retry a commit that failed earlier
        now = time.time()
        if self._since_snapshot and (self._since_snapshot >= cfg.snapshot_every_records
                                     or now - self._last_snapshot >= cfg.snapshot_every_seconds):
            self.snapshot()
        if now - self._last_gauges >= GAUGE_INTERVAL:
            self.refresh_gauges()
        return worked

    # ------------------------------------------------------------------ training
    def apply_training(self, records: list[Record]) -> None:
        """Apply training records in log order; each offset at most once (see docs/PROTOCOL.md)."""
        model, metrics, cfg = self.model, self.metrics, self.config
        dead: list[DeadLetter] = []
        pending: list[tuple[Any, tuple[str, ...], float | None, str]] = []

        def flush() -> None:
            if pending:
                model.learn_many([p[0] for p in pending], [p[1] for p in pending], [p[2] for p in pending],
                                 [p[3] for p in pending], sequential=True)
                metrics.learned.inc(len(pending))
                pending.clear()

        def reject(record: Record, reason, detail: str, doc_id: str | None = None) -> None:
            metrics.record_rejection(reason.value, "train", dead_lettered=cfg.writes_training_dlq)
            log.warning("training record rejected", extra={**record_context(record, doc_id), "reason": reason.value,
                                                          "detail": detail})
            if cfg.writes_training_dlq:
                dead.append(DeadLetter(reason=reason, detail=detail, value=record.value, key=record.key,
                                       topic=record.topic, partition=record.partition, offset=record.offset,
                                       headers=record.headers, failed_at=time.time()))

        self._applying = True  # from here until flush() below the model and the offsets may disagree
        for record in records:
            partition = record.partition
            expected = self.train_offsets.get(partition, 0)
            if record.offset < expected:
                continue  # already inside the model (a redelivery): applying it again would count it twice
            if record.offset > expected:
                self._training_gap(record, expected)
            metrics.training_records.inc()
            try:
                parsed = parse_train(record.value, self.limits)
            except InvalidRecord as exc:
                reject(record, exc.reason, exc.detail)
            else:
                ts = parsed.ts if parsed.ts is not None else (
                    record.timestamp_ms / 1000.0 if record.timestamp_ms is not None else None)
                doc = parsed.text if parsed.text is not None else parsed.terms
                if parsed.op is Op.LEARN:
                    try:
                        model.check_labels(parsed.labels)  # refuse before batching: a batch must not fail midway
                    except ValueError as exc:
                        reject(record, ApplyReason.MODEL_REJECTED, str(exc), parsed.id)
                    else:
                        pending.append((doc, parsed.labels, ts, parsed.id))
                        self._check_feedback(parsed.id, parsed.labels)
                else:
                    flush()  # corrections apply exactly where they are in the log
                    if parsed.op is Op.FORGET:
                        if model.forget(parsed.id):
                            metrics.unlearned.labels("forget").inc()
                        else:
                            reject(record, ApplyReason.UNKNOWN_ID, f"forget of {parsed.id!r}: not in the model",
                                   parsed.id)
                    else:
                        try:
                            done = model.unlearn_one(doc, parsed.labels, ts=ts, id=parsed.id)
                        except LearnGuardError as exc:
                            reject(record, ApplyReason.UNLEARN_MISMATCH, str(exc), parsed.id)
                        except ValueError as exc:
                            reject(record, ApplyReason.MODEL_REJECTED, str(exc), parsed.id)
                        else:
                            if done:
                                metrics.unlearned.labels("unlearn").inc()
                            else:
                                reject(record, ApplyReason.UNKNOWN_ID, f"unlearn of {parsed.id!r}: not in the model",
                                       parsed.id)
            self.train_offsets[partition] = record.offset + 1
            self._since_snapshot += 1
        flush()
        self._applying = False
        if dead:
            self._send_dead_letters(dead)
            self._dlq_unflushed = True
            self._flush_training_letters()

    def _training_gap(self, record: Record, expected: int) -> None:
        """Offsets ``expected .. record.offset - 1`` were never delivered: find out why, and say so.

        Every replica reads the training log from offset 0 (or from its
        snapshot). Missing offsets below the partition's log start were deleted
        by retention before this process read them: its model lacks those
        documents and differs from a replica that read them. Nothing can bring
        them back; the service says so loudly (error log,
        ``sgm_training_offsets_missed_total``, alert ``SgmTrainingLogGap``) and
        goes on with what the log still holds. Missing offsets at or above the
        log start were never deliverable records: a transactional producer's
        commit/abort markers, aborted records (read-committed consumers skip
        them), or compaction; they are counted in
        ``sgm_training_offsets_skipped_total`` and logged at debug level. If
        the log start cannot be read, the whole gap counts as missed (the side
        that alerts).
        """
        tp = record.tp
        try:
            log_start = self.train_consumer.beginning_offsets([tp])[tp]
        except (KafkaTransportError, KeyError) as exc:
            log.warning("training log gap: could not read the log start, counting the gap as missed",
                        extra={"topic": record.topic, "partition": record.partition, "error": str(exc)})
            log_start = record.offset
        deleted = max(0, min(record.offset, log_start) - expected)
        skipped = record.offset - expected - deleted
        context = {"topic": record.topic, "partition": record.partition}
        if deleted:
            self.metrics.training_offsets_missed.inc(deleted)
            log.error("training log gap: offsets were deleted before this process read them; the model lacks them",
                      extra={**context, "first_missed": expected, "last_missed": expected + deleted - 1,
                             "missed": deleted})
        if skipped:
            self.metrics.training_offsets_skipped.inc(skipped)
            log.debug("training offsets skipped by the broker (transaction markers, aborted records or compaction)",
                      extra={**context, "first_skipped": record.offset - skipped, "last_skipped": record.offset - 1,
                             "skipped": skipped})

    def _flush_training_letters(self) -> None:
        """Wait for the training dead letters' acks; on failure send the failed ones again and raise.

        The model has already applied (or rejected) these records, so they are
        not read again: their dead letters must not be dropped. The run loop
        backs off and calls this again before reading more.
        """
        self._stage = "train_dlq"
        try:
            self.producer.flush()
        except DeliveryError as exc:
            self._resend_training_letters(exc)
            raise
        self._dlq_unflushed = False

    def _resend_training_letters(self, exc: DeliveryError) -> None:
        """Send again the failed dead letters of *training* records (scoring ones come back by rescoring)."""
        for failure in exc.failures:
            if failure.topic != self.config.dlq_topic or failure.value is None:
                continue
            try:
                source = parse_dead_letter(failure.value).topic
            except InvalidRecord:
                continue
            if source == self.config.train_topic:
                self.producer.send(failure.topic, failure.value, key=failure.key)
                self._dlq_unflushed = True

    def _check_feedback(self, doc_id: str, labels: tuple[str, ...]) -> None:
        predicted = self._recent.pop(doc_id, None)
        if predicted is not None:
            # powerset: the prediction is a label set, right only if it is exactly the true set
            correct = predicted == frozenset(labels) if isinstance(predicted, frozenset) else predicted in labels
            self.metrics.record_feedback(correct)

    # ------------------------------------------------------------------ scoring
    def score_batch(self, records: list[Record]) -> None:
        """Score, write outputs and dead letters, wait for acks, then commit the batch."""
        cfg, metrics, model = self.config, self.metrics, self.model
        started = time.perf_counter()
        valid: list[tuple[Record, Any]] = []
        dead: list[DeadLetter] = []
        for record in records:
            try:
                valid.append((record, parse_score(record.value, self.limits)))
            except InvalidRecord as exc:
                log.warning("scoring record rejected", extra={**record_context(record), "reason": exc.reason.value,
                                                             "detail": exc.detail})
                dead.append(DeadLetter.from_error(exc, record.value, key=record.key, topic=record.topic,
                                                  partition=record.partition, offset=record.offset,
                                                  headers=record.headers))
        parsed_at = time.perf_counter()
        docs = [p.text if p.text is not None else p.terms for _, p in valid]
        top_labels, top_p, labels = self._rank(docs) if valid else ([], np.empty((0, 0)), [])
        scored_at_perf = time.perf_counter()
        now = time.time()
        send = self.producer.send
        ids = [parsed.id for _, parsed in valid]
        latencies = [max(now - record.timestamp_ms / 1000.0, 0.0) * 1000.0 if record.timestamp_ms else 0.0
                     for record, _ in valid]
        values = encode_outputs(ids, top_labels, top_p, labels,
                                model={**self.model_info(), "version": model_version(self.train_offsets)},
                                scored_at=now, latency_ms=latencies, ts=[parsed.ts for _, parsed in valid])
        output_topic = cfg.output_topic
        for doc_id, value in zip(ids, values):
            send(output_topic, value, key=doc_id.encode("utf-8"))
        predicted = [names[0] for names in top_labels if names]
        if predicted:
            powerset = model.multilabel == "powerset"
            for doc_id, names, chosen in zip(ids, top_labels, labels):
                if names:
                    self._remember(doc_id, frozenset(chosen) if powerset else names[0])
        self._send_dead_letters(dead)
        produced_at = time.perf_counter()
        self._stage = "score_flush"
        try:
            self.producer.flush()
        except DeliveryError as exc:
            # Nothing is committed: rewind to the batch start and score it again (at least once).
            self._transport_error("score_flush", exc, retry_in=0.5)
            log.error("output delivery failed; rescoring the batch",
                      extra={"error": str(exc), "ids": undelivered_ids(exc), "undelivered": len(exc.failures)})
            self._resend_training_letters(exc)
            self._rewind(records)
            return
        offsets: dict[TopicPartition, int] = {}
        for record in records:
            tp = record.tp
            offsets[tp] = max(offsets.get(tp, 0), record.offset + 1)
        self._commit(offsets)
        self._scored_ends.update(offsets)
        done = time.perf_counter()
        acked = now + (done - scored_at_perf)
        stamps = np.array([r.timestamp_ms for r, _ in valid if r.timestamp_ms], dtype=np.float64)
        observe_values(metrics.end_to_end_latency, np.maximum(acked - stamps / 1000.0, 0.0))
        # Counted once acknowledged, like the outputs: a batch whose delivery failed is redone, not counted twice.
        metrics.observe_scored(len(valid), scored_at_perf - parsed_at)
        metrics.record_predictions(predicted)
        for letter in dead:
            metrics.record_rejection(letter.reason.value, "score", dead_lettered=True)
        metrics.batch_seconds.labels("parse").observe(parsed_at - started)
        metrics.batch_seconds.labels("score").observe(scored_at_perf - parsed_at)
        metrics.batch_seconds.labels("produce").observe(produced_at - scored_at_perf)
        metrics.batch_seconds.labels("ack_commit").observe(done - produced_at)

    def _rank(self, docs: list) -> tuple[list[list[str]], np.ndarray, list[list[str]]]:
        """Per document: the top-k label names, their posteriors (one array row each) and the output labels."""
        return tuple(self.model.rank_many(docs, self.config.top_k, self.config.label_threshold))

    def _remember(self, doc_id: str, label: str) -> None:
        recent = self._recent
        recent[doc_id] = label
        if len(recent) > RECENT_PREDICTIONS:
            recent.popitem(last=False)

    def _commit(self, offsets: dict[TopicPartition, int]) -> None:
        """Commit acknowledged scoring offsets; a commit that fails for a Kafka error is kept and retried."""
        merged = dict(self._uncommitted)
        for tp, offset in offsets.items():
            merged[tp] = max(merged.get(tp, 0), offset)
        assigned = self.score_consumer.assignment()
        # Progress on partitions this member no longer owns is forgotten: committing it would move
        # the new owner's offset. They are rescored from the last commit (at least once).
        merged = {tp: o for tp, o in merged.items() if tp in assigned}
        self._uncommitted = {}
        if not merged:
            return
        self._stage = "score_commit"
        try:
            self.score_consumer.commit(merged)
        except CommitFailedError as exc:
            # A rebalance moved these partitions: their new owner rescores from the last commit.
            log.warning("commit failed after rebalance; outputs of this batch may be duplicated",
                        extra={"error": str(exc)})
        except KafkaTransportError as exc:
            # The outputs are acknowledged; only the commit is missing. Keep it and retry with the next
            # batch (or on the next idle poll): the offsets only move forward.
            self._uncommitted = merged
            self._transport_error("score_commit", exc)

    def _rewind(self, records: list[Record]) -> None:
        first: dict[TopicPartition, int] = {}
        for record in records:
            first[record.tp] = min(first.get(record.tp, record.offset), record.offset)
        self._stage = "score_rewind"
        try:
            for tp, offset in first.items():
                try:
                    self.score_consumer.seek(tp, offset)
                except ValueError:
                    pass  # no longer assigned: the new owner starts from the last commit
        except KafkaTransportError as exc:
            # Cannot go back by seeking: rejoin the group, which restarts from the last commit.
            self._transport_error("score_rewind", exc)
            self._reset_score_consumer()
        time.sleep(0.5)

    def _send_dead_letters(self, letters: list[DeadLetter]) -> None:
        for letter in letters:
            letter = fit_dead_letter(letter)
            self.producer.send(self.config.dlq_topic, encode_dead_letter(letter), key=letter.key)

    # ------------------------------------------------------------------ state
    def model_info(self) -> dict[str, Any]:
        """Which model scored: the training offsets it had applied (its version) and size."""
        return {"kind": self.model.family, "spec": self.model.spec.name, "documents": len(self.model),
                "train_offsets": {str(p): o for p, o in sorted(self.train_offsets.items())}}

    def snapshot(self) -> None:
        """Write the model with its training offsets, atomically."""
        started = time.perf_counter()
        extra = {"train_topic": self.config.train_topic,
                 "train_offsets": {str(p): o for p, o in self.train_offsets.items()},
                 "written_at": time.time(), "role": self.config.role}
        try:
            saved = self.store.save(lambda handle: self.model.write_snapshot(handle, extra))
        except OSError as exc:  # disk full, permissions: keep serving, retry at the next trigger
            self._last_snapshot = time.time()
            self.metrics.snapshot_failures.inc()
            log.error("snapshot failed; will retry", extra={"error": str(exc), "state_dir": self.config.state_dir})
            return
        finally:
            release_free_memory()  # the serialization buffers (about one array at a time) go back to the OS
        freeze_long_lived_heap()  # what was learned since the last snapshot is long-lived too
        self._since_snapshot = 0
        self._last_snapshot = self._last_snapshot_written = time.time()
        self.metrics.snapshot_written(saved.bytes, time.perf_counter() - started, self._last_snapshot_written)
        log.info("snapshot written", extra={"path": str(saved.path), "bytes": saved.bytes,
                                            "train_offsets": self.train_offsets})

    def refresh_gauges(self) -> None:
        metrics, model = self.metrics, self.model
        self._last_gauges = time.time()
        metrics.refresh_model(model.stats(), model.memory_bytes())
        metrics.refresh_snapshot(self._since_snapshot)
        # Every assigned training partition, also before its first record (a stuck trainer shows lag from zero).
        train_tps = sorted(self.train_consumer.assignment())
        metrics.set_training_offsets({tp.partition: self.train_offsets.get(tp.partition, 0) for tp in train_tps})
        try:
            if train_tps:
                ends = self.train_consumer.end_offsets(train_tps, timeout=2.0)
                metrics.set_lag("train", self.config.train_topic,
                                {tp.partition: end - self.train_offsets.get(tp.partition, 0) for tp, end in ends.items()})
            if self.score_consumer is not None:
                assigned = sorted(self.score_consumer.assignment())
                for tp in list(self._scored_ends):
                    if tp not in assigned:  # moved to another replica: its position here is stale from now on
                        del self._scored_ends[tp]
                lags = {}
                if assigned:
                    for tp, end in self.score_consumer.end_offsets(assigned, timeout=2.0).items():
                        position = self._scored_ends.get(tp)
                        if position is None:
                            position = (self.score_consumer.committed([tp], timeout=2.0).get(tp) or 0)
                        lags[tp.partition] = end - position
                metrics.set_lag("score", self.config.score_topic, lags)
        except KafkaTransportError as exc:
            log.debug("lag refresh failed", extra={"error": str(exc)})


def fit_dead_letter(letter: DeadLetter) -> DeadLetter:
    """Cut what a dead letter keeps of a huge record so that it can always be delivered.

    A rejected record can be as large as the topic allows; its envelope (base64
    adds a third) must still fit the producer's ``message.max.bytes``
    (librdkafka's default is 1,000,000), or its delivery fails for good and the
    batch is retried forever. The cut is noted in ``detail`` with the
    original size and SHA-256.
    """
    notes = []
    value, key, headers = letter.value, letter.key, letter.headers
    if value is not None and len(value) > DLQ_MAX_VALUE_BYTES:
        notes.append(f"value cut to its first {DLQ_MAX_VALUE_BYTES} of {len(value)} bytes, "
                     f"sha256 {hashlib.sha256(value).hexdigest()}")
        value = value[:DLQ_MAX_VALUE_BYTES]
    if key is not None and len(key) > DLQ_MAX_KEY_BYTES:
        notes.append(f"key cut to its first {DLQ_MAX_KEY_BYTES} of {len(key)} bytes")
        key = key[:DLQ_MAX_KEY_BYTES]
    if sum(len(name) + len(data or b"") for name, data in headers) > DLQ_MAX_HEADER_BYTES:
        notes.append(f"{len(headers)} headers dropped")
        headers = ()
    if not notes:
        return letter
    return dataclasses.replace(letter, value=value, key=key, headers=headers,
                               detail=f"{letter.detail} [{'; '.join(notes)}]")


_malloc_trim = None


def freeze_long_lived_heap() -> None:
    """Take every object alive now out of the cyclic garbage collector's view (``gc.freeze``).

    A service keeps a large heap that lives as long as the process (imported
    modules, the model's document records). Each full collection walks all of
    it although none of it is garbage: measured on the scoring path, that was
    ~7 of 32 us of CPU per document (``bench/service_bench.py``). Collecting
    first means no garbage is frozen. Frozen objects released later are still
    freed by reference counting; only reference cycles among them would wait,
    and the model makes none.
    """
    gc.collect()
    gc.freeze()


def release_free_memory() -> None:
    """Return freed heap memory to the operating system (glibc's ``malloc_trim``; a no-op elsewhere).

    glibc keeps the pages of large freed blocks (such as a snapshot's
    serialization buffers) and, after the first, stops using mmap for blocks
    of that size, so without this the resident size creeps up between
    snapshots to well above what the live data needs (measured in
    bench/memory_bound.py: about 120 MB at 20,000 documents).
    """
    global _malloc_trim
    if _malloc_trim is None:
        _malloc_trim = False
        try:
            import ctypes
            import ctypes.util

            _malloc_trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
        except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to do
            pass
    if _malloc_trim:
        _malloc_trim(0)


def _close_quietly(closable) -> None:
    if closable is None:
        return
    try:
        closable.close()
    except Exception as exc:  # noqa: BLE001 - replacing a broken client
        log.warning("error closing a client being replaced", extra={"error": str(exc)})
