"""One small Kafka client interface, three implementations.

The service talks to Kafka only through the abstract classes here:

* :class:`Producer` -- ``send`` records, ``flush`` (raises :class:`DeliveryError`
  if any delivery failed), ``close``.
* :class:`Consumer` -- group-managed :meth:`~Consumer.subscribe` *or* manual
  :meth:`~Consumer.assign`; ``seek``, ``poll``, explicit synchronous ``commit``
  (auto-commit is always off), ``committed``, ``assignment``, ``end_offsets``,
  ``partitions_for``, ``close``.
* :class:`Admin` -- ``create_topics``, ``list_topics``.
* :class:`Client` -- the factory for the three, from :func:`open_client`.

Implementations, chosen by ``kind``:

``"confluent"``
    confluent-kafka (librdkafka). The fast one; the default for the service.
``"kafka-python"``
    kafka-python, pure Python. Slower, no native dependency.
``"memory"``
    An in-process broker (:class:`MemoryBroker`) with topics, partitions,
    offsets, commits and consumer groups (range assignment, rebalance
    callbacks). For fast model and pipeline tests; Kafka behaviour itself is
    always also tested against a real broker (``tests/test_transport.py``).

Offsets follow Kafka's convention everywhere: a committed offset, a seek target
and an end offset are all *the next offset to read* (last processed + 1).

Configuration is one :class:`KafkaConfig`; :func:`confluent_config` and
:func:`kafka_python_config` map it to each client's own keys (the table is in
``docs/KAFKA.md`` and in :class:`KafkaConfig`).

Examples
--------
>>> client = open_client("memory", KafkaConfig(bootstrap_servers="memory://doctest"))
>>> client.admin().create_topics([("events", 2, 1)])
>>> producer = client.producer()
>>> producer.send("events", b"hello", key=b"k1")
>>> producer.flush()
>>> consumer = client.consumer("readers")
>>> consumer.assign([TopicPartition("events", p) for p in consumer.partitions_for("events")])
>>> [r.value for r in consumer.poll(10, timeout=0.1)]
[b'hello']
"""
from __future__ import annotations

import abc
import dataclasses
import itertools
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, ClassVar, Literal, TypeAlias

__all__ = [
    "Admin",
    "Client",
    "ClientKind",
    "CommitFailedError",
    "Consumer",
    "DeliveryError",
    "DeliveryFailure",
    "KafkaConfig",
    "KafkaTransportError",
    "MemoryBroker",
    "NewTopic",
    "Producer",
    "Record",
    "RebalanceCallback",
    "TopicPartition",
    "confluent_config",
    "kafka_python_config",
    "murmur2_partition",
    "open_client",
]

log = logging.getLogger(__name__)
_librdkafka_log = logging.getLogger(__name__ + ".librdkafka")

ClientKind: TypeAlias = Literal["kafka-python", "confluent", "memory"]
SecurityProtocol: TypeAlias = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
OffsetReset: TypeAlias = Literal["earliest", "latest"]
#: ``(name, partitions, replication_factor)`` for :meth:`Admin.create_topics`.
NewTopic: TypeAlias = tuple[str, int, int]
Headers: TypeAlias = tuple[tuple[str, bytes], ...]

#: Default for blocking metadata/offset requests, seconds.
DEFAULT_REQUEST_TIMEOUT = 10.0
#: Default session timeout. Kafka's own default (45 s) makes every join on
#: Tansu take ~22 s: Tansu completes a JoinGroup after about half the session
#: timeout. 6 s is Kafka's minimum allowed (group.min.session.timeout.ms).
DEFAULT_SESSION_TIMEOUT_MS = 6000


# ---------------------------------------------------------------------------------
# Value types
# ---------------------------------------------------------------------------------


