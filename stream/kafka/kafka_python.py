"""The client on kafka-python: pure Python, slower, no native dependency.

Its option names live in ``config.py`` (:class:`KafkaPythonOptions`); the checks
and bookkeeping every client shares in ``base.py``. What is left here is how
kafka-python does each thing, and its quirks: some delivery failures reported
synchronously, rebalance listeners that swallow (2.x) or wrap (3.x) exceptions,
and (3.x) listeners running on the IO thread, where blocking calls raise.
"""
from __future__ import annotations

import contextlib

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import kafka
import kafka.errors
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTopicPartition
from kafka.admin import KafkaAdminClient
from kafka.admin import NewTopic as KNewTopic
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.structs import OffsetAndMetadata

from .base import ConsumerBase, ProducerBase, record_headers, wait_for_topics
from .config import ConsumerSettings, KafkaPythonOptions, ProducerSettings
from .interfaces import Admin, Client, Consumer, Producer, RebalanceCallback
from .tansu import EndOffsetProbe
from .values import (
    DEFAULT_REQUEST_TIMEOUT,
    CommitFailedError,
    KafkaTransportError,
    Record,
    TopicPartition,
)

__all__ = ["KafkaPythonClient"]

log = logging.getLogger(__name__)

#: Commit errors that mean "the group moved on": the records go to the partition's new owner.
REBALANCE_ERRORS = (kafka.errors.CommitFailedError, kafka.errors.IllegalGenerationError,
                    kafka.errors.UnknownMemberIdError, kafka.errors.RebalanceInProgressError)


def _ktp(tp: TopicPartition) -> KTopicPartition:
    return KTopicPartition(tp.topic, tp.partition)


def _tps(partitions: Iterable[Any]) -> list[TopicPartition]:
    return sorted(TopicPartition(p.topic, p.partition) for p in partitions)


def _commit_request(offsets: Mapping[TopicPartition, int]) -> dict[KTopicPartition, OffsetAndMetadata]:
    return {_ktp(tp): OffsetAndMetadata(off, "", -1) for tp, off in offsets.items()}


class KafkaPythonClient(Client):
    """:class:`Client` on kafka-python."""

    kind = "kafka-python"

    def __init__(self, config) -> None:  # noqa: ANN001 - KafkaConfig
        super().__init__(config)
        self.options = KafkaPythonOptions(config)

    # kafka-python connects when a client is built: a broker it cannot reach (or that refuses its
    # credentials) raises there, as a KafkaError of its own; the service retries KafkaTransportError.
    def open_producer(self, settings: ProducerSettings, overrides: Mapping[str, Any]) -> Producer:
        with _transport_errors("producer"):
            return _KafkaPythonProducer(self.options.producer(settings, KafkaProducer.DEFAULT_CONFIG, overrides))

    def open_consumer(self, settings: ConsumerSettings, overrides: Mapping[str, Any]) -> Consumer:
        conf = self.options.consumer(settings, KafkaConsumer.DEFAULT_CONFIG, overrides, assignor=RangePartitionAssignor)
        with _transport_errors("consumer"):
            return _KafkaPythonConsumer(conf, settings.group_id, self.config.probe_end_offsets)

    def admin(self, timeout: float | None = None) -> Admin:
        conf = self.options.admin(KafkaAdminClient.DEFAULT_CONFIG)
        if timeout is not None:  # its constructor bootstraps, for bootstrap_timeout_ms (30 s) unless told otherwise
            conf["bootstrap_timeout_ms"] = max(int(timeout * 1000), 100)
        with _transport_errors("admin client"):
            return _KafkaPythonAdmin(conf)


@contextlib.contextmanager
def _transport_errors(what: str):
    try:
        yield
    except kafka.errors.KafkaError as exc:
        raise KafkaTransportError(f"cannot open a Kafka {what}: {exc!r}") from exc


class _KafkaPythonProducer(ProducerBase):
    def __init__(self, conf: dict[str, Any]) -> None:
        super().__init__()
        self._producer = KafkaProducer(**conf)

    def _on_error(self, topic: str, partition: int | None, key: bytes | None, value: bytes | None,
                  exc: BaseException) -> None:
        # Runs on kafka-python's sender thread.
        self._fail(topic, partition, key, value, repr(exc), isinstance(exc, kafka.errors.MessageSizeTooLargeError))

    def _send(self, topic, value, key, headers, partition, timestamp_ms=None) -> None:  # noqa: ANN001 - see ProducerBase._send
        try:
            future = self._producer.send(topic, value=value, key=key, headers=headers, partition=partition,
                                         timestamp_ms=timestamp_ms)
        except (ValueError, AssertionError, kafka.errors.KafkaError) as exc:
            # kafka-python reports some failures synchronously (unknown partition,
            # metadata timeout); collect them like asynchronous ones.
            self._on_error(topic, partition, key, value, exc)
            return
        future.add_errback(self._on_error, topic, partition, key, value)

    def _flush(self, timeout: float) -> int | None:
        try:
            self._producer.flush(timeout)
        except kafka.errors.KafkaTimeoutError:
            return None
        return 0

    def _release(self, timeout: float) -> None:
        self._producer.close(timeout)


