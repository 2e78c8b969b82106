"""The interface the service programs against: :class:`Producer`, :class:`Consumer`,
:class:`Admin`, and :class:`Client`, the factory of the three for one kind and one config.

The rules every implementation keeps (offsets, where reading starts, delivery
failures, rebalance callbacks) are written here and in ``docs/KAFKA.md``; the
argument checks that enforce them are shared by all clients (``base.py``).
"""
from __future__ import annotations

import abc
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, ClassVar, TypeAlias

from .config import ConsumerSettings, KafkaConfig, ProducerSettings
from .values import DEFAULT_REQUEST_TIMEOUT, DEFAULT_SESSION_TIMEOUT_MS, NewTopic, OffsetReset, Record, TopicPartition

__all__ = ["Admin", "Client", "Consumer", "Producer", "RebalanceCallback"]

#: ``on_assign`` / ``on_revoke`` receive the partitions, sorted.
RebalanceCallback: TypeAlias = Callable[[list[TopicPartition]], None]


class _Closeable(abc.ABC):
    @abc.abstractmethod
    def close(self) -> None:
        """Release the client's connections and threads. Idempotent."""

    def __enter__(self):  # noqa: ANN204 - returns the concrete subclass
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


class Producer(_Closeable):
    """Sends records; delivery is asynchronous, :meth:`flush` reports the outcome.

    :meth:`send` raises only for misuse (wrong types, closed producer). Every
    delivery problem -- unknown partition, broker unreachable, timeout -- is
    collected and raised by the next :meth:`flush` as :class:`DeliveryError`,
    whichever client is underneath.

    Examples
    --------
    >>> from sgm.stream.kafka import KafkaConfig, MemoryBroker, MemoryClient
    >>> client = MemoryClient(KafkaConfig(bootstrap_servers="memory://producer-doc"),
    ...                       MemoryBroker(auto_create_topics=False))
    >>> producer = client.producer()
    >>> producer.send("missing", b"v", key=b"k")  # queued: no error yet
    >>> producer.flush()
    Traceback (most recent call last):
    ...
    sgm.stream.kafka.values.DeliveryError: 1 record(s) failed, first: missing[None]: unknown topic 'missing'
    """

    @abc.abstractmethod
    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: Sequence[tuple[str, bytes]] | Mapping[str, bytes] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> None:
        """Queue one record. Without ``partition``, a key picks the partition by
        murmur2 (Java-compatible, identical across the three implementations);
        no key spreads records over partitions. ``timestamp_ms``: the record's
        CreateTime (default: now, the producer's clock)."""

    @abc.abstractmethod
    def flush(self, timeout: float = 30.0) -> None:
        """Wait until every queued record is delivered.

        Raises
        ------
        DeliveryError
            If any record sent since the previous flush failed, or some are still
            in flight after ``timeout`` seconds.
        """

    @abc.abstractmethod
    def close(self, timeout: float = 30.0) -> None:  # type: ignore[override]
        """Flush (raising like :meth:`flush`) and release the producer."""


