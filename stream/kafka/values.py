"""Value types and errors shared by every client: partitions, records, delivery failures.

Examples
--------
>>> tp = TopicPartition("events", 1)
>>> str(tp), Record("events", 1, 41, b"k", b"v").tp == tp
('events[1]', True)
>>> str(DeliveryError([DeliveryFailure("events", 0, None, b"v", "broker down")]))
'1 record(s) failed, first: events[0]: broker down'
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

__all__ = [
    "DEFAULT_REQUEST_TIMEOUT",
    "DEFAULT_SESSION_TIMEOUT_MS",
    "CommitFailedError",
    "DeliveryError",
    "DeliveryFailure",
    "Headers",
    "KafkaTransportError",
    "NewTopic",
    "OffsetReset",
    "Record",
    "SecurityProtocol",
    "TopicPartition",
]

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


@dataclass(frozen=True, order=True, slots=True)
class TopicPartition:
    """A partition of a topic.

    Examples
    --------
    >>> str(TopicPartition("events", 1)), TopicPartition("a", 1) < TopicPartition("b", 0)
    ('events[1]', True)
    """

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

    Examples
    --------
    >>> record = Record("events", 1, 41, b"k", b"v", timestamp_ms=1700000000000)
    >>> record.tp, record.offset + 1  # commit the next offset once it is processed
    (TopicPartition(topic='events', partition=1), 42)
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
    """A record the producer could not deliver, and why (:attr:`DeliveryError.failures`).

    Examples
    --------
    >>> DeliveryFailure("events", None, b"k", b"v", "unknown topic 'events'").error
    "unknown topic 'events'"
    """

    topic: str
    partition: int | None
    key: bytes | None
    value: bytes | None
    error: str
    #: The record is larger than the producer or the topic accepts (``message.max.bytes``,
    #: ``max.message.bytes``): no retry can deliver it.
    too_large: bool = False


class KafkaTransportError(Exception):
    """Base class of the errors raised by this package for Kafka-side problems.

    Examples
    --------
    >>> issubclass(DeliveryError, KafkaTransportError), issubclass(CommitFailedError, KafkaTransportError)
    (True, True)
    """


class DeliveryError(KafkaTransportError):
    """Raised by :meth:`Producer.flush` when records were not delivered.

    Attributes
    ----------
    failures : list of DeliveryFailure
        Records whose delivery failed since the previous flush.
    undelivered : int or None
        Records still in flight when the flush timed out (``None``: unknown count).

    Examples
    --------
    >>> error = DeliveryError([DeliveryFailure("events", 0, None, b"v", "broker down")], undelivered=2)
    >>> str(error)
    '1 record(s) failed, first: events[0]: broker down; 2 record(s) still undelivered at timeout'
    >>> [failure.value for failure in error.failures]
    [b'v']
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

    Examples
    --------
    >>> try:
    ...     raise CommitFailedError("group rebalanced")
    ... except KafkaTransportError as exc:  # every Kafka-side error of this package
    ...     print(type(exc).__name__, exc)
    CommitFailedError group rebalanced
    """