def _listener(owner: "_KafkaPythonConsumer") -> Any:
    """A kafka-python rebalance listener forwarding to ``owner``'s callbacks.

    kafka-python swallows (2.x) or wraps (3.x) listener exceptions; the owner
    keeps the first one and re-raises it from poll(), as confluent-kafka does.

    kafka-python 3 runs listeners on its IO thread, where a blocking call such
    as a synchronous commit raises RuntimeError. So with 3.x the listener is
    async: commit() calls made inside the callback are collected and awaited
    right after it returns -- still before the rebalance goes on, so the next
    owner of the partition resumes from them.
    """
    async_base = getattr(kafka, "AsyncConsumerRebalanceListener", None)
    if async_base is None:  # kafka-python 2.x: listeners run on the polling thread

        class _SyncListener(kafka.ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked: Iterable[Any]) -> None:
                tps = _tps(revoked)
                if tps and owner._on_revoke is not None:  # an empty revoke precedes the first join
                    owner._run_callback(owner._on_revoke, tps)

            def on_partitions_assigned(self, assigned: Iterable[Any]) -> None:
                if owner._on_assign is not None:
                    owner._run_callback(owner._on_assign, _tps(assigned))

        return _SyncListener()

    class _AsyncListener(async_base):  # type: ignore[misc, valid-type]
        async def on_partitions_revoked(self, revoked: Iterable[Any]) -> None:
            tps = _tps(revoked)
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
                owner._run_callback(owner._on_assign, _tps(assigned))

    return _AsyncListener()


class _KafkaPythonEndProbe(EndOffsetProbe):
    def __init__(self, conf: dict[str, Any]) -> None:
        self._consumer = KafkaConsumer(**conf)
        self._targets: list[TopicPartition] = []

    def fetch_from(self, positions: Mapping[TopicPartition, int]) -> None:
        self._targets = list(positions)
        self._consumer.assign([_ktp(tp) for tp in self._targets])
        for tp, offset in positions.items():
            self._consumer.seek(_ktp(tp), offset)

    def answered(self, wait: float) -> set[TopicPartition]:
        self._consumer.poll(timeout_ms=int(wait * 1000))
        return {tp for tp in self._targets if self.high_watermark(tp) is not None}

    def high_watermark(self, tp: TopicPartition) -> int | None:
        high = self._consumer.highwater(_ktp(tp))
        return None if high is None else int(high)

    def stop(self) -> None:
        self._consumer.assign([])

    def close(self) -> None:
        self._consumer.close(autocommit=False)


