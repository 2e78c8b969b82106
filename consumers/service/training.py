"""Training: apply learn / unlearn / forget records to the model in log order, each offset at most once.

:func:`apply_in_log_order` is the one implementation of the dispatch: the
service's training side (:class:`Training`) and the fault campaign's
reference replay (``consumers/chaos/audit.py``) both call it, and differ only
in what they do with the events it reports (:class:`TrainingEvents`).

The rules (docs/PROTOCOL.md, "Training, step by step"): a record below the
model's offset for its partition is a redelivery and is skipped; a record
above it reveals a gap in the log; consecutive learns are batched with
``learn_many(..., sequential=True)`` (bitwise equal to one-by-one learning);
an unlearn or forget first applies the pending learns, so corrections apply
exactly where they are in the log; invalid records and records the model
refuses are rejected with a reason; the offset advances past every record
applied or rejected.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable

from sgm.model import GenerativeTextModel, LearnGuardError
from sgm.model.mail import Message
from sgm.model.text import term_counts
from sgm.stream.kafka import KafkaTransportError, Record, TopicPartition
from sgm.stream.records import DEFAULT_LIMITS, ApplyReason, DeadLetter, InvalidRecord, Limits, Op, Reason, parse_train

from ..config import ServiceConfig
from ..logs import record_context
from ..prometheus import ServiceMetrics
from .checkpoint import Checkpoint, ModelState
from .connections import Connections
from .dead_letters import DeadLetters
from .event_time import EventTimeGuard, TimeJump, decay_clocks, guard_for, half_lives_behind, past_detail
from .prequential import RecentPredictions

log = logging.getLogger("sgm.service")


class TrainingEvents:
    """What :func:`apply_in_log_order` reports, in log order. Every method does nothing here."""

    def gap(self, record: Record, expected: int) -> None:
        """``record`` came after ``expected``, the next offset of its partition: offsets were never delivered."""

    def rejected(self, record: Record, reason: Reason | ApplyReason, detail: str, doc_id: str | None = None) -> None:
        """The validator or the model refused ``record`` (``doc_id`` once the record parsed)."""

    def feedback(self, doc_id: str, labels: tuple[str, ...]) -> None:
        """A learn of ``doc_id`` joined the batch: its labels arrived."""

    def mail_read(self, record: Record, flags: tuple[str, ...]) -> None:
        """A whole message (``raw_b64``) to learn was read; ``flags``: what was malformed in it (may be empty)."""

    def learned(self, count: int) -> None:
        """``count`` documents were learned (one ``learn_many`` call)."""

    def unlearned(self, op: str) -> None:
        """One document left the model (``op`` is ``"unlearn"`` or ``"forget"``), or its labels were replaced by a
        learn of its id with other labels (``"relabel"``, reported with the batch that learned it)."""

    def advanced(self, record: Record) -> None:
        """``record`` was applied or rejected and its partition's offset moved past it."""

    def quarantined(self, record: Record) -> str | None:
        """Why ``record`` must not be applied (it made the model raise alone before), or ``None``."""
        return None

    def careful(self, record: Record) -> bool:
        """Whether ``record`` is applied alone (its batch made the model raise; the culprit is being found)."""
        return False


#: Records in a row that may raise alone (each dead-lettered ``learn_failed``) before a fault counts as the
#: process's, not the records' (:meth:`Training.recover` then stops the process).
MAX_ISOLATED_IN_ROW = 3


class LearnFault(Exception):
    """Applying training records raised an unexpected exception (the cause): ``record`` is the one that raised
    while applied alone, ``None`` when it was part of a batch. The model may be half changed."""

    def __init__(self, record: Record | None) -> None:
        super().__init__("applying training records raised" if record is None
                         else f"applying the record at {record.topic}/{record.partition}@{record.offset} raised")
        self.record = record


