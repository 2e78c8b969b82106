"""What every client shares, whatever library is underneath.

:class:`ProducerBase` and :class:`ConsumerBase` implement the argument checks and
the bookkeeping that make the three clients behave alike (``docs/KAFKA.md``):
misuse raises at once, delivery failures are collected for the next ``flush``,
a consumer is either subscribed or assigned, commits need a group and
non-negative offsets, ``close`` runs once, and ``end_offsets`` is corrected by
the Tansu probe (``tansu.py``) where the client has one. A client fills in the
hooks (the methods whose names start with ``_``), each a few library calls.
"""
from __future__ import annotations

import abc
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from .interfaces import Admin, Consumer, Producer, RebalanceCallback
from .tansu import EndOffsetProbe, correct_end_offsets
from .values import (
    DEFAULT_REQUEST_TIMEOUT,
    DeliveryError,
    DeliveryFailure,
    Headers,
    KafkaTransportError,
    TopicPartition,
)

__all__ = [
    "ConsumerBase",
    "ProducerBase",
    "check_bytes",
    "normalize_headers",
    "record_headers",
    "wait_for_topics",
]

_BYTES = (bytes, bytearray, memoryview)


def check_bytes(name: str, value: object) -> None:
    """``TypeError`` unless ``value`` is bytes-like or ``None``."""
    if value is not None and not isinstance(value, _BYTES):
        raise TypeError(f"{name} must be bytes or None, got {type(value).__name__}")


def normalize_headers(headers: Sequence[tuple[str, bytes]] | Mapping[str, bytes] | None) -> list[tuple[str, bytes]] | None:
    """Headers given to ``send`` as ``[(name, bytes), ...]`` (``None`` for none); ``TypeError`` on bad types."""
    if not headers:
        return None
    items = list(headers.items()) if isinstance(headers, Mapping) else list(headers)
    for name, value in items:
        if not isinstance(name, str):
            raise TypeError(f"header names must be str, got {type(name).__name__}")
        if not isinstance(value, (bytes, bytearray)):
            raise TypeError(f"header {name!r} value must be bytes, got {type(value).__name__}")
    return [(name, bytes(value)) for name, value in items]


def record_headers(raw: Iterable[tuple[str, bytes | None]] | None) -> Headers:
    """Headers of a consumed record as :class:`Record` holds them (a null value becomes ``b""``)."""
    if not raw:
        return ()
    return tuple((name, value if value is not None else b"") for name, value in raw)


def wait_for_topics(admin: Admin, names: Sequence[str], timeout: float) -> None:
    """Wait until ``admin`` lists every topic in ``names``.

    CreateTopics returning is not the same as every client seeing the topic.
    """
    deadline = time.monotonic() + timeout
    while True:
        visible = admin.list_topics()
        missing = [n for n in names if n not in visible]
        if not missing:
            return
        if time.monotonic() > deadline:
            raise KafkaTransportError(f"topics not visible after {timeout}s: {missing}")
        time.sleep(0.05)


class ProducerBase(Producer):
    """Checks ``send``'s arguments, collects delivery failures, raises them from ``flush``, closes once."""

    def __init__(self) -> None:
        self._failures: list[DeliveryFailure] = []
        self._failures_lock = threading.Lock()  # some clients report failures from their own threads
        self._closed = False

    def send(self, topic, value, key=None, headers=None, partition=None, timestamp_ms=None) -> None:  # noqa: ANN001 - see Producer.send
        if self._closed:
            raise RuntimeError("producer is closed")
        if value is not None and not isinstance(value, _BYTES):
            check_bytes("value", value)
        if key is not None and not isinstance(key, _BYTES):
            check_bytes("key", key)
        if timestamp_ms is not None and (not isinstance(timestamp_ms, int) or timestamp_ms < 0):
            raise TypeError(f"timestamp_ms must be a non-negative int, got {timestamp_ms!r}")
        self._send(topic, value, key, normalize_headers(headers) if headers else None, partition, timestamp_ms)

    def _fail(self, topic: str, partition: int | None, key: bytes | None, value: bytes | None, error: str,
              too_large: bool = False) -> None:
        """Record a failed delivery (``too_large``: the record is over a size limit); the next :meth:`flush` raises it."""
        with self._failures_lock:
            self._failures.append(DeliveryFailure(topic, partition, key, value, error, too_large))

    def flush(self, timeout: float = 30.0) -> None:
        undelivered = self._flush(timeout)
        with self._failures_lock:
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
            self._release(timeout)

    @abc.abstractmethod
    def _send(self, topic: str, value: bytes | None, key: bytes | None, headers: list[tuple[str, bytes]] | None,
              partition: int | None, timestamp_ms: int | None = None) -> None:
        """Queue the (checked) record; delivery problems go to :meth:`_fail`, never raise."""

    @abc.abstractmethod
    def _flush(self, timeout: float) -> int | None:
        """Wait for deliveries; the number still in flight at ``timeout`` (``None``: some, count unknown)."""

    def _release(self, timeout: float) -> None:
        """Release the library's producer after the final flush (nothing by default)."""


