"""Poison records: a training partition that stops moving is probed, and a record no client can fetch is skipped.

A record can be larger than the Kafka client will ever fetch: librdkafka
refuses any response over ``receive.message.max.bytes`` (100 MB by default,
the limit stated in ``stream/kafka/config.py``) and retries the same fetch for
ever, so the partition stalls and the valid records behind it are never read,
with no error surfacing to the application. The service notices such a stall
and skips exactly that record, with a dead letter naming topic, partition and
offset (``unfetchable``), so the partition keeps moving.

A partition is *stalled* when, for ``--poison-timeout`` seconds, records wait
beyond the model's offset (the broker answers the end offset) yet the offset
does not move and the consumer's position has not passed it (transaction
markers at the end of a log are not a stall). A stalled partition is *probed*:
a fresh group-less consumer with the same settings fetches from that offset
for up to ``PROBE_SECONDS``. If it gets the record (or moves past markers),
the record is fetchable and only the service's consumer was stuck: it is
re-created at the model's offsets. If it gets nothing while the broker keeps
answering, the record is unfetchable: dead-lettered and skipped. A broker that
does not answer decides nothing (a frozen broker is not a poison record).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable

from sgm.stream.kafka import KafkaTransportError, TopicPartition

from ..config import ServiceConfig
from ..prometheus import ServiceMetrics
from .checkpoint import ModelState
from .connections import Connections

log = logging.getLogger("sgm.service")

#: Seconds the probe consumer tries to fetch a stalled partition's record (at most the poison timeout).
PROBE_SECONDS = 10.0


class StallWatch:
    """Finds stalled training partitions and decides, by probing, whether their next record is unfetchable.

    Parameters
    ----------
    config : ServiceConfig
    state : ModelState
        The model's training offsets (the positions that must move).
    connections : Connections
        The training consumer; its client opens the probe.
    metrics : ServiceMetrics
    skip : callable
        ``skip(tp, offset, detail)``: dead-letter the unfetchable record and move the offset past it.
    clock : callable
        Monotonic seconds.
    """

    def __init__(self, config: ServiceConfig, state: ModelState, connections: Connections, metrics: ServiceMetrics,
                 skip: Callable[[TopicPartition, int, str], None], clock: Callable[[], float] = time.monotonic) -> None:
        self.config, self.state, self.connections, self.metrics = config, state, connections, metrics
        self.skip, self.clock = skip, clock
        self.progress: dict[int, tuple[int, float]] = {}  # partition -> (offset, since when it has not moved)

    def check(self, ends: dict[int, int]) -> None:
        """Look at every training partition given its end offset ``ends[p]`` (read from the broker just now)."""
        now, offsets = self.clock(), self.state.train_offsets
        consumer = self.connections.train_consumer
        if consumer is None:
            return
        for p, end in ends.items():
            offset = offsets.get(p, 0)
            stalled_for = stalled_seconds(self.progress, p, offset, end, now, self.config.poison_timeout)
            if stalled_for is None:
                continue
            tp = TopicPartition(self.config.train_topic, p)
            position = consumer.position(tp)
            if position is not None and position > offset:
                self.progress[p] = (offset, now)  # past markers: nothing was withheld
                continue
            if probe_stalled(TRAINING, self.config, self.connections, self.metrics, tp, offset, stalled_for,
                             self.skip) is not None:  # fetchable, or skipped: the consumer that stalled is replaced
                self.connections.replace_train_consumer(self.state.train_offsets)
            self.progress[p] = (offsets.get(p, 0), self.clock())


class ScoringStallWatch:
    """The same for the scoring partitions assigned to this classifier: one that stops moving is probed.

    ``check`` gets each assigned partition's position (the end of the last acknowledged batch, else the
    group's committed offset) and end offset. A position that does not move for ``--poison-timeout``
    while records wait is probed as above; an unfetchable record is handed to ``skip(tp, offset,
    detail)`` (dead letter, commit past it, join the group again), a fetchable one makes the classifier
    join the group again (its consumer was stuck). A partition found stalled again at the record it skipped
    (the commit past it was lost, e.g. to the rebalance the broken consumer caused) is committed past again
    by ``commit_past(tp, offset)``, without a second probe or dead letter.
    """

    def __init__(self, config: ServiceConfig, connections: Connections, metrics: ServiceMetrics,
                 skip: Callable[[TopicPartition, int, str], None], commit_past: Callable[[TopicPartition, int], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config, self.connections, self.metrics, self.skip, self.clock = config, connections, metrics, skip, clock
        self.commit_past = commit_past
        self.progress: dict[TopicPartition, tuple[int, float]] = {}  # position, since when it has not moved
        self.skipped: dict[TopicPartition, int] = {}  # the offset last skipped (dead-lettered) per partition

    def check(self, positions: dict[TopicPartition, tuple[int, int]]) -> None:
        now = self.clock()
        for tp in [tp for tp in self.progress if tp not in positions]:
            del self.progress[tp]  # no longer assigned here
        for tp, (position, end) in positions.items():
            stalled_for = stalled_seconds(self.progress, tp, position, end, now, self.config.poison_timeout)
            if stalled_for is None:
                continue
            if self.skipped.get(tp) == position:
                log.warning("scoring partition still at the record it skipped (the commit past it was lost): "
                            "committing past it again", extra={"topic": tp.topic, "partition": tp.partition,
                                                               "offset": position})
                self.progress[tp] = (position, self.clock())
                self.commit_past(tp, position)
                return  # the consumer joined again: positions are read again at the next refresh
            outcome = probe_stalled(SCORING, self.config, self.connections, self.metrics, tp, position, stalled_for,
                                    self.skip)
            self.progress[tp] = (position, self.clock())
            if outcome == "fetchable":
                self.connections.rejoin()
            elif outcome == "skipped":
                self.skipped[tp] = position
                return  # the consumer was replaced: positions are read again at the next refresh


@dataclass(frozen=True)
class StalledSide:
    """What differs between a stalled training and a stalled scoring partition: the metric's ``source`` label,
    the log lines, and the fetch limit an unfetchable record is over (named in its dead letter)."""

    source: str
    stalled: str
    fetchable: str
    limit: str


TRAINING = StalledSide("train", "training partition stalled: records wait beyond the model's offset but none arrives; "
                       "probing", "the record is fetchable: re-creating the training consumer",
                       "larger than the client's fetch limit, stream/kafka/config.py")
SCORING = StalledSide("score", "scoring partition stalled: records wait beyond the group's position but none arrives; "
                      "probing", "the record is fetchable: joining the group again", "larger than --max-fetch-bytes")


def stalled_seconds(progress: dict, key, position: int, end: int, now: float, timeout: float) -> float | None:
    """How long ``key``'s ``position`` has not moved while records wait up to ``end``, once that is at least
    ``timeout``; else ``None``. A moved position (or none waiting) restarts ``progress[key]``'s clock."""
    seen = progress.get(key)
    if seen is None or seen[0] != position or end <= position:
        progress[key] = (position, now)
        return None
    stalled_for = now - seen[1]
    return stalled_for if stalled_for >= timeout else None