def too_many_text_terms(model: GenerativeTextModel, text: str, limits: Limits) -> int | None:
    """The distinct terms of ``text`` under the model's tokenizer when over ``limits.max_terms``, else ``None``.

    ``terms`` records are capped by the validator; a text is capped here, where the
    tokenizer is known (an ensemble: each base's, the most distinct terms count). Only texts long enough to
    hold that many terms are tokenized.
    """
    worst = None
    for tokenizer in model.tokenizers():
        if tokenizer.max_terms(len(text)) <= limits.max_terms:
            continue
        distinct = len(term_counts(text, tokenizer)[0])
        if distinct > limits.max_terms and (worst is None or distinct > worst):
            worst = distinct
    return worst


def apply_in_log_order(model: GenerativeTextModel, records: list[Record], offsets: dict[int, int],
                       events: TrainingEvents, limits: Limits = DEFAULT_LIMITS,
                       guard: EventTimeGuard | None = None) -> None:
    """Apply training ``records`` to ``model``, advancing ``offsets`` (partition -> next offset) in place.

    ``guard`` refuses learn records whose event time lies too far ahead of the
    clock (``future_timestamp``, consumers/service/event_time.py). With decay, a learn of a new id so far
    behind the model's time that it would weigh nothing is refused as ``past_timestamp``; a text with
    more distinct terms than ``limits.max_terms`` is refused as ``too_many_terms``.

    Examples
    --------
    >>> from sgm.model import MNB
    >>> from sgm.stream.kafka import Record
    >>> class Rejections(TrainingEvents):
    ...     def __init__(self): self.seen = []
    ...     def rejected(self, record, reason, detail, doc_id=None): self.seen.append((record.offset, reason.value))
    >>> values = [b'{"id": "m1", "labels": ["spam"], "text": "cheap pills"}', b'not json',
    ...           b'{"id": "m9", "op": "forget"}', b'{"id": "m2", "labels": ["ham"], "text": "lunch on monday"}']
    >>> records = [Record("train", 0, offset, None, value) for offset, value in enumerate(values)]
    >>> model, offsets, events = MNB("u_jm"), {}, Rejections()
    >>> apply_in_log_order(model, records, offsets, events)
    >>> len(model), offsets, events.seen
    (2, {0: 4}, [(1, 'invalid_json'), (2, 'unknown_id')])
    >>> apply_in_log_order(model, records, offsets, events)  # a redelivery changes nothing
    >>> len(model), offsets
    (2, {0: 4})
    """
    pending: list[tuple[Any, tuple[str, ...], float | None, str]] = []
    pending_classes: dict[str, frozenset[str]] = {}  # the classes pending learns put each id under
    relabels: list[int] = [0]  # pending learns that move a document to other labels
    clocks = decay_clocks(model)  # with decay: a learn that would weigh nothing is refused (past_timestamp)
    newest: list[float] = []  # the latest event time pending (a learn behind it may expire once it is learned)

    def flush() -> None:
        if pending:
            model.learn_many([p[0] for p in pending], [p[1] for p in pending], [p[2] for p in pending],
                             [p[3] for p in pending], sequential=True)
            events.learned(len(pending))
            for _ in range(relabels[0]):
                events.unlearned("relabel")
            pending.clear()
            pending_classes.clear()
            relabels[0] = 0
            newest.clear()

    def guarded(step: Callable[[], None], culprit: Record | None) -> None:
        """``step()``; an unexpected exception is a fault of the model (or of this code), raised as
        :class:`LearnFault` for the caller to recover; Kafka's are retried by the caller."""
        try:
            step()
        except KafkaTransportError:
            raise
        except Exception as exc:  # noqa: BLE001 - see above
            raise LearnFault(culprit) from exc

    def apply(record: Record, careful: bool) -> None:
        """One record into the batch, or applied (a correction), or rejected; ``careful``: flushed alone."""
        try:
            parsed = parse_train(record.value, limits)
        except InvalidRecord as exc:
            events.rejected(record, exc.reason, exc.detail)
        else:
            ts = parsed.ts if parsed.ts is not None else (
                record.timestamp_ms / 1000.0 if record.timestamp_ms is not None else None)
            doc = parsed.document
            ahead = guard.ahead(ts) if guard is not None and parsed.op is Op.LEARN else None
            distinct = too_many_text_terms(model, parsed.text, limits) if parsed.text is not None else None
            if parsed.raw is not None and ahead is None:  # a message caps its own terms (model/mail, max_terms)
                doc = Message(parsed.raw)  # an unlearn is by id: the message need not be read
                if parsed.op is Op.LEARN:  # read here, by the model's own extractor, to report the flags too
                    read = model.read_message(doc)
                    events.mail_read(record, read.flags)
                    doc = read.terms
            if ahead is not None:  # never let it move the model's clock
                events.rejected(record, ApplyReason.FUTURE_TIMESTAMP, guard.detail(ts, ahead), parsed.id)
            elif distinct is not None:
                events.rejected(record, Reason.TOO_MANY_TERMS,
                                f"text has {distinct} distinct terms, limit {limits.max_terms}", parsed.id)
            elif parsed.op is Op.LEARN:
                behind = None
                if clocks and ts is not None:
                    if pending and half_lives_behind(clocks, ts, newest[0] if newest else None) is not None:
                        flush()  # judged against the model's real time and documents: the pending may change both
                    behind = half_lives_behind(clocks, ts)
                    if behind is not None and parsed.id in model:
                        behind = None  # a relearn: the model decides (same labels: nothing; others: replaced)
                try:  # refuse before batching: a batch must not fail midway
                    classes = frozenset(model.check_labels(parsed.labels))
                except ValueError as exc:
                    events.rejected(record, ApplyReason.MODEL_REJECTED, str(exc), parsed.id)
                else:
                    if behind is not None:
                        events.rejected(record, ApplyReason.PAST_TIMESTAMP, past_detail(ts, behind), parsed.id)
                    else:
                        held = pending_classes.get(parsed.id) or model.learned_classes(parsed.id)
                        if held is not None and held != classes:  # a correction: the old labels are unlearned
                            relabels[0] += 1
                        pending_classes[parsed.id] = classes
                        pending.append((doc, parsed.labels, ts, parsed.id))
                        events.feedback(parsed.id, parsed.labels)
                        if ts is not None and (not newest or ts > newest[0]):
                            newest[:] = [ts]
            else:
                flush()  # corrections apply exactly where they are in the log
                if parsed.op is Op.FORGET:
                    if model.forget(parsed.id):
                        events.unlearned("forget")
                    else:
                        events.rejected(record, ApplyReason.UNKNOWN_ID, f"forget of {parsed.id!r}: not in the model",
                                        parsed.id)
                else:
                    try:
                        done = model.unlearn_one(doc, parsed.labels, ts=ts, id=parsed.id)
                    except LearnGuardError as exc:
                        events.rejected(record, ApplyReason.UNLEARN_MISMATCH, str(exc), parsed.id)
                    except ValueError as exc:
                        events.rejected(record, ApplyReason.MODEL_REJECTED, str(exc), parsed.id)
                    else:
                        if done:
                            events.unlearned("unlearn")
                        else:
                            events.rejected(record, ApplyReason.UNKNOWN_ID,
                                            f"unlearn of {parsed.id!r}: not in the model", parsed.id)
        if careful:
            flush()

    for record in records:
        partition = record.partition
        expected = offsets.get(partition, 0)
        if record.offset < expected:
            continue  # already inside the model (a redelivery): applying it again would count it twice
        if record.offset > expected:
            events.gap(record, expected)
        why = events.quarantined(record)
        if why is not None:  # it made the model raise alone before (Training.recover): never applied
            guarded(flush, None)
            events.rejected(record, ApplyReason.LEARN_FAILED, why)
        else:
            careful = events.careful(record)  # applied alone: a fault is this record's
            guarded(lambda: apply(record, careful), record if careful else None)
        offsets[partition] = record.offset + 1
        events.advanced(record)
    guarded(flush, None)  # which record of the batch raised is not known


