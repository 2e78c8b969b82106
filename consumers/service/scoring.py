"""Scoring: parse a polled batch, rank it with the model, write outputs and dead letters, then commit.

One batch, step by step (docs/PROTOCOL.md, "Scoring, step by step"): the
valid records are ranked in one call (``model.rank_many``); the outputs are
encoded in one call and produced keyed by id, with the batch's dead letters;
the producer is flushed; only when every record was acknowledged are the
batch's offsets committed (:class:`~.checkpoint.Checkpoint`). A batch whose
delivery failed is rewound and scored again (at least once); its metrics
are counted only once acknowledged, so a redone batch does not count twice.

A whole message (``raw_b64``) is read by the model's own mail extractor
(``model.read_message``: the same terms as learning it) and its flags go into
the output's ``mail`` object and the ``sgm_mail_flags_total`` metric; a
malformed message is scored from what could be read, never dead-lettered. With
a spam decision set (``--preset spam``, ``--spam-threshold``, ``--min-spam``,
``--min-ham``) every output carries a ``decision`` object and its ``labels``
follow the verdict (docs/SCHEMAS.md).
"""
from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from sgm.model.mail import Message
from sgm.stream.kafka import DeliveryError, Record, TopicPartition
from sgm.stream.records import DEFAULT_LIMITS, ApplyReason, DeadLetter, InvalidRecord, Limits, encode_outputs, parse_score

from ..config import ServiceConfig
from ..logs import record_context, undelivered_ids
from ..prometheus import ServiceMetrics, observe_values
from .checkpoint import Checkpoint, ModelState
from .connections import Connections
from .dead_letters import DeadLetters
from .prequential import RecentPredictions
from .retry import KafkaErrors

log = logging.getLogger("sgm.service")


def documents_to_score(model, items: list) -> tuple[list, list]:
    """What ``model`` scores for each ``(raw message bytes or None, document)`` item, and its ``mail`` output object:
    a whole message is read by the model's own extractor (its flags go into ``mail``), anything else is scored
    as it is (``mail`` None). The classifier and ``sgm score --state-dir`` both read documents here.

    >>> from sgm.model import build_model
    >>> documents_to_score(build_model({"model": "u_jm"}), [(None, "cheap pills")])
    (['cheap pills'], [None])
    """
    docs, mail = [], []
    for raw, document in items:
        if raw is None:
            docs.append(document)
            mail.append(None)
        else:
            read = model.read_message(Message(raw))
            docs.append(read.terms)
            mail.append({"flags": list(read.flags)})
    return docs, mail


def next_offsets(records: list[Record]) -> dict[TopicPartition, int]:
    """Per partition of a batch, the offset after its last record (what a commit of the batch names).

    >>> from sgm.stream.kafka import Record
    >>> next_offsets([Record("s", 0, 7, None, b""), Record("s", 1, 3, None, b""), Record("s", 0, 8, None, b"")])
    {TopicPartition(topic='s', partition=0): 9, TopicPartition(topic='s', partition=1): 4}
    """
    last: dict[tuple[str, int], int] = {}
    get = last.get
    for record in records:  # one tuple per record, not a TopicPartition: this runs for every scored document
        key = (record.topic, record.partition)
        offset = record.offset
        if offset >= get(key, -1):
            last[key] = offset
    return {TopicPartition(topic, partition): offset + 1 for (topic, partition), offset in last.items()}


