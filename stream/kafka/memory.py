"""The in-process client: :class:`MemoryBroker`, a stand-in for a Kafka cluster, and its client.

``kind="memory"``: every client whose ``bootstrap_servers`` has the same name
(e.g. ``memory://tests-1``) shares one broker. For fast model and pipeline
tests; Kafka behaviour itself is always also tested against a real broker
(``tests/test_transport.py``). The checks every client shares are in ``base.py``.

Examples
--------
>>> client = MemoryClient(KafkaConfig(bootstrap_servers="memory://doctest-memory"))
>>> client.admin().create_topics([("events", 2, 1)])
>>> with client.producer() as producer:
...     producer.send("events", b"hello", key=b"k1")
>>> consumer = client.consumer("readers")
>>> consumer.assign([TopicPartition("events", p) for p in consumer.partitions_for("events")])
>>> [(r.partition, r.value) for r in consumer.poll(10, timeout=0.1)]
[(1, b'hello')]
"""
from __future__ import annotations

import itertools
import logging
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .base import ConsumerBase, ProducerBase
from .config import ConsumerSettings, KafkaConfig, ProducerSettings
from .interfaces import Admin, Client, Consumer, Producer
from .partitioner import murmur2_partition
from .values import (
    DEFAULT_REQUEST_TIMEOUT,
    CommitFailedError,
    Headers,
    KafkaTransportError,
    OffsetReset,
    Record,
    TopicPartition,
)

__all__ = ["MemoryBroker", "MemoryClient"]

log = logging.getLogger(__name__)




@dataclass
class _MemoryGroup:
    members: dict[str, "_MemoryConsumer"] = field(default_factory=dict)
    generation: int = 0
    preparing: bool = False  # a rebalance is waiting for members to rejoin
    joined: set[str] = field(default_factory=set)
    assignment: dict[str, list[TopicPartition]] = field(default_factory=dict)


#: A transaction control marker in a memory log: it holds an offset and is never delivered.
_MARKER: Any = object()