@dataclass(frozen=True, order=True, slots=True)
class TopicPartition:
    """A partition of a topic."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}]"


@dataclass(frozen=True, slots=True)
class Record:
    """One consumed record.

    Attributes
    ----------
    topic, partition, offset
        Where the record lives. Commit ``offset + 1`` once it is processed.
    key, value
        Raw bytes; ``None`` for a null key or a tombstone.
    timestamp_ms
        Record timestamp (create time unless the topic says log-append time),
        ``None`` when the broker reports none.
    headers
        ``(name, value)`` pairs in order; a null header value arrives as ``b""``.
    """

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int | None = None
    headers: Headers = ()

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class DeliveryFailure:
    """A record the producer could not deliver, and why."""

    topic: str
    partition: int | None
    key: bytes | None
    value: bytes | None
    error: str


class KafkaTransportError(Exception):
    """Base class of the errors raised by this module for Kafka-side problems."""


class DeliveryError(KafkaTransportError):
    """Raised by :meth:`Producer.flush` when records were not delivered.

    Attributes
    ----------
    failures : list of DeliveryFailure
        Records whose delivery failed since the previous flush.
    undelivered : int or None
        Records still in flight when the flush timed out (``None``: unknown count).
    """

    def __init__(self, failures: Sequence[DeliveryFailure], undelivered: int | None = 0) -> None:
        self.failures = list(failures)
        self.undelivered = undelivered
        parts = []
        if self.failures:
            first = self.failures[0]
            parts.append(f"{len(self.failures)} record(s) failed, first: {first.topic}[{first.partition}]: {first.error}")
        if undelivered is None or undelivered > 0:
            parts.append(f"{'some' if undelivered is None else undelivered} record(s) still undelivered at timeout")
        super().__init__("; ".join(parts) or "delivery failed")


class CommitFailedError(KafkaTransportError):
    """An offset commit was rejected, typically because the group rebalanced.

    Safe to treat as "another member owns the partition now": the records
    will be redelivered to it from the last successful commit.
    """


# ---------------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------------

_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass
class KafkaConfig:
    """Connection and security settings shared by every client of a service.

    ============================  ================================  ==========================
    KafkaConfig                   confluent-kafka (librdkafka)      kafka-python
    ============================  ================================  ==========================
    ``bootstrap_servers``         ``bootstrap.servers``             ``bootstrap_servers``
    ``client_id``                 ``client.id``                     ``client_id``
    ``security_protocol``         ``security.protocol``             ``security_protocol``
    ``sasl_mechanism``            ``sasl.mechanism``                ``sasl_mechanism``
    ``sasl_username``             ``sasl.username``                 ``sasl_plain_username``
    ``sasl_password``             ``sasl.password``                 ``sasl_plain_password``
    ``ssl_cafile``                ``ssl.ca.location``               ``ssl_cafile``
    ``ssl_certfile``              ``ssl.certificate.location``      ``ssl_certfile``
    ``ssl_keyfile``               ``ssl.key.location``              ``ssl_keyfile``
    ``ssl_check_hostname``        ``ssl.endpoint.identification``   ``ssl_check_hostname``
                                  ``.algorithm`` = https / none
    ``extra``                     merged last, verbatim             merged last, keys not
                                                                    valid for the role dropped
    ============================  ================================  ==========================

    Settings left at ``None`` are not passed, so each client keeps its default.

    Parameters
    ----------
    bootstrap_servers : str
        ``host:port[,host:port...]``; for ``kind="memory"`` any name, e.g.
        ``"memory://tests"`` (clients with the same name share one broker).
    client_id : str
        Reported to the broker; shows up in its logs and quotas.
    security_protocol : {"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}
    sasl_mechanism : str, optional
        ``PLAIN``, ``SCRAM-SHA-256``, ``SCRAM-SHA-512`` (both clients), ...
        Required with the ``SASL_*`` protocols.
    sasl_username, sasl_password : str, optional
    ssl_cafile, ssl_certfile, ssl_keyfile : str, optional
        PEM files: CA bundle to verify the broker, client certificate and key
        for mutual TLS.
    ssl_check_hostname : bool
        Verify the broker's certificate matches its host name.
    extra : dict
        Client-specific settings in *that client's dialect* (dotted librdkafka
        keys for ``confluent``, snake_case for ``kafka-python``), applied last
        so they override this module's throughput defaults.
    probe_end_offsets : bool
        Make :meth:`Consumer.end_offsets` exact on brokers whose ListOffsets
        under-reports the log end (Tansu: it returns the last *batch's* base
        offset + 1) by reading the high watermark of a fetch of the last
        batch. Costs one extra fetch; safe to turn off on Apache Kafka.
    """

    bootstrap_servers: str = "localhost:9092"
    client_id: str = "sgm-stream"
    security_protocol: SecurityProtocol = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_check_hostname: bool = True
    extra: dict[str, Any] = field(default_factory=dict)
    probe_end_offsets: bool = True

    def __post_init__(self) -> None:
        if self.security_protocol not in _SECURITY_PROTOCOLS:
            raise ValueError(f"security_protocol must be one of {_SECURITY_PROTOCOLS}, got {self.security_protocol!r}")
        if self.security_protocol.startswith("SASL") and not self.sasl_mechanism:
            raise ValueError(f"security_protocol={self.security_protocol} needs sasl_mechanism")

    @classmethod
    def from_env(cls, prefix: str = "KAFKA_", environ: Mapping[str, str] | None = None, **overrides: Any) -> "KafkaConfig":
        """Build a config from ``{prefix}BOOTSTRAP_SERVERS``, ``{prefix}SASL_PASSWORD``, ...

        Every field except ``extra`` has a variable named after it in upper case;
        booleans accept ``1/0/true/false/yes/no``. ``overrides`` win over the environment.
        """
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name == "extra":
                continue
            raw = env.get(prefix + f.name.upper())
            if raw is None:
                continue
            if f.type in ("bool", bool):
                values[f.name] = raw.strip().lower() in ("1", "true", "yes", "on")
            else:
                values[f.name] = raw
        values.update(overrides)
        return cls(**values)


def _security_pairs(config: KafkaConfig, names: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for attr, key in names.items():
        value = getattr(config, attr)
        if value is not None:
            out[key] = value
    return out


def confluent_config(config: KafkaConfig) -> dict[str, Any]:
    """Map ``config`` to librdkafka keys (connection and security only, plus ``extra``)."""
    out = _security_pairs(
        config,
        {
            "bootstrap_servers": "bootstrap.servers",
            "client_id": "client.id",
            "security_protocol": "security.protocol",
            "sasl_mechanism": "sasl.mechanism",
            "sasl_username": "sasl.username",
            "sasl_password": "sasl.password",
            "ssl_cafile": "ssl.ca.location",
            "ssl_certfile": "ssl.certificate.location",
            "ssl_keyfile": "ssl.key.location",
        },
    )
    if config.security_protocol in ("SSL", "SASL_SSL"):
        out["ssl.endpoint.identification.algorithm"] = "https" if config.ssl_check_hostname else "none"
    out.update(config.extra)
    return out


def kafka_python_config(config: KafkaConfig) -> dict[str, Any]:
    """Map ``config`` to kafka-python keyword arguments (connection and security, plus ``extra``)."""
    out = _security_pairs(
        config,
        {
            "bootstrap_servers": "bootstrap_servers",
            "client_id": "client_id",
            "security_protocol": "security_protocol",
            "sasl_mechanism": "sasl_mechanism",
            "sasl_username": "sasl_plain_username",
            "sasl_password": "sasl_plain_password",
            "ssl_cafile": "ssl_cafile",
            "ssl_certfile": "ssl_certfile",
            "ssl_keyfile": "ssl_keyfile",
        },
    )
    out["bootstrap_servers"] = config.bootstrap_servers.split(",")
    if config.security_protocol in ("SSL", "SASL_SSL"):
        out["ssl_check_hostname"] = config.ssl_check_hostname
    out.update(config.extra)
    return out


# ---------------------------------------------------------------------------------
# The interface
# ---------------------------------------------------------------------------------

#: ``on_assign`` / ``on_revoke`` receive the partitions, sorted.
RebalanceCallback: TypeAlias = Callable[[list[TopicPartition]], None]


def _check_bytes(name: str, value: object) -> None:
    if value is not None and not isinstance(value, (bytes, bytearray, memoryview)):
        raise TypeError(f"{name} must be bytes or None, got {type(value).__name__}")


def _normalize_headers(headers: Sequence[tuple[str, bytes]] | Mapping[str, bytes] | None) -> list[tuple[str, bytes]] | None:
    if not headers:
        return None
    items = list(headers.items()) if isinstance(headers, Mapping) else list(headers)
    for name, value in items:
        if not isinstance(name, str):
            raise TypeError(f"header names must be str, got {type(name).__name__}")
        if not isinstance(value, (bytes, bytearray)):
            raise TypeError(f"header {name!r} value must be bytes, got {type(value).__name__}")
    return [(name, bytes(value)) for name, value in items]


def _record_headers(raw: Iterable[tuple[str, bytes | None]] | None) -> Headers:
    if not raw:
        return ()
    return tuple((name, value if value is not None else b"") for name, value in raw)


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
    """

    @abc.abstractmethod
    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: Sequence[tuple[str, bytes]] | Mapping[str, bytes] | None = None,
        partition: int | None = None,
    ) -> None:
        """Queue one record. Without ``partition``, a key picks the partition by
        murmur2 (Java-compatible, identical across the three implementations);
        no key spreads records over partitions."""

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

    @abc.abstractmethod
    def close(self) -> None:
        """Leave the group (``on_revoke`` runs first) and release the consumer."""