class Scoring:
    """The service's scoring side: one polled batch in, its outputs acknowledged and committed.

    Parameters
    ----------
    config : ServiceConfig
    state : ModelState
        The model that scores, and the training offsets that name its version in each output.
    connections : Connections
        Its producer (looked up per batch: it can be replaced).
    checkpoint : Checkpoint
        Commits an acknowledged batch; rewinds a failed one.
    dead_letters : DeadLetters
        Also re-sends training dead letters a failed flush reports.
    recent : RecentPredictions
        Remembers each top prediction for prequential accuracy.
    metrics : ServiceMetrics
    errors : KafkaErrors
    limits : Limits
        The validator's limits.
    """

    def __init__(self, config: ServiceConfig, state: ModelState, connections: Connections, checkpoint: Checkpoint,
                 dead_letters: DeadLetters, recent: RecentPredictions, metrics: ServiceMetrics, errors: KafkaErrors,
                 limits: Limits = DEFAULT_LIMITS) -> None:
        self.config, self.state, self.connections, self.checkpoint = config, state, connections, checkpoint
        self.dead_letters, self.recent, self.metrics, self.errors = dead_letters, recent, metrics, errors
        self.limits = limits
        self.decision = config.decision()
        #: (topic, partition, offset) of a scoring record -> why its output can never be delivered (over the
        #: producer's or the topic's size limit): the batch is scored again and that record dead-lettered instead.
        self.oversized: dict[tuple[str, int, int], str] = {}

    def read(self, parsed: list) -> tuple[list, list]:
        """The documents the model scores and, per record, the ``mail`` object of a whole message (else None)."""
        return documents_to_score(self.state.model, [(record.raw, record.document) for record in parsed])

    def decide(self, top_labels: list, top_p: np.ndarray, labels: list) -> list[dict]:
        """The decision object of each record; its labels become the verdict's (in place)."""
        made, labels[:] = self.decision.decide(self.state.model, top_labels, top_p.tolist())
        return made

    def score_apart(self, valid: list, docs: list, mail: list, k: int,
                    exc: Exception) -> tuple[tuple[list, np.ndarray, list], list, list, list[DeadLetter]]:
        """The batch's ranking when scoring it together raised: each document scored alone, after the model's
        derived state (which the failed pass may have left half written) is marked stale. Returns the ranking,
        ``valid`` and ``mail`` of the documents that scored, and the dead letters (``scoring_failed``) of those
        that raised again: a fault of the model, logged with its traceback, that must not stall the partition by
        failing its batch for ever."""
        cfg, model = self.config, self.state.model
        log.error("scoring raised; scoring the batch's documents one by one", exc_info=exc,
                  extra={"documents": len(docs)})
        model.invalidate_derived()
        top_labels, rows, labels, kept, dead = [], [], [], [], []
        for i, ((record, _), doc) in enumerate(zip(valid, docs)):
            try:
                names, p, chosen = model.rank_many([doc], k, cfg.label_threshold, cfg.posterior_tolerance)
            except Exception as one:  # noqa: BLE001 - dead-lettered with its reason
                model.invalidate_derived()
                why = f"the model raised while scoring this document: {type(one).__name__}: {one}"[:500]
                dead.append(DeadLetter(reason=ApplyReason.SCORING_FAILED, detail=why, value=record.value,
                                       key=record.key, topic=record.topic, partition=record.partition,
                                       offset=record.offset, headers=record.headers, failed_at=time.time()))
                continue
            kept.append(i)
            top_labels += names
            rows.append(p)
            labels += list(chosen)
        top_p = np.concatenate(rows) if rows else np.empty((0, 0))
        return (top_labels, top_p, labels), [valid[i] for i in kept], [mail[i] for i in kept], dead

    def remember_oversized(self, exc: DeliveryError, valid: list) -> int:
        """Note the records whose outputs failed for their size alone; the batch's next scoring dead-letters them.

        Such a failure is permanent (the producer's ``message.max.bytes`` or the output topic's
        ``max.message.bytes``): rescoring would fail the same way for ever and stall the partition.
        """
        found = 0
        sources = {parsed.id.encode("utf-8"): record for record, parsed in valid}  # outputs are keyed by id
        for failure in exc.failures:
            record = sources.get(failure.key) if failure.too_large and failure.topic == self.config.output_topic else None
            if record is not None:
                size = 0 if failure.value is None else len(failure.value)
                if len(self.oversized) >= 100_000:  # records this replica never saw again (rebalanced away)
                    self.oversized.clear()
                self.oversized[(record.topic, record.partition, record.offset)] = (
                    f"its output of {size} bytes is over the size limit and can never be delivered ({failure.error}); "
                    "lower --top-k or --label-threshold, or raise the output topic's max.message.bytes")
                found += 1
        return found

    def skip_unfetchable(self, tp: TopicPartition, offset: int, detail: str) -> None:
        """The scoring record at ``offset`` cannot be fetched (stalls.py): dead-letter it by position, commit past
        it and join the group again (the consumer that fetched it is broken), so the partition moves on."""
        log.warning("scoring record rejected", extra={"topic": tp.topic, "partition": tp.partition, "offset": offset,
                                                     "reason": ApplyReason.UNFETCHABLE.value, "detail": detail})
        self.dead_letters.send([DeadLetter(reason=ApplyReason.UNFETCHABLE, detail=detail, value=None, topic=tp.topic,
                                           partition=tp.partition, offset=offset, failed_at=time.time())])
        self.errors.stage = "score_flush"
        self.connections.producer.flush()  # a failure raises: the stall is found and probed again later
        self.metrics.record_rejection(ApplyReason.UNFETCHABLE.value, "score", dead_lettered=True)
        self.commit_past(tp, offset)

    def commit_past(self, tp: TopicPartition, offset: int) -> None:
        """Commit past the record at ``offset`` and join the group again (the consumer that met it is broken)."""
        self.checkpoint.commit_batch({tp: offset + 1})
        self.connections.rejoin()

    def score_batch(self, records: list[Record]) -> None:
        """Score, write outputs and dead letters, wait for acks, then commit the batch."""
        cfg, metrics, model = self.config, self.metrics, self.state.model
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
        docs, mail = self.read([p for _, p in valid])
        parsed_at = time.perf_counter()
        # Per document: the top-k label names, their posteriors (one array row each) and the output labels.
        # A decision needs the spam posterior whatever its rank: then every class is ranked, and cut to top_k after.
        k = cfg.top_k if self.decision is None else max(cfg.top_k, len(model.class_names()[1]))
        if valid:
            try:
                top_labels, top_p, labels = model.rank_many(docs, k, cfg.label_threshold, cfg.posterior_tolerance)
            except Exception as exc:  # noqa: BLE001 - a model fault: isolated per document, never a crash loop
                (top_labels, top_p, labels), valid, mail, failed = self.score_apart(valid, docs, mail, k, exc)
                dead += failed
        else:
            top_labels, top_p, labels = [], np.empty((0, 0)), []
        decisions = None
        if self.decision is not None and valid:
            labels = list(labels)
            decisions = self.decide(top_labels, top_p, labels)
            if k > cfg.top_k:
                top_labels, top_p = [names[: cfg.top_k] for names in top_labels], top_p[:, : cfg.top_k]
        scored_at_perf = time.perf_counter()
        now = time.time()
        producer = self.connections.producer
        send = producer.send
        ids = [parsed.id for _, parsed in valid]
        latencies = [max(now - record.timestamp_ms / 1000.0, 0.0) * 1000.0 if record.timestamp_ms else 0.0
                     for record, _ in valid]
        values = encode_outputs(ids, top_labels, top_p, labels, model=self.state.info(), scored_at=now,
                                latency_ms=latencies, ts=[parsed.ts for _, parsed in valid], decisions=decisions,
                                mail=mail)
        output_topic = cfg.output_topic
        refused = 0
        if self.oversized:
            for (record, _), doc_id, value in zip(valid, ids, values):
                why = self.oversized.get((record.topic, record.partition, record.offset))
                if why is None:
                    send(output_topic, value, key=doc_id.encode("utf-8"))
                    continue
                refused += 1
                log.warning("scoring record rejected", extra={**record_context(record, doc_id),
                                                             "reason": ApplyReason.OUTPUT_TOO_LARGE.value, "detail": why})
                dead.append(DeadLetter(reason=ApplyReason.OUTPUT_TOO_LARGE, detail=why, value=record.value,
                                       key=record.key, topic=record.topic, partition=record.partition,
                                       offset=record.offset, headers=record.headers, failed_at=now))
        else:
            for doc_id, value in zip(ids, values):
                send(output_topic, value, key=doc_id.encode("utf-8"))
        predicted = [names[0] for names in top_labels if names]
        if predicted:
            if model.multilabel == "powerset":
                self.recent.remember_many((doc_id, frozenset(chosen))
                                          for doc_id, names, chosen in zip(ids, top_labels, labels) if names)
            else:
                self.recent.remember_many((doc_id, names[0]) for doc_id, names in zip(ids, top_labels) if names)
        self.dead_letters.send(dead)
        produced_at = time.perf_counter()
        self.errors.stage = "score_flush"
        try:
            producer.flush()
        except DeliveryError as exc:
            # Nothing is committed: rewind to the batch start and score it again (at least once).
            self.errors.report("score_flush", exc, retry_in=0.5)
            too_large = self.remember_oversized(exc, valid)
            log.error("output delivery failed; rescoring the batch",
                      extra={"error": str(exc), "ids": undelivered_ids(exc), "undelivered": len(exc.failures),
                             "too_large": too_large})
            self.dead_letters.resend_training(exc)
            self.checkpoint.rewind(records)
            return
        self.checkpoint.commit_batch(next_offsets(records))
        if refused:
            for record in records:
                self.oversized.pop((record.topic, record.partition, record.offset), None)
        done = time.perf_counter()
        acked = now + (done - scored_at_perf)
        stamps = np.array([r.timestamp_ms for r, _ in valid if r.timestamp_ms], dtype=np.float64)
        observe_values(metrics.end_to_end_latency, np.maximum(acked - stamps / 1000.0, 0.0))
        # Counted once acknowledged, like the outputs: a batch whose delivery failed is redone, not counted twice.
        metrics.observe_scored(len(valid) - refused, scored_at_perf - parsed_at)
        metrics.record_predictions(predicted)
        metrics.record_mail([read["flags"] for read in mail if read is not None], "score")
        if decisions:
            metrics.record_decisions([made["verdict"] for made in decisions])
        for letter in dead:
            metrics.record_rejection(letter.reason.value, "score", dead_lettered=True)
        metrics.batch_seconds.labels("parse").observe(parsed_at - started)
        metrics.batch_seconds.labels("score").observe(scored_at_perf - parsed_at)
        metrics.batch_seconds.labels("produce").observe(produced_at - scored_at_perf)
        metrics.batch_seconds.labels("ack_commit").observe(done - produced_at)