class MemoryBroker:
    """An in-process, thread-safe stand-in for a Kafka cluster.

    Kafka semantics kept: per-partition logs with dense offsets from 0,
    murmur2 key partitioning, committed offsets per group (next offset to
    read), ``auto_offset_reset`` for partitions without a commit and for
    out-of-range positions, consumer groups with eager range assignment:
    a membership change starts a rebalance, every member revokes (``on_revoke``
    at its next poll, where commits are still accepted), and once all members
    have rejoined the partitions are assigned (``on_assign``). A member that
    does not poll within its ``session_timeout_ms`` during a rebalance is
    evicted. Commits from a member whose generation is stale raise
    :class:`CommitFailedError`.

    Retention is modelled by :meth:`delete_records` (Kafka's DeleteRecords: the
    log start moves forward; a position before it is out of range). Not
    modelled: compaction, transactions, timestamps-to-offset lookup, broker
    failures and latency.

    Parameters
    ----------
    default_partitions : int
        Partitions of a topic auto-created by a producer (Kafka's
        ``num.partitions``).
    auto_create_topics : bool
        Create unknown topics on first produce, like Kafka and Tansu do by default.

    Examples
    --------
    >>> broker = MemoryBroker(default_partitions=2)
    >>> broker.create_topic("t", 3), broker.create_topic("t", 3), broker.topics()
    (True, False, {'t': 3})
    >>> client = MemoryClient(KafkaConfig(bootstrap_servers="memory://broker-doc"), broker)
    >>> producer = client.producer(); producer.send("t", b"v", partition=1); producer.send("new", b"w")
    >>> producer.flush(); broker.end_offset(TopicPartition("t", 1)), broker.topics()["new"]
    (1, 2)
    >>> broker.delete_records(TopicPartition("t", 1), 1), broker.log_start(TopicPartition("t", 1))
    (1, 1)
    """

    _registry: ClassVar[dict[str, "MemoryBroker"]] = {}
    _registry_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, default_partitions: int = 1, auto_create_topics: bool = True) -> None:
        self.default_partitions = default_partitions
        self.auto_create_topics = auto_create_topics
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._logs: dict[str, list[list[Record]]] = {}
        self._groups: dict[str, _MemoryGroup] = {}
        self._commits: dict[str, dict[TopicPartition, int]] = {}
        self._log_start: dict[TopicPartition, int] = {}
        self._topic_ids: dict[str, str] = {}

    @classmethod
    def named(cls, name: str) -> "MemoryBroker":
        """The process-wide broker called ``name`` (created on first use)."""
        with cls._registry_lock:
            broker = cls._registry.get(name)
            if broker is None:
                broker = cls._registry[name] = cls()
            return broker

    # -- topics and logs ----------------------------------------------------------------

    def create_topic(self, name: str, partitions: int) -> bool:
        """Create a topic; False if it already existed."""
        if partitions < 1:
            raise ValueError("a topic needs at least one partition")
        with self._lock:
            if name in self._logs:
                return False
            self._logs[name] = [[] for _ in range(partitions)]
            self._topic_ids[name] = uuid.uuid4().hex
            self._changed.notify_all()
            return True

    def delete_topic(self, name: str) -> bool:
        """Delete a topic and its logs (DeleteTopics); False if there was none. Created again, it starts empty."""
        with self._lock:
            if self._logs.pop(name, None) is None:
                return False
            self._topic_ids.pop(name, None)
            for tp in [tp for tp in self._log_start if tp.topic == name]:
                del self._log_start[tp]
            self._changed.notify_all()
            return True

    def topic_id(self, name: str) -> str | None:
        with self._lock:
            if name in self._logs and name not in self._topic_ids:  # auto-created by a producer
                self._topic_ids[name] = uuid.uuid4().hex
            return self._topic_ids.get(name)

    def topics(self) -> dict[str, int]:
        with self._lock:
            return {name: len(parts) for name, parts in sorted(self._logs.items())}

    def partitions(self, topic: str) -> int:
        with self._lock:
            return len(self._logs.get(topic, ()))

    def append(self, topic: str, partition: int, key: bytes | None, value: bytes | None, headers: Headers,
               timestamp_ms: int | None = None) -> Record:
        with self._lock:
            if topic not in self._logs:
                if not self.auto_create_topics:
                    raise KafkaTransportError(f"unknown topic {topic!r}")
                self._logs[topic] = [[] for _ in range(self.default_partitions)]
            parts = self._logs[topic]
            if not 0 <= partition < len(parts):
                raise KafkaTransportError(f"unknown partition {topic}[{partition}]")
            log_ = parts[partition]
            stamp = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
            record = Record(topic, partition, len(log_), key, value, stamp, headers)
            log_.append(record)
            self._changed.notify_all()
            return record

    def append_marker(self, topic: str, partition: int) -> int:
        """Write a transaction control marker: it takes an offset but no consumer ever receives it.

        Returns its offset. (A transactional producer's commit or abort leaves
        one; read-committed consumers also skip aborted records: both are
        offsets that are never delivered although nothing was deleted.)
        """
        with self._lock:
            parts = self._logs.get(topic)
            if parts is None or not 0 <= partition < len(parts):
                raise KafkaTransportError(f"unknown partition {topic}[{partition}]")
            parts[partition].append(_MARKER)
            self._changed.notify_all()
            return len(parts[partition]) - 1

    def end_offset(self, tp: TopicPartition) -> int:
        with self._lock:
            parts = self._logs.get(tp.topic)
            if parts is None or not 0 <= tp.partition < len(parts):
                raise KafkaTransportError(f"unknown partition {tp}")
            return len(parts[tp.partition])

    def log_start(self, tp: TopicPartition) -> int:
        """The first offset still held (0 unless :meth:`delete_records` moved it)."""
        with self._lock:
            return self._log_start.get(tp, 0)

    def delete_records(self, tp: TopicPartition, before_offset: int) -> int:
        """Delete the records below ``before_offset``, as retention does; returns the new log start."""
        with self._lock:
            parts = self._logs.get(tp.topic)
            if parts is None or not 0 <= tp.partition < len(parts):
                raise KafkaTransportError(f"unknown partition {tp}")
            log_ = parts[tp.partition]
            start = self._log_start.get(tp, 0)
            new_start = min(max(start, before_offset), len(log_))
            log_[start:new_start] = [None] * (new_start - start)  # offsets stay dense: the slots just empty
            self._log_start[tp] = new_start
            return new_start

    def read(self, tp: TopicPartition, offset: int, max_records: int) -> list[Record]:
        with self._lock:
            assert offset >= self._log_start.get(tp, 0), "read below the log start"
            return self._logs[tp.topic][tp.partition][offset : offset + max_records]

    # -- offsets ---------------------------------------------------------------------------

    def committed(self, group_id: str, tp: TopicPartition) -> int | None:
        with self._lock:
            return self._commits.get(group_id, {}).get(tp)

    def _group(self, group_id: str) -> _MemoryGroup:
        group = self._groups.get(group_id)
        if group is None:
            group = self._groups[group_id] = _MemoryGroup()
        return group

    def _begin_rebalance(self, group: _MemoryGroup) -> None:
        group.preparing = True
        group.joined = set()
        self._changed.notify_all()

    def _complete_rebalance_if_ready(self, group: _MemoryGroup, now: float) -> None:
        if not group.preparing:
            return
        # Evict members that stopped polling (the rebalance timeout).
        for member_id, member in list(group.members.items()):
            if member_id not in group.joined and now - member._last_poll > member._session_timeout:
                log.info("memory broker: evicting member %s (no poll for %.1fs)", member_id, now - member._last_poll)
                del group.members[member_id]
        if not set(group.members) <= group.joined:
            return
        group.generation += 1
        group.preparing = False
        group.assignment = _range_assign({m: c._subscription for m, c in group.members.items()}, self._logs)
        self._changed.notify_all()