class Training(TrainingEvents):
    """The service's training side: applies polled batches, counts, logs and dead-letters what happens.

    Parameters
    ----------
    config : ServiceConfig
    state : ModelState
        The model and the offsets that move with it.
    checkpoint : Checkpoint
        Counts applied records towards the next snapshot; guards half-applied batches.
    dead_letters : DeadLetters
    recent : RecentPredictions
        Judges earlier predictions against the labels that arrive.
    metrics : ServiceMetrics
    connections : Connections
        Its training consumer reads the log start when a gap shows.
    limits : Limits
        The validator's limits.
    """

    def __init__(self, config: ServiceConfig, state: ModelState, checkpoint: Checkpoint, dead_letters: DeadLetters,
                 recent: RecentPredictions, metrics: ServiceMetrics, connections: Connections,
                 limits: Limits = DEFAULT_LIMITS) -> None:
        self.config, self.state, self.checkpoint, self.dead_letters = config, state, checkpoint, dead_letters
        self.recent, self.metrics, self.connections, self.limits = recent, metrics, connections, limits
        self.guard = guard_for(config.max_event_skew)
        #: Called with ``{partition: lowest offset}`` when records below the model's offsets arrive; True when
        #: the training log turned out to be another one (the service handled it: the batch is dropped and
        #: read again from the new positions). Set by the service (log_identity.py).
        self.on_below: Callable[[dict[int, int]], bool] | None = None
        self._dead: list[DeadLetter] = []
        #: After a fault while learning (:meth:`recover`): reload the model and its offsets from the last snapshot
        #: and read the training topic again from there. Set by the service; without it a fault stops the process.
        self.on_fault: Callable[[], None] | None = None
        self.quarantine: dict[tuple[int, int], str] = {}  # (partition, offset) -> why: never applied again
        self.careful_until: dict[int, int] = {}  # per partition: records below are applied one at a time
        self.handled_until: dict[int, int] = {}  # per partition: records below were handled before a fault
        self.isolated_in_row = 0  # records that raised alone with none applied between: past a few, not theirs
        self.last_isolated: dict[int, int] = {}  # per partition: the offset of the last record that raised alone

    def apply(self, records: list[Record]) -> None:
        """Apply one polled batch; then deliver its dead letters before anything else is read."""
        if self.on_below is not None:
            below = {}
            for record in records:
                if record.offset < self.state.train_offsets.get(record.partition, 0):
                    below[record.partition] = min(below.get(record.partition, record.offset), record.offset)
            if below and self.on_below(below):
                return
        self._dead = dead = []
        jump = TimeJump(self.state.model)
        before = dict(self.state.train_offsets)
        try:
            with self.checkpoint.applying():  # until it ends, the model and the offsets may disagree
                apply_in_log_order(self.state.model, records, self.state.train_offsets, self, self.limits,
                                   self.guard)
        except LearnFault as fault:
            if self.on_fault is None:
                raise fault.__cause__ or fault
            self.recover(records, before, fault)
            return
        jumped = jump.after(self.state.model)
        if jumped is not None and records:
            log.warning("the model's time jumped forward and documents expired: with decay, model time is the latest "
                        "event time learned (records without ts take the Kafka timestamp, i.e. when they were sent)",
                        extra={**jumped, "topic": records[0].topic, "first_offset": records[0].offset,
                               "last_offset": records[-1].offset})
        if dead:
            self.dead_letters.send_training(dead)

    def skip_unfetchable(self, tp: TopicPartition, offset: int, detail: str) -> None:
        """The record at ``offset`` cannot be fetched (stalls.py): dead-letter it by position and move past it."""
        if self.state.train_offsets.get(tp.partition, 0) != offset:
            return  # it moved meanwhile: nothing to skip
        record = Record(tp.topic, tp.partition, offset, None, None)
        self._dead = dead = []
        with self.checkpoint.applying():
            self.rejected(record, ApplyReason.UNFETCHABLE, detail)
            self.state.train_offsets[tp.partition] = offset + 1
            self.advanced(record)
        if dead:
            self.dead_letters.send_training(dead)

    def recover(self, records: list[Record], before: dict[int, int], fault: LearnFault) -> None:
        """Learning ``records`` raised (a fault of the model, e.g. a bug a record triggers) and may have left the
        model half changed: reload the model and its offsets from the last snapshot (``on_fault``) and read the
        log again from there. A batch is then applied one record at a time up to where it ended; a record that
        raises alone is never applied again and is dead-lettered ``learn_failed``. The records handled before the
        batch are not rejected twice on the way (their dead letters were sent); the batch's were not sent yet.
        A fault that is not one record's stops the process: one where every record is applied alone already, or
        more than ``MAX_ISOLATED_IN_ROW`` records in a row that raise alone (every learn fails: a broken
        process, whose stream is better left in Kafka than dead-lettered)."""
        cause = fault.__cause__ if fault.__cause__ is not None else fault
        self._dead = []  # this batch's dead letters: sent when the replay meets its records again
        for partition, offset in before.items():
            self.handled_until[partition] = max(self.handled_until.get(partition, 0), offset)
        if fault.record is not None:
            culprit = fault.record
            self.isolated_in_row += 1
            self.last_isolated[culprit.partition] = culprit.offset
            if self.isolated_in_row > MAX_ISOLATED_IN_ROW:
                raise cause
            self.quarantine[(culprit.partition, culprit.offset)] = (
                f"the model raised while learning this record: {type(cause).__name__}: {cause}")[:500]
            log.error("learning raised on one record: it will be dead-lettered; reloading the model from its last "
                      "snapshot", exc_info=cause, extra=record_context(culprit))
        else:
            if all(self.careful(record) for record in records):
                raise cause
            for record in records:
                self.careful_until[record.partition] = max(self.careful_until.get(record.partition, 0),
                                                           record.offset + 1)
            log.error("learning raised; reloading the model from its last snapshot and learning the batch again one "
                      "record at a time", exc_info=cause, extra={"topic": records[0].topic, "records": len(records)})
        self.on_fault()

    def forget_faults(self) -> None:
        """The training topic is another log now (loop.py, a log reset): its offsets mean other records."""
        self.quarantine.clear()
        self.careful_until.clear()
        self.handled_until.clear()
        self.last_isolated.clear()
        self.isolated_in_row = 0

    def quarantined(self, record: Record) -> str | None:
        return self.quarantine.get((record.partition, record.offset))

    def careful(self, record: Record) -> bool:
        return record.offset < self.careful_until.get(record.partition, 0)

    # ------------------------------------------------------------------ the events
    def rejected(self, record: Record, reason: Reason | ApplyReason, detail: str, doc_id: str | None = None) -> None:
        if record.offset < self.handled_until.get(record.partition, 0):
            return  # read again after a fault (recover): rejected, counted and dead-lettered the first time
        writes = self.config.writes_training_dlq
        self.metrics.record_rejection(reason.value, "train", dead_lettered=writes)
        log.warning("training record rejected", extra={**record_context(record, doc_id), "reason": reason.value,
                                                      "detail": detail})
        if writes:
            self._dead.append(DeadLetter(reason=reason, detail=detail, value=record.value, key=record.key,
                                         topic=record.topic, partition=record.partition, offset=record.offset,
                                         headers=record.headers, failed_at=time.time()))

    def feedback(self, doc_id: str, labels: tuple[str, ...]) -> None:
        self.recent.judge(doc_id, labels)

    def learned(self, count: int) -> None:
        self.metrics.learned.inc(count)

    def mail_read(self, record: Record, flags: tuple[str, ...]) -> None:
        self.metrics.record_mail([flags], "train")

    def unlearned(self, op: str) -> None:
        self.metrics.unlearned.labels(op).inc()

    def advanced(self, record: Record) -> None:
        if self.isolated_in_row and record.offset > self.last_isolated.get(record.partition, record.offset):
            self.isolated_in_row = 0  # a record past the last one isolated went through: the faults were the records'
        self.metrics.training_records.inc()
        self.checkpoint.applied()

    def gap(self, record: Record, expected: int) -> None:
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
            log_start = self.connections.offsets_reader().beginning_offsets([tp])[tp]
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