class ConsumerBase(Consumer):
    """The checks and state every consumer shares; a client writes the ``_`` hooks.

    Parameters
    ----------
    group_id : str or None
    probe_end_offsets : bool
        Correct :meth:`end_offsets` with the client's :class:`EndOffsetProbe` (``tansu.py``).
    """

    def __init__(self, group_id: str | None, probe_end_offsets: bool = False) -> None:
        self.group_id = group_id
        self._mode: Literal["none", "subscribed", "assigned"] = "none"
        self._on_assign: RebalanceCallback | None = None
        self._on_revoke: RebalanceCallback | None = None
        self._probe_end_offsets = probe_end_offsets
        self._probe: EndOffsetProbe | None = None
        self._closed = False

    def subscribe(self, topics, on_assign=None, on_revoke=None) -> None:  # noqa: ANN001 - see Consumer.subscribe
        if self.group_id is None:
            raise ValueError("subscribe() needs a consumer with a group_id")
        if self._mode == "assigned":
            raise ValueError("consumer already has a manual assignment")
        self._on_assign, self._on_revoke = on_assign, on_revoke
        self._subscribe(list(topics))
        self._mode = "subscribed"

    def assign(self, partitions) -> None:  # noqa: ANN001 - see Consumer.assign
        if self._mode == "subscribed":
            raise ValueError("consumer is subscribed to a group; cannot also assign manually")
        self._assign(list(partitions))
        self._mode = "assigned"

    def seek(self, tp: TopicPartition, offset: int) -> None:
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        self._seek(tp, offset)

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        if not offsets:
            return
        if self.group_id is None:
            raise KafkaTransportError("commit() needs a consumer with a group_id")
        for tp, off in offsets.items():
            if off < 0:
                raise ValueError(f"offset for {tp} must be >= 0, got {off}")
        self._commit(offsets)

    def committed(self, tps, timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[TopicPartition, int | None]:  # noqa: ANN001
        tps = list(tps)
        if self.group_id is None or not tps:
            return {tp: None for tp in tps}
        return self._committed(tps, timeout)

    def end_offsets(self, tps, timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[TopicPartition, int]:  # noqa: ANN001
        ends = self._end_offsets(list(tps), timeout)
        if self._probe_end_offsets:
            correct_end_offsets(ends, self._end_probe, timeout)
        return ends

    def _end_probe(self) -> EndOffsetProbe:
        if self._probe is None:
            self._probe = self._open_end_probe()
        return self._probe

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._close()  # runs on_revoke for a group member
        finally:
            if self._probe is not None:
                self._probe.close()

    # -- the hooks a client writes ------------------------------------------------------------

    @abc.abstractmethod
    def _subscribe(self, topics: list[str]) -> None:
        """Join the group for ``topics``; the callbacks are in ``_on_assign`` / ``_on_revoke``."""

    @abc.abstractmethod
    def _assign(self, partitions: list[TopicPartition]) -> None:
        """Assign exactly ``partitions``."""

    @abc.abstractmethod
    def _seek(self, tp: TopicPartition, offset: int) -> None:
        """Seek (``offset`` is >= 0); ``ValueError`` if ``tp`` is not assigned."""

    @abc.abstractmethod
    def _commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit checked, non-empty ``offsets`` for ``group_id``."""

    @abc.abstractmethod
    def _committed(self, tps: list[TopicPartition], timeout: float) -> dict[TopicPartition, int | None]:
        """The group's committed offsets of the (non-empty) ``tps``."""

    @abc.abstractmethod
    def _end_offsets(self, tps: list[TopicPartition], timeout: float) -> dict[TopicPartition, int]:
        """The end offsets the broker reports (before the probe's correction)."""

    def _open_end_probe(self) -> EndOffsetProbe:
        """A new :class:`EndOffsetProbe` for this consumer's broker (clients that probe write it)."""
        raise NotImplementedError(f"{type(self).__name__} has no end-offset probe")

    @abc.abstractmethod
    def _close(self) -> None:
        """Leave the group (``on_revoke`` first) and release the library's consumer."""