def _range_assign(subscriptions: Mapping[str, Sequence[str]], logs: Mapping[str, list[list[Record]]]) -> dict[str, list[TopicPartition]]:
    """Kafka's RangeAssignor: per topic, contiguous partition ranges to members sorted by id."""
    assignment: dict[str, list[TopicPartition]] = {member: [] for member in subscriptions}
    topics = sorted({t for subs in subscriptions.values() for t in subs})
    for topic in topics:
        members = sorted(m for m, subs in subscriptions.items() if topic in subs)
        n_partitions = len(logs.get(topic, ()))
        if not members or not n_partitions:
            continue
        per_member, extra = divmod(n_partitions, len(members))
        start = 0
        for i, member in enumerate(members):
            count = per_member + (1 if i < extra else 0)
            assignment[member].extend(TopicPartition(topic, p) for p in range(start, start + count))
            start += count
    return assignment


class MemoryClient(Client):
    """:class:`Client` on a :class:`MemoryBroker` named by ``config.bootstrap_servers``.

    Dialect overrides and ``fetch_wait_ms`` are accepted and ignored: the broker
    answers a fetch as soon as it has records.

    Examples
    --------
    >>> a = MemoryClient(KafkaConfig(bootstrap_servers="memory://client-doc-2"))
    >>> b = MemoryClient(KafkaConfig(bootstrap_servers="memory://client-doc-2"))
    >>> a.broker is b.broker, a.broker is MemoryClient(MemoryClient.default_config()).broker  # one broker per name
    (True, False)
    """

    kind = "memory"

    def __init__(self, config: KafkaConfig, broker: MemoryBroker | None = None) -> None:
        super().__init__(config)
        self.broker = broker or MemoryBroker.named(config.bootstrap_servers)

    @classmethod
    def default_config(cls) -> KafkaConfig:
        return KafkaConfig(bootstrap_servers="memory://default")

    def open_producer(self, settings: ProducerSettings, overrides: Mapping[str, Any]) -> Producer:
        return _MemoryProducer(self.broker)  # in process: every record lands once, in order, at once

    def open_consumer(self, settings: ConsumerSettings, overrides: Mapping[str, Any]) -> Consumer:
        if settings.auto_offset_reset not in ("earliest", "latest"):
            raise ValueError(f"auto_offset_reset must be 'earliest' or 'latest', got {settings.auto_offset_reset!r}")
        return _MemoryConsumer(self.broker, settings.group_id, settings.auto_offset_reset, settings.session_timeout_ms,
                               self.config.client_id)

    def admin(self, timeout: float | None = None) -> Admin:
        return _MemoryAdmin(self.broker)