class Admin(_Closeable):
    """Topic administration."""

    @abc.abstractmethod
    def create_topics(self, topics: Sequence[NewTopic], exist_ok: bool = True, timeout: float = 30.0) -> None:
        """Create ``(name, partitions, replication_factor)`` topics and wait until
        their metadata is visible. An existing topic is an error unless ``exist_ok``
        (its partition count is not checked)."""

    @abc.abstractmethod
    def list_topics(self, timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[str, int]:
        """``{topic: number of partitions}`` for every non-internal topic."""


class Client(abc.ABC):
    """Factory for producers, consumers and admins of one kind and one config.

    Parameters
    ----------
    config : KafkaConfig
    """

    kind: ClassVar[ClientKind]

    def __init__(self, config: KafkaConfig) -> None:
        self.config = config

    @abc.abstractmethod
    def producer(self, **overrides: Any) -> Producer:
        """A new producer; ``overrides`` are client-dialect settings."""

    @abc.abstractmethod
    def consumer(
        self,
        group_id: str | None = None,
        *,
        auto_offset_reset: OffsetReset = "earliest",
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        **overrides: Any,
    ) -> Consumer:
        """A new consumer; ``group_id=None`` makes a group-less (manual-only) one.

        ``session_timeout_ms`` bounds how long a dead member keeps its
        partitions; on Tansu a group join also takes about half of it.
        ``overrides`` are client-dialect settings.
        """

    @abc.abstractmethod
    def admin(self) -> Admin:
        """A new admin client."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config.bootstrap_servers!r})"


def open_client(kind: ClientKind, config: KafkaConfig | None = None) -> Client:
    """Return the :class:`Client` implementation named ``kind`` for ``config``.

    Parameters
    ----------
    kind : {"confluent", "kafka-python", "memory"}
    config : KafkaConfig, optional
        Default: ``KafkaConfig()`` (``localhost:9092``), or ``memory://default``
        for ``kind="memory"``.
    """
    if kind == "confluent":
        return ConfluentClient(config or KafkaConfig())
    if kind == "kafka-python":
        return KafkaPythonClient(config or KafkaConfig())
    if kind == "memory":
        return MemoryClient(config or KafkaConfig(bootstrap_servers="memory://default"))
    raise ValueError(f"unknown client kind {kind!r}; expected 'confluent', 'kafka-python' or 'memory'")


# ---------------------------------------------------------------------------------
# Partitioning
# ---------------------------------------------------------------------------------


def _murmur2(data: bytes) -> int:
    # Kafka's murmur2 (seed 0x9747b28c), as in the Java client's Utils.murmur2.
    length = len(data)
    m = 0x5BD1E995
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    n4 = length // 4
    for i in range(n4):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    tail = length % 4
    base = n4 * 4
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h


def murmur2_partition(key: bytes, num_partitions: int) -> int:
    """The partition Kafka's default partitioner picks for ``key``."""
    return (_murmur2(bytes(key)) & 0x7FFFFFFF) % num_partitions


# ---------------------------------------------------------------------------------
# Throughput defaults, applied before KafkaConfig.extra and per-call overrides
# ---------------------------------------------------------------------------------

#: librdkafka producer: batch up to 10k records / 1 MB, wait up to 5 ms to fill a
#: batch, Java-compatible key hashing (librdkafka's own default is CRC32-based).
CONFLUENT_PRODUCER_DEFAULTS: dict[str, Any] = {
    "acks": "all",
    "linger.ms": 5,
    "batch.num.messages": 10000,
    "batch.size": 1_000_000,
    "queue.buffering.max.messages": 200_000,
    "queue.buffering.max.kbytes": 512 * 1024,
    "partitioner": "murmur2_random",
}
#: librdkafka consumer: auto-commit off, offsets stored only by explicit commit,
#: range assignment (same as kafka-python and the memory broker), a short
#: fetch wait so an idle poll returns promptly.
CONFLUENT_CONSUMER_DEFAULTS: dict[str, Any] = {
    "isolation.level": "read_committed",  # never learn or score what a transactional producer aborted
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "partition.assignment.strategy": "range",
    "fetch.wait.max.ms": 100,
    "allow.auto.create.topics": False,
}
#: kafka-python producer: 256 KB batches (default 16 KB), 5 ms linger.
#: (kafka-python 3 has no buffer_memory setting any more.)
KAFKA_PYTHON_PRODUCER_DEFAULTS: dict[str, Any] = {
    "acks": "all",
    "linger_ms": 5,
    "batch_size": 256 * 1024,
}
KAFKA_PYTHON_CONSUMER_DEFAULTS: dict[str, Any] = {
    "isolation_level": "read_committed",  # its default is read_uncommitted
    "enable_auto_commit": False,
    "fetch_max_wait_ms": 100,
    "allow_auto_create_topics": False,
}


def _sorted_tps(tps: Iterable[TopicPartition]) -> list[TopicPartition]:
    return sorted(tps)


def _heartbeat_ms(session_timeout_ms: int) -> int:
    # A sixth of the session timeout: members notice a rebalance within ~1 s at
    # the 6 s default, which is what bounds rebalance latency on Tansu.
    return max(100, session_timeout_ms // 6)


# ---------------------------------------------------------------------------------
# confluent-kafka
# ---------------------------------------------------------------------------------


def _ck():  # noqa: ANN202 - imported lazily so the memory transport needs neither client
    import confluent_kafka

    return confluent_kafka


def _ck_error_code(exc: BaseException) -> int | None:
    if exc.args and hasattr(exc.args[0], "code"):
        return int(exc.args[0].code())
    return None


def _ck_error_cb(err: Any) -> None:
    # Connection-level trouble (broker down, auth failure). librdkafka retries by
    # itself; the outcome surfaces as a delivery/commit/poll error.
    _librdkafka_log.warning("librdkafka: %s", err)


class ConfluentClient(Client):
    """:class:`Client` on confluent-kafka (librdkafka)."""

    kind = "confluent"

    def _base(self) -> dict[str, Any]:
        conf = confluent_config(dataclasses.replace(self.config, extra={}))
        conf["logger"] = _librdkafka_log
        conf["error_cb"] = _ck_error_cb
        return conf

    def producer(self, **overrides: Any) -> Producer:
        conf = {**self._base(), **CONFLUENT_PRODUCER_DEFAULTS, **self.config.extra, **overrides}
        return _ConfluentProducer(conf)

    def consumer(
        self,
        group_id: str | None = None,
        *,
        auto_offset_reset: OffsetReset = "earliest",
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        **overrides: Any,
    ) -> Consumer:
        conf = {
            **self._base(),
            **CONFLUENT_CONSUMER_DEFAULTS,
            "auto.offset.reset": auto_offset_reset,
            "session.timeout.ms": session_timeout_ms,
            "heartbeat.interval.ms": _heartbeat_ms(session_timeout_ms),
            **self.config.extra,
            **overrides,
        }
        return _ConfluentConsumer(conf, group_id, self.config.probe_end_offsets)

    def admin(self) -> Admin:
        conf = {**self._base(), **self.config.extra}
        return _ConfluentAdmin(conf)


class _ConfluentProducer(Producer):
    def __init__(self, conf: dict[str, Any]) -> None:
        ck = _ck()
        self._producer = ck.Producer(conf)
        self._failures: list[DeliveryFailure] = []
        self._closed = False
        self._max_block = float(conf.get("message.timeout.ms", 300_000)) / 1000.0

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self._failures.append(DeliveryFailure(msg.topic(), msg.partition(), msg.key(), msg.value(), str(err)))

    def send(self, topic, value, key=None, headers=None, partition=None) -> None:  # noqa: ANN001 - see Producer.send
        if self._closed:
            raise RuntimeError("producer is closed")
        _check_bytes("value", value)
        _check_bytes("key", key)
        kwargs: dict[str, Any] = {"on_delivery": self._on_delivery}
        if key is not None:
            kwargs["key"] = key
        if partition is not None:
            kwargs["partition"] = partition
        hdrs = _normalize_headers(headers)
        if hdrs:
            kwargs["headers"] = hdrs
        deadline = None
        while True:
            try:
                self._producer.produce(topic, value, **kwargs)
                break
            except BufferError:
                # Local queue full: serving delivery reports drains it (backpressure).
                deadline = deadline or time.monotonic() + self._max_block
                if time.monotonic() > deadline:
                    self._failures.append(DeliveryFailure(topic, partition, key, value, "local queue full"))
                    return
                self._producer.poll(0.05)
            except _ck().KafkaException as exc:
                self._failures.append(DeliveryFailure(topic, partition, key, value, str(exc)))
                return
        self._producer.poll(0)

    def flush(self, timeout: float = 30.0) -> None:
        remaining = self._producer.flush(timeout)
        failures, self._failures = self._failures, []
        if failures or remaining:
            raise DeliveryError(failures, remaining)

    def close(self, timeout: float = 30.0) -> None:
        if self._closed:
            return
        try:
            self.flush(timeout)
        finally:
            self._closed = True


class _ConfluentConsumer(Consumer):
    def __init__(self, conf: dict[str, Any], group_id: str | None, probe_end_offsets: bool) -> None:
        ck = _ck()
        self.group_id = group_id
        self._conf = conf
        # librdkafka insists on a group.id even for manual assignment; a
        # group-less consumer gets a private one and never commits to it.
        conf = {**conf, "group.id": group_id or f"{conf.get('client.id', 'sgm')}.nogroup.{uuid.uuid4().hex}"}
        self._consumer = ck.Consumer(conf)
        self._mode: Literal["none", "subscribed", "assigned"] = "none"
        self._on_assign: RebalanceCallback | None = None
        self._on_revoke: RebalanceCallback | None = None
        self._in_assign_callback = False
        self._pending_seeks: dict[TopicPartition, int] = {}
        self._probe_end_offsets = probe_end_offsets
        self._probe: Any = None
        self._closed = False

    # -- group management --------------------------------------------------------

    def subscribe(self, topics, on_assign=None, on_revoke=None) -> None:  # noqa: ANN001
        if self.group_id is None:
            raise ValueError("subscribe() needs a consumer with a group_id")
        if self._mode == "assigned":
            raise ValueError("consumer already has a manual assignment")
        self._on_assign, self._on_revoke = on_assign, on_revoke
        self._consumer.subscribe(list(topics), on_assign=self._handle_assign, on_revoke=self._handle_revoke, on_lost=self._handle_revoke)
        self._mode = "subscribed"

    def _handle_assign(self, consumer: Any, partitions: list[Any]) -> None:
        self._pending_seeks = {}
        self._in_assign_callback = True
        try:
            if self._on_assign is not None:
                self._on_assign(_sorted_tps(TopicPartition(p.topic, p.partition) for p in partitions))
        finally:
            self._in_assign_callback = False
            # Seeks made in the callback become the partitions' start offsets:
            # the fetchers do not exist yet, so seek() itself would fail.
            for p in partitions:
                offset = self._pending_seeks.get(TopicPartition(p.topic, p.partition))
                if offset is not None:
                    p.offset = offset
            consumer.assign(partitions)

    def _handle_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        if partitions and self._on_revoke is not None:
            self._on_revoke(_sorted_tps(TopicPartition(p.topic, p.partition) for p in partitions))

    def assign(self, partitions) -> None:  # noqa: ANN001
        if self._mode == "subscribed":
            raise ValueError("consumer is subscribed to a group; cannot also assign manually")
        ck = _ck()
        self._consumer.assign([ck.TopicPartition(tp.topic, tp.partition) for tp in partitions])
        self._mode = "assigned"

    def seek(self, tp: TopicPartition, offset: int) -> None:
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        if self._in_assign_callback:
            self._pending_seeks[tp] = offset
            return
        if tp not in self.assignment():
            raise ValueError(f"{tp} is not assigned to this consumer")
        ck = _ck()
        deadline = time.monotonic() + 5.0
        while True:
            try:
                self._consumer.seek(ck.TopicPartition(tp.topic, tp.partition, offset))
                return
            except ck.KafkaException as exc:
                # _STATE: the partition's fetcher is still starting (right after
                # assign); it is ready within milliseconds.
                if _ck_error_code(exc) == ck.KafkaError._STATE and time.monotonic() < deadline:
                    time.sleep(0.005)
                    continue
                raise KafkaTransportError(f"seek {tp} to {offset}: {exc}") from exc

    # -- reading -------------------------------------------------------------------

    def poll(self, max_records: int = 500, timeout: float = 1.0) -> list[Record]:
        ck = _ck()
        # consume(n, timeout) waits until n messages arrived or the timeout passed, which
        # adds the whole timeout to the latency of a small batch. Wait for the first
        # message only, then take what is already buffered without waiting.
        first = self._consumer.poll(timeout)
        if first is None:
            return []
        messages = [first]
        if max_records > 1:
            messages.extend(self._consumer.consume(num_messages=max_records - 1, timeout=0))
        records: list[Record] = []
        not_available = ck.TIMESTAMP_NOT_AVAILABLE
        for m in messages:
            err = m.error()
            if err is not None:
                if err.code() == ck.KafkaError._PARTITION_EOF:
                    continue
                if err.fatal():
                    raise KafkaTransportError(f"fatal consumer error: {err}")
                log.warning("consumer error (client retries): %s", err)
                continue
            ts_type, ts = m.timestamp()
            records.append(
                Record(
                    m.topic(),
                    m.partition(),
                    m.offset(),
                    m.key(),
                    m.value(),
                    None if ts_type == not_available else ts,
                    _record_headers(m.headers()),
                )
            )
        return records

    # -- offsets ---------------------------------------------------------------------

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        if not offsets:
            return
        if self.group_id is None:
            raise KafkaTransportError("commit() needs a consumer with a group_id")
        ck = _ck()
        for tp, off in offsets.items():
            if off < 0:
                raise ValueError(f"offset for {tp} must be >= 0, got {off}")
        try:
            result = self._consumer.commit(
                offsets=[ck.TopicPartition(tp.topic, tp.partition, off) for tp, off in offsets.items()],
                asynchronous=False,
            )
        except ck.KafkaException as exc:
            code = _ck_error_code(exc)
            if code in _ck_rebalance_codes():
                raise CommitFailedError(str(exc)) from exc
            raise KafkaTransportError(f"commit failed: {exc}") from exc
        failed = [p for p in (result or []) if p.error is not None]
        if failed:
            raise CommitFailedError("; ".join(f"{p.topic}[{p.partition}]: {p.error}" for p in failed))

    def committed(self, tps, timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[TopicPartition, int | None]:  # noqa: ANN001
        tps = list(tps)
        if self.group_id is None or not tps:
            return {tp: None for tp in tps}
        ck = _ck()
        try:
            result = self._consumer.committed([ck.TopicPartition(tp.topic, tp.partition) for tp in tps], timeout=timeout)
        except ck.KafkaException as exc:
            raise KafkaTransportError(f"committed(): {exc}") from exc
        return {TopicPartition(p.topic, p.partition): (p.offset if p.offset >= 0 else None) for p in result}

    def assignment(self) -> set[TopicPartition]:
        return {TopicPartition(p.topic, p.partition) for p in self._consumer.assignment()}

    def end_offsets(self, tps, timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[TopicPartition, int]:  # noqa: ANN001
        ck = _ck()
        ends: dict[TopicPartition, int] = {}
        for tp in tps:
            try:
                _low, high = self._consumer.get_watermark_offsets(ck.TopicPartition(tp.topic, tp.partition), timeout=timeout, cached=False)
            except ck.KafkaException as exc:
                raise KafkaTransportError(f"end offset of {tp}: {exc}") from exc
            ends[tp] = int(high)
        if self._probe_end_offsets:
            self._correct_ends_by_fetch(ends, timeout)
        return ends

    def beginning_offsets(self, tps, timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[TopicPartition, int]:  # noqa: ANN001
        ck = _ck()
        starts: dict[TopicPartition, int] = {}
        for tp in tps:
            try:
                low, _high = self._consumer.get_watermark_offsets(ck.TopicPartition(tp.topic, tp.partition),
                                                                  timeout=timeout, cached=False)
            except ck.KafkaException as exc:
                raise KafkaTransportError(f"log start offset of {tp}: {exc}") from exc
            starts[tp] = int(low)
        return starts

    def _correct_ends_by_fetch(self, ends: dict[TopicPartition, int], timeout: float) -> None:
        # Fetch from (reported end - 1) and read the fetch response's high
        # watermark, which Tansu computes correctly (its ListOffsets does not).
        ck = _ck()
        targets = [tp for tp, end in ends.items() if end > 0]
        if not targets:
            return
        if self._probe is None:
            self._probe = ck.Consumer(
                {
                    **{k: v for k, v in self._conf.items() if k not in ("group.id",)},
                    "group.id": f"sgm.endprobe.{uuid.uuid4().hex}",
                    "enable.partition.eof": True,
                    "fetch.wait.max.ms": 10,
                    "queued.min.messages": 1,
                    # librdkafka otherwise waits up to 1 s before fetching a freshly
                    # assigned partition, and this runs inside the service loop
                    "fetch.queue.backoff.ms": 0,
                    "fetch.error.backoff.ms": 10,
                }
            )
        probe = self._probe
        probe.assign([ck.TopicPartition(tp.topic, tp.partition, ends[tp] - 1) for tp in targets])
        try:
            pending = set(targets)
            deadline = time.monotonic() + timeout
            while pending and time.monotonic() < deadline:
                # poll returns at the first event (consume(n) would wait for n or the timeout)
                m = probe.poll(max(0.0, min(0.05, deadline - time.monotonic())))
                if m is not None and (m.error() is None or m.error().code() == ck.KafkaError._PARTITION_EOF):
                    pending.discard(TopicPartition(m.topic(), m.partition()))
            for tp in targets:
                _low, high = probe.get_watermark_offsets(ck.TopicPartition(tp.topic, tp.partition), cached=True)
                if high > ends[tp]:
                    ends[tp] = int(high)
        finally:
            probe.unassign()

    def partitions_for(self, topic: str) -> list[int]:
        ck = _ck()
        try:
            metadata = self._consumer.list_topics(topic, timeout=DEFAULT_REQUEST_TIMEOUT)
        except ck.KafkaException as exc:
            raise KafkaTransportError(f"metadata for {topic!r}: {exc}") from exc
        t = metadata.topics.get(topic)
        if t is None or t.error is not None:
            return []
        return sorted(t.partitions)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._consumer.close()  # runs on_revoke for a group member
        finally:
            if self._probe is not None:
                self._probe.close()


def _ck_rebalance_codes() -> set[int]:
    err = _ck().KafkaError
    return {
        err.ILLEGAL_GENERATION,
        err.UNKNOWN_MEMBER_ID,
        err.REBALANCE_IN_PROGRESS,
        err.FENCED_INSTANCE_ID,
        err._ASSIGNMENT_LOST,
    }


class _ConfluentAdmin(Admin):
    def __init__(self, conf: dict[str, Any]) -> None:
        from confluent_kafka.admin import AdminClient

        self._admin = AdminClient(conf)

    def create_topics(self, topics, exist_ok: bool = True, timeout: float = 30.0) -> None:  # noqa: ANN001
        ck = _ck()
        from confluent_kafka.admin import NewTopic as CkNewTopic

        topics = list(topics)
        if not topics:
            return
        futures = self._admin.create_topics(
            [CkNewTopic(name, num_partitions=parts, replication_factor=repl) for name, parts, repl in topics],
            operation_timeout=timeout,
            request_timeout=timeout,
        )
        for name, future in futures.items():
            try:
                future.result(timeout)
            except ck.KafkaException as exc:
                if exist_ok and _ck_error_code(exc) == ck.KafkaError.TOPIC_ALREADY_EXISTS:
                    continue
                raise KafkaTransportError(f"create topic {name!r}: {exc}") from exc
        _wait_for_topics(self, [name for name, _, _ in topics], timeout)

    def list_topics(self, timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[str, int]:
        ck = _ck()
        try:
            metadata = self._admin.list_topics(timeout=timeout)
        except ck.KafkaException as exc:
            raise KafkaTransportError(f"list topics: {exc}") from exc
        return {
            name: len(t.partitions)
            for name, t in sorted(metadata.topics.items())
            if t.error is None and not name.startswith("__")
        }

    def close(self) -> None:
        pass  # AdminClient has no close(); its threads end when it is collected


def _wait_for_topics(admin: Admin, names: Sequence[str], timeout: float) -> None:
    # CreateTopics returning is not the same as every client seeing the topic.
    deadline = time.monotonic() + timeout
    while True:
        visible = admin.list_topics()
        missing = [n for n in names if n not in visible]
        if not missing:
            return
        if time.monotonic() > deadline:
            raise KafkaTransportError(f"topics not visible after {timeout}s: {missing}")
        time.sleep(0.05)


# ---------------------------------------------------------------------------------
# kafka-python
# ---------------------------------------------------------------------------------


def _kafka_python_role_config(role_defaults: Mapping[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    # kafka-python rejects keys a role does not know; shared extras (e.g. a
    # consumer-only key in KafkaConfig.extra) are dropped for the other roles.
    known = {k: v for k, v in config.items() if k in role_defaults}
    dropped = set(config) - set(known)
    if dropped:
        log.debug("kafka-python: ignoring settings not valid for this role: %s", sorted(dropped))
    return known


class KafkaPythonClient(Client):
    """:class:`Client` on kafka-python."""

    kind = "kafka-python"

    def producer(self, **overrides: Any) -> Producer:
        from kafka import KafkaProducer

        conf = {**kafka_python_config(dataclasses.replace(self.config, extra={})), **KAFKA_PYTHON_PRODUCER_DEFAULTS}
        conf.update(_kafka_python_role_config(KafkaProducer.DEFAULT_CONFIG, self.config.extra))
        conf.update(overrides)
        return _KafkaPythonProducer(conf)

    def consumer(
        self,
        group_id: str | None = None,
        *,
        auto_offset_reset: OffsetReset = "earliest",
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        **overrides: Any,
    ) -> Consumer:
        from kafka import KafkaConsumer
        from kafka.coordinator.assignors.range import RangePartitionAssignor

        conf = {
            **kafka_python_config(dataclasses.replace(self.config, extra={})),
            **KAFKA_PYTHON_CONSUMER_DEFAULTS,
            "group_id": group_id,
            "auto_offset_reset": auto_offset_reset,
            "session_timeout_ms": session_timeout_ms,
            "heartbeat_interval_ms": _heartbeat_ms(session_timeout_ms),
            "partition_assignment_strategy": (RangePartitionAssignor,),
        }
        conf.update(_kafka_python_role_config(KafkaConsumer.DEFAULT_CONFIG, self.config.extra))
        conf.update(overrides)
        return _KafkaPythonConsumer(conf, self.config.probe_end_offsets)

    def admin(self) -> Admin:
        from kafka.admin import KafkaAdminClient

        conf = kafka_python_config(dataclasses.replace(self.config, extra={}))
        conf.update(_kafka_python_role_config(KafkaAdminClient.DEFAULT_CONFIG, self.config.extra))
        return _KafkaPythonAdmin(conf)


class _KafkaPythonProducer(Producer):
    def __init__(self, conf: dict[str, Any]) -> None:
        from kafka import KafkaProducer

        self._producer = KafkaProducer(**conf)
        self._failures: list[DeliveryFailure] = []
        self._lock = threading.Lock()
        self._closed = False

    def _on_error(self, topic: str, partition: int | None, key: bytes | None, value: bytes | None, exc: BaseException) -> None:
        # Runs on kafka-python's sender thread.
        with self._lock:
            self._failures.append(DeliveryFailure(topic, partition, key, value, repr(exc)))

    def send(self, topic, value, key=None, headers=None, partition=None) -> None:  # noqa: ANN001
        import kafka.errors

        if self._closed:
            raise RuntimeError("producer is closed")
        _check_bytes("value", value)
        _check_bytes("key", key)
        try:
            future = self._producer.send(topic, value=value, key=key, headers=_normalize_headers(headers), partition=partition)
        except (ValueError, AssertionError, kafka.errors.KafkaError) as exc:
            # kafka-python reports some failures synchronously (unknown partition,
            # metadata timeout); collect them like asynchronous ones.
            self._on_error(topic, partition, key, value, exc)
            return
        future.add_errback(self._on_error, topic, partition, key, value)

    def flush(self, timeout: float = 30.0) -> None:
        import kafka.errors

        undelivered: int | None = 0
        try:
            self._producer.flush(timeout)
        except kafka.errors.KafkaTimeoutError:
            undelivered = None
        with self._lock:
            failures, self._failures = self._failures, []
        if failures or undelivered != 0:
            raise DeliveryError(failures, undelivered)

    def close(self, timeout: float = 30.0) -> None:
        if self._closed:
            return
        try:
            self.flush(timeout)
        finally:
            self._closed = True
            self._producer.close(timeout)


def _kafka_python_listener(owner: "_KafkaPythonConsumer") -> Any:
    """A kafka-python rebalance listener forwarding to ``owner``'s callbacks.

    kafka-python swallows (2.x) or wraps (3.x) listener exceptions; the owner
    keeps the first one and re-raises it from poll(), as confluent-kafka does.

    kafka-python 3 runs listeners on its IO thread, where a blocking call such
    as a synchronous commit raises RuntimeError. So with 3.x the listener is
    async: commit() calls made inside the callback are collected and awaited
    right after it returns -- still before the rebalance goes on, so the next
    owner of the partition resumes from them.
    """
    import kafka

    def revoked_tps(revoked: Iterable[Any]) -> list[TopicPartition]:
        return _sorted_tps(TopicPartition(p.topic, p.partition) for p in revoked)

    async_base = getattr(kafka, "AsyncConsumerRebalanceListener", None)
    if async_base is None:  # kafka-python 2.x: listeners run on the polling thread

        class _SyncListener(kafka.ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked: Iterable[Any]) -> None:
                tps = revoked_tps(revoked)
                if tps and owner._on_revoke is not None:  # an empty revoke precedes the first join
                    owner._run_callback(owner._on_revoke, tps)

            def on_partitions_assigned(self, assigned: Iterable[Any]) -> None:
                if owner._on_assign is not None:
                    owner._run_callback(owner._on_assign, revoked_tps(assigned))

        return _SyncListener()

    class _AsyncListener(async_base):  # type: ignore[misc, valid-type]
        async def on_partitions_revoked(self, revoked: Iterable[Any]) -> None:
            tps = revoked_tps(revoked)
            if not tps or owner._on_revoke is None:
                return
            owner._deferred_commits = {}
            try:
                owner._run_callback(owner._on_revoke, tps)
            finally:
                offsets, owner._deferred_commits = owner._deferred_commits, None
            if offsets:
                await owner._commit_from_io_thread(offsets)

        async def on_partitions_assigned(self, assigned: Iterable[Any]) -> None:
            if owner._on_assign is not None:
                owner._run_callback(owner._on_assign, revoked_tps(assigned))

    return _AsyncListener()


class _KafkaPythonConsumer(Consumer):
    def __init__(self, conf: dict[str, Any], probe_end_offsets: bool) -> None:
        from kafka import KafkaConsumer

        self.group_id = conf.get("group_id")
        self._conf = conf
        self._consumer = KafkaConsumer(**conf)
        self._mode: Literal["none", "subscribed", "assigned"] = "none"
        self._on_assign: RebalanceCallback | None = None
        self._on_revoke: RebalanceCallback | None = None
        self._callback_error: BaseException | None = None
        # Not None while an on_revoke callback runs on kafka-python 3's IO thread.
        self._deferred_commits: dict[TopicPartition, int] | None = None
        self._probe_end_offsets = probe_end_offsets
        self._probe: Any = None
        self._closed = False

    def _run_callback(self, callback: RebalanceCallback, tps: list[TopicPartition]) -> None:
        try:
            callback(tps)
        except BaseException as exc:  # noqa: BLE001 - re-raised from poll()
            if self._callback_error is None:
                self._callback_error = exc

    def _raise_callback_error(self) -> None:
        exc, self._callback_error = self._callback_error, None
        if exc is not None:
            raise exc

    @staticmethod
    def _ktp(tp: TopicPartition) -> Any:
        from kafka import TopicPartition as KTopicPartition

        return KTopicPartition(tp.topic, tp.partition)

    def subscribe(self, topics, on_assign=None, on_revoke=None) -> None:  # noqa: ANN001
        if self.group_id is None:
            raise ValueError("subscribe() needs a consumer with a group_id")
        if self._mode == "assigned":
            raise ValueError("consumer already has a manual assignment")
        self._on_assign, self._on_revoke = on_assign, on_revoke
        self._consumer.subscribe(topics=list(topics), listener=_kafka_python_listener(self))
        self._mode = "subscribed"

    def assign(self, partitions) -> None:  # noqa: ANN001
        if self._mode == "subscribed":
            raise ValueError("consumer is subscribed to a group; cannot also assign manually")
        self._consumer.assign([self._ktp(tp) for tp in partitions])
        self._mode = "assigned"

    def seek(self, tp: TopicPartition, offset: int) -> None:
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        if tp not in self.assignment():
            raise ValueError(f"{tp} is not assigned to this consumer")
        self._consumer.seek(self._ktp(tp), offset)

    def poll(self, max_records: int = 500, timeout: float = 1.0) -> list[Record]:
        import kafka.errors

        try:
            batches = self._consumer.poll(timeout_ms=int(timeout * 1000), max_records=max_records)
        except kafka.errors.KafkaError as exc:
            raise KafkaTransportError(f"poll: {exc!r}") from exc
        records = [
            Record(
                r.topic,
                r.partition,
                r.offset,
                r.key,
                r.value,
                r.timestamp if r.timestamp is not None and r.timestamp >= 0 else None,
                _record_headers(r.headers),
            )
            for batch in batches.values()
            for r in batch
        ]
        if self._callback_error is not None:
            # Do not drop what the fetch returned: rewind so the records come
            # again on the next poll (at-least-once), then raise.
            first: dict[TopicPartition, int] = {}
            for r in records:
                first.setdefault(r.tp, r.offset)
            for tp, off in first.items():
                self._consumer.seek(self._ktp(tp), off)
            self._raise_callback_error()
        return records

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        import kafka.errors
        from kafka.structs import OffsetAndMetadata

        if not offsets:
            return
        if self.group_id is None:
            raise KafkaTransportError("commit() needs a consumer with a group_id")
        for tp, off in offsets.items():
            if off < 0:
                raise ValueError(f"offset for {tp} must be >= 0, got {off}")
        if self._deferred_commits is not None:
            self._deferred_commits.update(offsets)  # sent when the callback returns
            return
        try:
            self._consumer.commit({self._ktp(tp): OffsetAndMetadata(off, "", -1) for tp, off in offsets.items()})
        except (kafka.errors.CommitFailedError, kafka.errors.IllegalGenerationError, kafka.errors.UnknownMemberIdError,
                kafka.errors.RebalanceInProgressError) as exc:
            raise CommitFailedError(str(exc)) from exc
        except kafka.errors.KafkaError as exc:
            raise KafkaTransportError(f"commit failed: {exc!r}") from exc

    async def _commit_from_io_thread(self, offsets: Mapping[TopicPartition, int]) -> None:
        from kafka.structs import OffsetAndMetadata

        coordinator = self._consumer._coordinator  # kafka-python 3 internals: the awaitable commit
        try:
            await coordinator._commit_offsets_sync_async(
                {self._ktp(tp): OffsetAndMetadata(off, "", -1) for tp, off in offsets.items()}
            )
        except Exception as exc:  # noqa: BLE001 - the records will simply be redelivered
            log.warning("commit from on_revoke failed, the next owner will re-read from the previous commit: %r", exc)

    def committed(self, tps, timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[TopicPartition, int | None]:  # noqa: ANN001
        import kafka.errors

        tps = list(tps)
        if self.group_id is None:
            return {tp: None for tp in tps}
        out: dict[TopicPartition, int | None] = {}
        try:
            for tp in tps:
                off = self._consumer.committed(self._ktp(tp), timeout_ms=int(timeout * 1000))
                out[tp] = off if off is not None and off >= 0 else None
        except kafka.errors.KafkaError as exc:
            raise KafkaTransportError(f"committed(): {exc!r}") from exc
        return out

    def assignment(self) -> set[TopicPartition]:
        return {TopicPartition(p.topic, p.partition) for p in self._consumer.assignment()}

    def beginning_offsets(self, tps, timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[TopicPartition, int]:  # noqa: ANN001
        import kafka.errors

        try:
            raw = self._consumer.beginning_offsets([self._ktp(tp) for tp in tps], timeout_ms=int(timeout * 1000))
        except kafka.errors.KafkaError as exc:
            raise KafkaTransportError(f"log start offsets: {exc!r}") from exc
        return {TopicPartition(p.topic, p.partition): int(off) for p, off in raw.items()}

    def end_offsets(self, tps, timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[TopicPartition, int]:  # noqa: ANN001
        import kafka.errors

        tps = list(tps)
        for tp in tps:
            # kafka-python would wait out the whole timeout for an unknown partition.
            if tp.partition not in (self._consumer.partitions_for_topic(tp.topic) or ()):
                raise KafkaTransportError(f"unknown partition {tp}")
        try:
            raw = self._consumer.end_offsets([self._ktp(tp) for tp in tps], timeout_ms=int(timeout * 1000))
        except kafka.errors.KafkaError as exc:
            raise KafkaTransportError(f"end offsets: {exc!r}") from exc
        ends = {TopicPartition(p.topic, p.partition): int(off) for p, off in raw.items()}
        if self._probe_end_offsets:
            self._correct_ends_by_fetch(ends, timeout)
        return ends

    def _correct_ends_by_fetch(self, ends: dict[TopicPartition, int], timeout: float) -> None:
        # See _ConfluentConsumer._correct_ends_by_fetch.
        from kafka import KafkaConsumer

        targets = [tp for tp, end in ends.items() if end > 0]
        if not targets:
            return
        if self._probe is None:
            conf = {k: v for k, v in self._conf.items() if k not in ("group_id", "partition_assignment_strategy")}
            self._probe = KafkaConsumer(**{**conf, "group_id": None, "fetch_max_wait_ms": 10})
        probe = self._probe
        probe.assign([self._ktp(tp) for tp in targets])
        for tp in targets:
            probe.seek(self._ktp(tp), ends[tp] - 1)
        pending = set(targets)
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            probe.poll(timeout_ms=50)
            pending = {tp for tp in pending if probe.highwater(self._ktp(tp)) is None}
        for tp in targets:
            high = probe.highwater(self._ktp(tp))
            if high is not None and high > ends[tp]:
                ends[tp] = int(high)
        probe.assign([])

    def partitions_for(self, topic: str) -> list[int]:
        parts = self._consumer.partitions_for_topic(topic)
        return sorted(parts) if parts else []

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._consumer.close(autocommit=False)  # runs on_revoke for a group member
        finally:
            if self._probe is not None:
                self._probe.close(autocommit=False)
        self._raise_callback_error()


class _KafkaPythonAdmin(Admin):
    def __init__(self, conf: dict[str, Any]) -> None:
        from kafka.admin import KafkaAdminClient

        self._admin = KafkaAdminClient(**conf)

    def create_topics(self, topics, exist_ok: bool = True, timeout: float = 30.0) -> None:  # noqa: ANN001
        import kafka.errors
        from kafka.admin import NewTopic as KNewTopic

        topics = list(topics)
        for name, parts, repl in topics:
            try:
                self._admin.create_topics([KNewTopic(name, parts, repl)], timeout_ms=int(timeout * 1000))
            except kafka.errors.TopicAlreadyExistsError:
                if not exist_ok:
                    raise KafkaTransportError(f"topic {name!r} already exists") from None
            except kafka.errors.KafkaError as exc:
                raise KafkaTransportError(f"create topic {name!r}: {exc!r}") from exc
        _wait_for_topics(self, [name for name, _, _ in topics], timeout)

    def list_topics(self, timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[str, int]:
        import kafka.errors

        try:
            described = self._admin.describe_topics()
        except kafka.errors.KafkaError as exc:
            raise KafkaTransportError(f"list topics: {exc!r}") from exc
        out: dict[str, int] = {}
        for t in described:
            name = t.get("name", t.get("topic"))  # "topic" in kafka-python 2.x
            if t.get("error_code", 0) == 0 and name and not name.startswith("__"):
                out[name] = len(t["partitions"])
        return dict(sorted(out.items()))

    def close(self) -> None:
        self._admin.close()


# ---------------------------------------------------------------------------------
# In-process broker
# ---------------------------------------------------------------------------------


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
            self._changed.notify_all()
            return True

    def topics(self) -> dict[str, int]:
        with self._lock:
            return {name: len(parts) for name, parts in sorted(self._logs.items())}

    def partitions(self, topic: str) -> int:
        with self._lock:
            return len(self._logs.get(topic, ()))

    def append(self, topic: str, partition: int, key: bytes | None, value: bytes | None, headers: Headers) -> Record:
        with self._lock:
            if topic not in self._logs:
                if not self.auto_create_topics:
                    raise KafkaTransportError(f"unknown topic {topic!r}")
                self._logs[topic] = [[] for _ in range(self.default_partitions)]
            parts = self._logs[topic]
            if not 0 <= partition < len(parts):
                raise KafkaTransportError(f"unknown partition {topic}[{partition}]")
            log_ = parts[partition]
            record = Record(topic, partition, len(log_), key, value, int(time.time() * 1000), headers)
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
    """:class:`Client` on a :class:`MemoryBroker` named by ``config.bootstrap_servers``."""

    kind = "memory"

    def __init__(self, config: KafkaConfig, broker: MemoryBroker | None = None) -> None:
        super().__init__(config)
        self.broker = broker or MemoryBroker.named(config.bootstrap_servers)

    def producer(self, **overrides: Any) -> Producer:
        return _MemoryProducer(self.broker)

    def consumer(
        self,
        group_id: str | None = None,
        *,
        auto_offset_reset: OffsetReset = "earliest",
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        **overrides: Any,
    ) -> Consumer:
        if auto_offset_reset not in ("earliest", "latest"):
            raise ValueError(f"auto_offset_reset must be 'earliest' or 'latest', got {auto_offset_reset!r}")
        return _MemoryConsumer(self.broker, group_id, auto_offset_reset, session_timeout_ms, self.config.client_id)

    def admin(self) -> Admin:
        return _MemoryAdmin(self.broker)


class _MemoryProducer(Producer):
    def __init__(self, broker: MemoryBroker) -> None:
        self._broker = broker
        self._failures: list[DeliveryFailure] = []
        self._round_robin: dict[str, itertools.count] = {}
        self._closed = False

    def send(self, topic, value, key=None, headers=None, partition=None) -> None:  # noqa: ANN001
        if self._closed:
            raise RuntimeError("producer is closed")
        _check_bytes("value", value)
        _check_bytes("key", key)
        hdrs = tuple(_normalize_headers(headers) or ())
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
            self._broker.append(topic, partition, key, value, hdrs)
        except KafkaTransportError as exc:
            self._failures.append(DeliveryFailure(topic, partition, key, value, str(exc)))

    def flush(self, timeout: float = 30.0) -> None:
        failures, self._failures = self._failures, []
        if failures:
            raise DeliveryError(failures)

    def close(self, timeout: float = 30.0) -> None:
        if self._closed:
            return
        try:
            self.flush(timeout)
        finally:
            self._closed = True


class _MemoryConsumer(Consumer):
    def __init__(self, broker: MemoryBroker, group_id: str | None, reset: OffsetReset, session_timeout_ms: int, client_id: str) -> None:
        self._broker = broker
        self.group_id = group_id
        self._reset = reset
        self._session_timeout = session_timeout_ms / 1000.0
        self._member_id = f"{client_id}-{uuid.uuid4()}"
        self._mode: Literal["none", "subscribed", "assigned"] = "none"
        self._subscription: list[str] = []
        self._on_assign: RebalanceCallback | None = None
        self._on_revoke: RebalanceCallback | None = None
        self._generation = -1
        self._assigned: list[TopicPartition] = []
        self._positions: dict[TopicPartition, int] = {}
        self._next_partition = 0
        self._last_poll = time.monotonic()
        self._closed = False

    def _starting_offset(self, tp: TopicPartition) -> int:
        if self.group_id is not None:
            committed = self._broker.committed(self.group_id, tp)
            if committed is not None:
                return committed
        return 0 if self._reset == "earliest" else self._broker.end_offset(tp)

    def subscribe(self, topics, on_assign=None, on_revoke=None) -> None:  # noqa: ANN001
        if self.group_id is None:
            raise ValueError("subscribe() needs a consumer with a group_id")
        if self._mode == "assigned":
            raise ValueError("consumer already has a manual assignment")
        self._on_assign, self._on_revoke = on_assign, on_revoke
        b = self._broker
        with b._lock:
            self._subscription = sorted(set(topics))
            group = b._group(self.group_id)
            group.members[self._member_id] = self
            self._last_poll = time.monotonic()
            b._begin_rebalance(group)
        self._mode = "subscribed"

    def assign(self, partitions) -> None:  # noqa: ANN001
        if self._mode == "subscribed":
            raise ValueError("consumer is subscribed to a group; cannot also assign manually")
        partitions = list(dict.fromkeys(partitions))
        for tp in partitions:
            self._broker.end_offset(tp)  # raises for an unknown partition
        self._assigned = partitions
        self._positions = {tp: self._starting_offset(tp) for tp in partitions}
        self._mode = "assigned"

    def seek(self, tp: TopicPartition, offset: int) -> None:
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
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
                revoked = _sorted_tps(self._assigned)
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
                    assigned = _sorted_tps(self._assigned)
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

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        if not offsets:
            return
        if self.group_id is None:
            raise KafkaTransportError("commit() needs a consumer with a group_id")
        for tp, off in offsets.items():
            if off < 0:
                raise ValueError(f"offset for {tp} must be >= 0, got {off}")
        b = self._broker
        with b._lock:
            if self._mode == "subscribed":
                group = b._group(self.group_id)
                if self._member_id not in group.members or self._generation != group.generation:
                    raise CommitFailedError(
                        f"member {self._member_id} has generation {self._generation}, group {self.group_id!r} is at {group.generation}"
                    )
            b._commits.setdefault(self.group_id, {}).update(offsets)

    def committed(self, tps, timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[TopicPartition, int | None]:  # noqa: ANN001
        if self.group_id is None:
            return {tp: None for tp in tps}
        return {tp: self._broker.committed(self.group_id, tp) for tp in tps}

    def assignment(self) -> set[TopicPartition]:
        return set(self._assigned)

    def end_offsets(self, tps, timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[TopicPartition, int]:  # noqa: ANN001
        return {tp: self._broker.end_offset(tp) for tp in tps}

    def beginning_offsets(self, tps, timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[TopicPartition, int]:  # noqa: ANN001
        return {tp: self._broker.log_start(tp) for tp in tps}

    def partitions_for(self, topic: str) -> list[int]:
        return list(range(self._broker.partitions(topic)))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._mode != "subscribed" or self.group_id is None:
            return
        try:
            if self._assigned and self._on_revoke is not None:
                self._on_revoke(_sorted_tps(self._assigned))
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

    def close(self) -> None:
        pass