class _KafkaPythonConsumer(ConsumerBase):
    def __init__(self, conf: dict[str, Any], group_id: str | None, probe_end_offsets: bool) -> None:
        super().__init__(group_id, probe_end_offsets)
        self._conf = conf
        self._consumer = KafkaConsumer(**conf)
        self._callback_error: BaseException | None = None
        # Not None while an on_revoke callback runs on kafka-python 3's IO thread.
        self._deferred_commits: dict[TopicPartition, int] | None = None

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

    def _subscribe(self, topics: list[str]) -> None:
        self._consumer.subscribe(topics=topics, listener=_listener(self))

    def _assign(self, partitions: list[TopicPartition]) -> None:
        self._consumer.assign([_ktp(tp) for tp in partitions])

    def _seek(self, tp: TopicPartition, offset: int) -> None:
        if tp not in self.assignment():
            raise ValueError(f"{tp} is not assigned to this consumer")
        self._consumer.seek(_ktp(tp), offset)

    def poll(self, max_records: int = 500, timeout: float = 1.0) -> list[Record]:
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
                record_headers(r.headers),
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
                self._consumer.seek(_ktp(tp), off)
            self._raise_callback_error()
        return records

    def _commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        if self._deferred_commits is not None:
            self._deferred_commits.update(offsets)  # sent when the callback returns
            return
        try:
            self._consumer.commit(_commit_request(offsets))
        except REBALANCE_ERRORS as exc:
            raise CommitFailedError(str(exc)) from exc
        except kafka.errors.KafkaError as exc:
            raise KafkaTransportError(f"commit failed: {exc!r}") from exc

    async def _commit_from_io_thread(self, offsets: Mapping[TopicPartition, int]) -> None:
        coordinator = self._consumer._coordinator  # kafka-python 3 internals: the awaitable commit
        try:
            await coordinator._commit_offsets_sync_async(_commit_request(offsets))
        except Exception as exc:  # noqa: BLE001 - the records will simply be redelivered
            log.warning("commit from on_revoke failed, the next owner will re-read from the previous commit: %r", exc)

    def _committed(self, tps: list[TopicPartition], timeout: float) -> dict[TopicPartition, int | None]:
        out: dict[TopicPartition, int | None] = {}
        try:
            for tp in tps:
                off = self._consumer.committed(_ktp(tp), timeout_ms=int(timeout * 1000))
                out[tp] = off if off is not None and off >= 0 else None
        except kafka.errors.KafkaError as exc:
            raise KafkaTransportError(f"committed(): {exc!r}") from exc
        return out

    def assignment(self) -> set[TopicPartition]:
        return {TopicPartition(p.topic, p.partition) for p in self._consumer.assignment()}

    def beginning_offsets(self, tps, timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[TopicPartition, int]:  # noqa: ANN001
        try:
            raw = self._consumer.beginning_offsets([_ktp(tp) for tp in tps], timeout_ms=int(timeout * 1000))
        except kafka.errors.KafkaError as exc:
            raise KafkaTransportError(f"log start offsets: {exc!r}") from exc
        return {TopicPartition(p.topic, p.partition): int(off) for p, off in raw.items()}

    def _end_offsets(self, tps: list[TopicPartition], timeout: float) -> dict[TopicPartition, int]:
        for tp in tps:
            # kafka-python would wait out the whole timeout for an unknown partition.
            if tp.partition not in (self._consumer.partitions_for_topic(tp.topic) or ()):
                raise KafkaTransportError(f"unknown partition {tp}")
        try:
            raw = self._consumer.end_offsets([_ktp(tp) for tp in tps], timeout_ms=int(timeout * 1000))
        except kafka.errors.KafkaError as exc:
            raise KafkaTransportError(f"end offsets: {exc!r}") from exc
        return {TopicPartition(p.topic, p.partition): int(off) for p, off in raw.items()}

    def _open_end_probe(self) -> EndOffsetProbe:
        return _KafkaPythonEndProbe(KafkaPythonOptions.end_probe(self._conf))

    def partitions_for(self, topic: str) -> list[int]:
        parts = self._consumer.partitions_for_topic(topic)
        return sorted(parts) if parts else []

    def position(self, tp: TopicPartition) -> int | None:
        try:
            offset = self._consumer.position(_ktp(tp), timeout_ms=1000)
        except (kafka.errors.KafkaError, AssertionError, ValueError):
            return None
        return int(offset) if offset is not None and offset >= 0 else None

    def _close(self) -> None:
        self._consumer.close(autocommit=False)  # runs on_revoke for a group member

    def close(self) -> None:
        super().close()
        self._raise_callback_error()


class _KafkaPythonAdmin(Admin):
    def __init__(self, conf: dict[str, Any]) -> None:
        self._admin = KafkaAdminClient(**conf)

    def create_topics(self, topics, exist_ok: bool = True, timeout: float = 30.0) -> None:  # noqa: ANN001
        topics = list(topics)
        for name, parts, repl in topics:
            try:
                self._admin.create_topics([KNewTopic(name, parts, repl)], timeout_ms=int(timeout * 1000))
            except kafka.errors.TopicAlreadyExistsError:
                if not exist_ok:
                    raise KafkaTransportError(f"topic {name!r} already exists") from None
            except kafka.errors.KafkaError as exc:
                raise KafkaTransportError(f"create topic {name!r}: {exc!r}") from exc
        wait_for_topics(self, [name for name, _, _ in topics], timeout)

    def list_topics(self, timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[str, int]:
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

    def topic_id(self, topic: str, timeout: float = DEFAULT_REQUEST_TIMEOUT) -> str | None:
        try:
            described = self._admin.describe_topics([topic])
        except kafka.errors.UnknownTopicOrPartitionError:
            return None
        except kafka.errors.KafkaError as exc:
            raise KafkaTransportError(f"describe topic {topic!r}: {exc!r}") from exc
        for t in described:
            if t.get("name", t.get("topic")) == topic and t.get("error_code", 0) == 0:
                topic_id = t.get("topic_id")
                return None if not topic_id or str(topic_id) == "00000000-0000-0000-0000-000000000000" else str(topic_id)
        return None

    def close(self) -> None:
        self._admin.close()