class _MemoryProducer(ProducerBase):
    def __init__(self, broker: MemoryBroker) -> None:
        super().__init__()
        self._broker = broker
        self._round_robin: dict[str, itertools.count] = {}

    def _send(self, topic, value, key, headers, partition, timestamp_ms=None) -> None:  # noqa: ANN001 - see ProducerBase._send
        value = bytes(value) if value is not None else None
        key = bytes(key) if key is not None else None
        try:
            if partition is None:
                n = self._broker.partitions(topic) or (self._broker.default_partitions if self._broker.auto_create_topics else 0)
                if n == 0:
                    raise KafkaTransportError(f"unknown topic {topic!r}")
                if key is not None:
                    partition = murmur2_partition(key, n)
                else:
                    partition = next(self._round_robin.setdefault(topic, itertools.count())) % n
            self._broker.append(topic, partition, key, value, tuple(headers or ()), timestamp_ms)
        except KafkaTransportError as exc:
            self._fail(topic, partition, key, value, str(exc))

    def _flush(self, timeout: float) -> int:
        return 0  # appended synchronously: nothing is ever in flight


class _MemoryConsumer(ConsumerBase):
    def __init__(self, broker: MemoryBroker, group_id: str | None, reset: OffsetReset, session_timeout_ms: int, client_id: str) -> None:
        super().__init__(group_id)
        self._broker = broker
        self._reset = reset
        self._session_timeout = session_timeout_ms / 1000.0
        self._member_id = f"{client_id}-{uuid.uuid4()}"
        self._subscription: list[str] = []
        self._generation = -1
        self._assigned: list[TopicPartition] = []
        self._positions: dict[TopicPartition, int] = {}
        self._next_partition = 0
        self._last_poll = time.monotonic()

    def _starting_offset(self, tp: TopicPartition) -> int:
        if self.group_id is not None:
            committed = self._broker.committed(self.group_id, tp)
            if committed is not None:
                return committed
        return 0 if self._reset == "earliest" else self._broker.end_offset(tp)

    def _subscribe(self, topics: list[str]) -> None:
        b = self._broker
        with b._lock:
            self._subscription = sorted(set(topics))
            group = b._group(self.group_id)
            group.members[self._member_id] = self
            self._last_poll = time.monotonic()
            b._begin_rebalance(group)

    def _assign(self, partitions: list[TopicPartition]) -> None:
        partitions = list(dict.fromkeys(partitions))
        for tp in partitions:
            self._broker.end_offset(tp)  # raises for an unknown partition
        self._assigned = partitions
        self._positions = {tp: self._starting_offset(tp) for tp in partitions}

    def _seek(self, tp: TopicPartition, offset: int) -> None:
        if tp not in self._positions:
            raise ValueError(f"{tp} is not assigned to this consumer")
        self._positions[tp] = offset

    def _sync_group(self, deadline: float) -> None:
        """Take part in a pending rebalance: revoke, rejoin, wait, adopt."""
        b = self._broker
        assert self.group_id is not None
        while True:
            with b._lock:
                group = b._group(self.group_id)
                now = time.monotonic()
                self._last_poll = now
                if self._member_id not in group.members:  # evicted: rejoin
                    group.members[self._member_id] = self
                    b._begin_rebalance(group)
                must_revoke = group.preparing and self._member_id not in group.joined and bool(self._assigned)
            if must_revoke:
                revoked = sorted(self._assigned)
                if self._on_revoke is not None:
                    self._on_revoke(revoked)  # commits still accepted here
            with b._lock:
                group = b._group(self.group_id)
                if group.preparing and self._member_id not in group.joined and self._member_id in group.members:
                    self._assigned, self._positions = [], {}
                    group.joined.add(self._member_id)
                b._complete_rebalance_if_ready(group, time.monotonic())
                adopt = not group.preparing and self._generation != group.generation and self._member_id in group.members
                if adopt:
                    self._generation = group.generation
                    self._assigned = list(group.assignment.get(self._member_id, []))
                    self._positions = {tp: self._starting_offset(tp) for tp in self._assigned}
                    assigned = sorted(self._assigned)
                elif group.preparing:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return
                    b._changed.wait(min(remaining, 0.1))
                    continue
            if adopt and self._on_assign is not None:
                self._on_assign(assigned)  # seek() from here sets start offsets
            return

    def poll(self, max_records: int = 500, timeout: float = 1.0) -> list[Record]:
        if self._closed:
            raise RuntimeError("consumer is closed")
        deadline = time.monotonic() + timeout
        b = self._broker
        while True:
            self._last_poll = time.monotonic()
            if self._mode == "subscribed":
                self._sync_group(deadline)
            records = self._fetch(max_records)
            if records:
                return records
            with b._lock:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return []
                if self._mode == "subscribed" and self.group_id is not None and b._group(self.group_id).preparing:
                    continue
                b._changed.wait(min(remaining, 0.1))

    def _fetch(self, max_records: int) -> list[Record]:
        b = self._broker
        out: list[Record] = []
        with b._lock:
            tps = self._assigned
            if not tps:
                return out
            start = self._next_partition % len(tps)
            self._next_partition += 1
            for tp in tps[start:] + tps[:start]:  # rotate so no partition starves
                if len(out) >= max_records:
                    break
                end = b.end_offset(tp)
                pos = self._positions[tp]
                if pos > end or pos < b.log_start(tp):  # out of range
                    pos = self._positions[tp] = b.log_start(tp) if self._reset == "earliest" else end
                batch = b.read(tp, pos, max_records - len(out))
                if batch:
                    out.extend(record for record in batch if record is not _MARKER)
                    self._positions[tp] = pos + len(batch)
        return out

    def _commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        b = self._broker
        with b._lock:
            if self._mode == "subscribed":
                group = b._group(self.group_id)
                if self._member_id not in group.members or self._generation != group.generation:
                    raise CommitFailedError(
                        f"member {self._member_id} has generation {self._generation}, group {self.group_id!r} is at {group.generation}"
                    )
            b._commits.setdefault(self.group_id, {}).update(offsets)

    def _committed(self, tps: list[TopicPartition], timeout: float) -> dict[TopicPartition, int | None]:
        return {tp: self._broker.committed(self.group_id, tp) for tp in tps}

    def assignment(self) -> set[TopicPartition]:
        return set(self._assigned)

    def _end_offsets(self, tps: list[TopicPartition], timeout: float) -> dict[TopicPartition, int]:
        return {tp: self._broker.end_offset(tp) for tp in tps}

    def beginning_offsets(self, tps, timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[TopicPartition, int]:  # noqa: ANN001
        return {tp: self._broker.log_start(tp) for tp in tps}

    def partitions_for(self, topic: str) -> list[int]:
        return list(range(self._broker.partitions(topic)))

    def position(self, tp: TopicPartition) -> int | None:
        with self._broker._lock:
            return self._positions.get(tp)

    def _close(self) -> None:
        if self._mode != "subscribed" or self.group_id is None:
            return
        try:
            if self._assigned and self._on_revoke is not None:
                self._on_revoke(sorted(self._assigned))
        finally:
            b = self._broker
            with b._lock:
                group = b._group(self.group_id)
                group.members.pop(self._member_id, None)
                self._assigned, self._positions = [], {}
                if group.members:
                    b._begin_rebalance(group)


class _MemoryAdmin(Admin):
    def __init__(self, broker: MemoryBroker) -> None:
        self._broker = broker

    def create_topics(self, topics, exist_ok: bool = True, timeout: float = 30.0) -> None:  # noqa: ANN001
        for name, parts, _replication in topics:
            if not self._broker.create_topic(name, parts) and not exist_ok:
                raise KafkaTransportError(f"topic {name!r} already exists")

    def list_topics(self, timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[str, int]:
        return self._broker.topics()

    def topic_id(self, topic: str, timeout: float = DEFAULT_REQUEST_TIMEOUT) -> str | None:
        return self._broker.topic_id(topic)

    def close(self) -> None:
        pass