def probe_stalled(side: StalledSide, config: ServiceConfig, connections: Connections, metrics: ServiceMetrics,
                  tp: TopicPartition, offset: int, stalled_for: float,
                  skip: Callable[[TopicPartition, int, str], None]) -> str | None:
    """Probe the record at a stalled partition's ``offset``; ``"fetchable"``, ``"skipped"`` (handed to ``skip``
    with the dead letter's detail) or ``None`` (inconclusive: the broker did not answer, nothing skipped)."""
    seconds = min(PROBE_SECONDS, config.poison_timeout)
    where = {"topic": tp.topic, "partition": tp.partition, "offset": offset}
    log.warning(side.stalled, extra={**where, "stalled_seconds": round(stalled_for, 1), "probe_seconds": seconds})
    fetchable = probe_fetch(connections, tp, offset, seconds)
    if fetchable is None:
        log.warning("probe inconclusive: the broker did not answer; nothing skipped", extra=where)
        return None
    if fetchable:
        metrics.partition_stalls.labels(side.source, "fetchable").inc()
        log.warning(side.fetchable, extra=where)
        return "fetchable"
    metrics.partition_stalls.labels(side.source, "skipped").inc()
    skip(tp, offset, f"the Kafka client could not fetch the record at offset {offset} within its limits for "
                     f"{stalled_for + seconds:.0f} s while the broker answered ({side.limit}); skipped")
    return "skipped"


def probe_fetch(connections: Connections, tp: TopicPartition, offset: int, seconds: float) -> bool | None:
    """Whether a fresh consumer fetches anything at ``tp``'s ``offset`` within ``seconds``.

    True: a record at or past ``offset`` arrived, or the consumer moved past it
    (markers); False: nothing, while the broker answered end offsets (asked
    through the offsets reader, which never fetches) before and after; None:
    the broker did not answer (inconclusive).
    """
    reader = connections.offsets_reader
    try:
        if reader().end_offsets([tp], timeout=5.0)[tp] <= offset:
            return True  # nothing waits there any more
        consumer = connections.client.consumer(None, **connections.consumer_options())
    except KafkaTransportError:
        connections.drop_offsets_reader()
        return None
    try:
        consumer.assign([tp])
        consumer.seek(tp, offset)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                if any(record.offset >= offset for record in consumer.poll(10, timeout=0.5)):
                    return True
            except KafkaTransportError:
                pass  # this consumer's connection may break on the record: that is what is being found out
            position = consumer.position(tp)
            if position is not None and position > offset:
                return True
        try:
            end = reader().end_offsets([tp], timeout=5.0)[tp]
        except KafkaTransportError:
            connections.drop_offsets_reader()
            return None
        return end <= offset
    except KafkaTransportError:
        return None
    finally:
        try:
            consumer.close()
        except Exception as exc:  # noqa: BLE001 - a probe that cannot close is dropped
            log.debug("probe close failed", extra={"error": str(exc)})