class Consumer(_Closeable):
    """Reads records from assigned partitions; commits are explicit and synchronous.

    A consumer is either group-managed (:meth:`subscribe`: the group splits the
    partitions among its members and rebalances as members come and go) or
    manual (:meth:`assign`: it reads exactly the partitions given, outside any
    group membership). It cannot be both. With a ``group_id``, a manual
    consumer still commits to and resumes from that group's offsets.

    Where a newly assigned partition starts: the group's committed offset if
    there is one, else ``auto_offset_reset`` (``earliest`` or ``latest``).

    Callbacks (``on_assign``, ``on_revoke``) run inside :meth:`poll` (and
    ``on_revoke`` inside :meth:`close`), on the polling thread. Commits from
    ``on_revoke`` are accepted: that is the place to commit processed work
    before a partition moves. An exception raised by a callback propagates out
    of :meth:`poll`.

    Examples
    --------
    >>> from sgm.stream.kafka import KafkaConfig, MemoryBroker, MemoryClient, TopicPartition
    >>> client = MemoryClient(KafkaConfig(bootstrap_servers="memory://consumer-doc"), MemoryBroker())
    >>> producer = client.producer(); producer.send("t", b"v", partition=0); producer.flush()
    >>> consumer = client.consumer("readers")
    >>> consumer.assign([TopicPartition("t", 0)])
    >>> [(r.offset, r.value) for r in consumer.poll(10, 0.1)]
    [(0, b'v')]
    >>> consumer.commit({TopicPartition("t", 0): 1})  # the next offset to read
    >>> consumer.committed([TopicPartition("t", 0)]), consumer.end_offsets([TopicPartition("t", 0)])
    ({TopicPartition(topic='t', partition=0): 1}, {TopicPartition(topic='t', partition=0): 1})
    >>> consumer.close()
    """

    group_id: str | None

    @abc.abstractmethod
    def subscribe(
        self,
        topics: Sequence[str],
        on_assign: RebalanceCallback | None = None,
        on_revoke: RebalanceCallback | None = None,
    ) -> None:
        """Join the consumer group for ``topics`` (needs ``group_id``)."""

    @abc.abstractmethod
    def assign(self, partitions: Sequence[TopicPartition]) -> None:
        """Read exactly ``partitions`` (replacing any previous manual assignment)."""

    @abc.abstractmethod
    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Make the next :meth:`poll` for ``tp`` start at ``offset``.

        ``tp`` must be assigned (``ValueError`` otherwise); calling it from
        ``on_assign`` is allowed and sets the starting offset.
        """

    @abc.abstractmethod
    def poll(self, max_records: int = 500, timeout: float = 1.0) -> list[Record]:
        """Return up to ``max_records`` records, waiting up to ``timeout`` seconds for the first."""

    @abc.abstractmethod
    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit ``offsets`` (next offset to read) for the group, synchronously.

        Raises
        ------
        CommitFailedError
            The group rebalanced and this member's generation is stale.
        KafkaTransportError
            Any other failure, or the consumer has no ``group_id``.
        """

    @abc.abstractmethod
    def committed(self, tps: Iterable[TopicPartition], timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[TopicPartition, int | None]:
        """The group's committed offsets; ``None`` where nothing is committed."""

    @abc.abstractmethod
    def assignment(self) -> set[TopicPartition]:
        """Partitions currently assigned to this consumer."""

    @abc.abstractmethod
    def end_offsets(self, tps: Iterable[TopicPartition], timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[TopicPartition, int]:
        """Log end offset (offset of the next record to be written) per partition."""

    @abc.abstractmethod
    def beginning_offsets(self, tps: Iterable[TopicPartition],
                          timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[TopicPartition, int]:
        """Log start offset (the first offset retention has not deleted) per partition."""

    @abc.abstractmethod
    def partitions_for(self, topic: str) -> list[int]:
        """Partition ids of ``topic``, sorted; empty if the topic does not exist."""

    def position(self, tp: TopicPartition) -> int | None:
        """The offset the next record of ``tp`` will come from, past records and transaction markers
        already consumed; ``None`` when the client does not know it (yet)."""
        return None

    @abc.abstractmethod
    def close(self) -> None:
        """Leave the group (``on_revoke`` runs first) and release the consumer."""


class Admin(_Closeable):
    """Topic administration.

    Examples
    --------
    >>> from sgm.stream.kafka import KafkaConfig, MemoryBroker, MemoryClient
    >>> admin = MemoryClient(KafkaConfig(bootstrap_servers="memory://admin-doc"), MemoryBroker()).admin()
    >>> admin.create_topics([("events", 3, 1)]); admin.list_topics()
    {'events': 3}
    """

    @abc.abstractmethod
    def create_topics(self, topics: Sequence[NewTopic], exist_ok: bool = True, timeout: float = 30.0) -> None:
        """Create ``(name, partitions, replication_factor)`` topics and wait until
        their metadata is visible. An existing topic is an error unless ``exist_ok``
        (its partition count is not checked)."""

    @abc.abstractmethod
    def list_topics(self, timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[str, int]:
        """``{topic: number of partitions}`` for every non-internal topic."""

    def topic_id(self, topic: str, timeout: float = DEFAULT_REQUEST_TIMEOUT) -> str | None:
        """The id the broker gave ``topic`` when it was created (KIP-516: a topic deleted and created
        again under the same name gets a new one); ``None`` if the topic does not exist or the client
        or broker cannot tell."""
        return None


class Client(abc.ABC):
    """Factory for producers, consumers and admins of one kind and one config.

    An implementation names its ``kind`` and writes :meth:`open_producer` (behind :meth:`producer`),
    :meth:`open_consumer` (behind :meth:`consumer`) and :meth:`admin`; :func:`open_client` finds it by
    ``kind`` (``registry.py``).

    Parameters
    ----------
    config : KafkaConfig

    Examples
    --------
    >>> from sgm.stream.kafka import KafkaConfig, open_client
    >>> client = open_client("memory", KafkaConfig(bootstrap_servers="memory://client-doc"))
    >>> client.kind, client.config.bootstrap_servers
    ('memory', 'memory://client-doc')
    >>> with client.producer(idempotent=True) as producer:  # neutral settings; closing flushes
    ...     producer.send("t", b"v")
    >>> client.admin().list_topics()
    {'t': 1}
    """

    kind: ClassVar[str]

    def __init__(self, config: KafkaConfig) -> None:
        self.config = config

    @classmethod
    def default_config(cls) -> KafkaConfig:
        """The config :func:`open_client` uses when given none."""
        return KafkaConfig()

    def producer(self, *, idempotent: bool = False, delivery_timeout_ms: int | None = None,
                 max_request_bytes: int | None = None, **overrides: Any) -> Producer:
        """A new producer (see :class:`ProducerSettings`); ``overrides`` are client-dialect settings
        and win over everything else."""
        return self.open_producer(ProducerSettings(idempotent, delivery_timeout_ms, max_request_bytes), overrides)

    def open_producer(self, settings: ProducerSettings, overrides: Mapping[str, Any]) -> Producer:
        """The implementation behind :meth:`producer` (call that one).

        Every client in this package writes it; a wrapper (a test double, say)
        may override :meth:`producer` itself instead.
        """
        raise NotImplementedError(f"{type(self).__name__} implements neither open_producer() nor producer()")

    def consumer(
        self,
        group_id: str | None = None,
        *,
        auto_offset_reset: OffsetReset = "earliest",
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        fetch_wait_ms: int | None = None,
        max_response_bytes: int | None = None,
        **overrides: Any,
    ) -> Consumer:
        """A new consumer; ``group_id=None`` makes a group-less (manual-only) one.

        ``session_timeout_ms`` bounds how long a dead member keeps its
        partitions; on Tansu a group join also takes about half of it.
        ``fetch_wait_ms`` is the longest the broker holds a fetch waiting for
        data (``None``: 100 ms; the memory broker answers at once). ``overrides``
        are client-dialect settings and win over everything else.
        """
        settings = ConsumerSettings(group_id, auto_offset_reset, session_timeout_ms, fetch_wait_ms, max_response_bytes)
        return self.open_consumer(settings, overrides)

    def open_consumer(self, settings: ConsumerSettings, overrides: Mapping[str, Any]) -> Consumer:
        """The implementation behind :meth:`consumer` (call that one).

        Every client in this package writes it; a wrapper (a test double, say)
        may override :meth:`consumer` itself instead.
        """
        raise NotImplementedError(f"{type(self).__name__} implements neither open_consumer() nor consumer()")

    @abc.abstractmethod
    def admin(self, timeout: float | None = None) -> Admin:
        """A new admin client; ``timeout`` (seconds) bounds what opening it may wait for the cluster (a client
        that bootstraps in its constructor, kafka-python, waits up to 30 s by default)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config.bootstrap_servers!r})"
