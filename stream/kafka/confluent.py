"""The client on confluent-kafka (librdkafka): the fast one, the service's default.

Its option names live in ``config.py`` (:class:`ConfluentOptions`); the checks
and bookkeeping every client shares in ``base.py``. What is left here is how
librdkafka does each thing, and its quirks: a ``group.id`` even for manual
assignment, ``seek`` failing with ``_STATE`` right after ``assign``, and
``consume(n, timeout)`` waiting for all ``n`` records.
"""
from __future__ import annotations

import concurrent.futures
import logging
import time
from collections.abc import Mapping
from typing import Any

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import NewTopic as CkNewTopic

from .base import ConsumerBase, ProducerBase, record_headers, wait_for_topics
from .config import ConfluentOptions, ConsumerSettings, ProducerSettings
from .interfaces import Admin, Client, Consumer, Producer
from .tansu import EndOffsetProbe
from .values import (
    DEFAULT_REQUEST_TIMEOUT,
    CommitFailedError,
    KafkaTransportError,
    Record,
    TopicPartition,
)

__all__ = ["ConfluentClient"]

log = logging.getLogger(__name__)
# One name whichever module logs for librdkafka: consumers/logs.py quiets it.
librdkafka_log = logging.getLogger("sgm.stream.kafka.librdkafka")

#: Commit errors that mean "the group moved on": the records go to the partition's new owner.
REBALANCE_ERRORS = frozenset({
    ck.KafkaError.ILLEGAL_GENERATION,
    ck.KafkaError.UNKNOWN_MEMBER_ID,
    ck.KafkaError.REBALANCE_IN_PROGRESS,
    ck.KafkaError.FENCED_INSTANCE_ID,
    ck.KafkaError._ASSIGNMENT_LOST,
})


def _error_code(exc: BaseException) -> int | None:
    if exc.args and hasattr(exc.args[0], "code"):
        return int(exc.args[0].code())
    return None


def _on_client_error(err: Any) -> None:
    # Connection-level trouble (broker down, auth failure). librdkafka retries by
    # itself; the outcome surfaces as a delivery/commit/poll error.
    librdkafka_log.warning("librdkafka: %s", err)


def _ck_tp(tp: TopicPartition, offset: int | None = None) -> ck.TopicPartition:
    if offset is None:
        return ck.TopicPartition(tp.topic, tp.partition)
    return ck.TopicPartition(tp.topic, tp.partition, offset)


def _tps(partitions: Any) -> list[TopicPartition]:
    return sorted(TopicPartition(p.topic, p.partition) for p in partitions)


class ConfluentClient(Client):
    """:class:`Client` on confluent-kafka (librdkafka)."""

    kind = "confluent"

    def __init__(self, config) -> None:  # noqa: ANN001 - KafkaConfig
        super().__init__(config)
        self.options = ConfluentOptions(config, logger=librdkafka_log, on_error=_on_client_error)

    def open_producer(self, settings: ProducerSettings, overrides: Mapping[str, Any]) -> Producer:
        return _ConfluentProducer(self.options.producer(settings, overrides))

    def open_consumer(self, settings: ConsumerSettings, overrides: Mapping[str, Any]) -> Consumer:
        return _ConfluentConsumer(self.options.consumer(settings, overrides), settings.group_id,
                                  self.config.probe_end_offsets)

    def admin(self, timeout: float | None = None) -> Admin:
        return _ConfluentAdmin(self.options.admin())  # (opening it waits for nothing: ``timeout`` has no use)


class _ConfluentProducer(ProducerBase):
    def __init__(self, conf: dict[str, Any]) -> None:
        super().__init__()
        self._producer = ck.Producer(conf)
        self._max_block = ConfluentOptions.delivery_timeout_s(conf)

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self._fail(msg.topic(), msg.partition(), msg.key(), msg.value(), str(err),
                       err.code() == ck.KafkaError.MSG_SIZE_TOO_LARGE)

    def _send(self, topic, value, key, headers, partition, timestamp_ms=None) -> None:  # noqa: ANN001 - see ProducerBase._send
        kwargs: dict[str, Any] = {"on_delivery": self._on_delivery}
        if timestamp_ms is not None:
            kwargs["timestamp"] = timestamp_ms
        if key is not None:
            kwargs["key"] = key
        if partition is not None:
            kwargs["partition"] = partition
        if headers:
            kwargs["headers"] = headers
        deadline = None
        while True:
            try:
                self._producer.produce(topic, value, **kwargs)
                break
            except BufferError:
                # Local queue full: serving delivery reports drains it (backpressure).
                deadline = deadline or time.monotonic() + self._max_block
                if time.monotonic() > deadline:
                    self._fail(topic, partition, key, value, "local queue full")
                    return
                self._producer.poll(0.05)
            except ck.KafkaException as exc:  # over message.max.bytes, unknown partition, ...: refused at once
                error = exc.args[0] if exc.args and isinstance(exc.args[0], ck.KafkaError) else None
                self._fail(topic, partition, key, value, str(exc),
                           error is not None and error.code() == ck.KafkaError.MSG_SIZE_TOO_LARGE)
                return
        self._producer.poll(0)

    def _flush(self, timeout: float) -> int:
        return self._producer.flush(timeout)


class _ConfluentEndProbe(EndOffsetProbe):
    def __init__(self, conf: dict[str, Any]) -> None:
        self._consumer = ck.Consumer(conf)

    def fetch_from(self, positions: Mapping[TopicPartition, int]) -> None:
        self._consumer.assign([_ck_tp(tp, offset) for tp, offset in positions.items()])

    def answered(self, wait: float) -> set[TopicPartition]:
        # poll returns at the first event (consume(n) would wait for n or the timeout)
        m = self._consumer.poll(wait)
        if m is not None and (m.error() is None or m.error().code() == ck.KafkaError._PARTITION_EOF):
            return {TopicPartition(m.topic(), m.partition())}
        return set()

    def high_watermark(self, tp: TopicPartition) -> int | None:
        _low, high = self._consumer.get_watermark_offsets(_ck_tp(tp), cached=True)
        return int(high) if high >= 0 else None

    def stop(self) -> None:
        self._consumer.unassign()

    def close(self) -> None:
        self._consumer.close()


class _ConfluentConsumer(ConsumerBase):
    def __init__(self, conf: dict[str, Any], group_id: str | None, probe_end_offsets: bool) -> None:
        super().__init__(group_id, probe_end_offsets)
        self._conf = conf
        self._consumer = ck.Consumer(conf)
        self._in_assign_callback = False
        self._pending_seeks: dict[TopicPartition, int] = {}

    # -- group management --------------------------------------------------------

    def _subscribe(self, topics: list[str]) -> None:
        self._consumer.subscribe(topics, on_assign=self._handle_assign, on_revoke=self._handle_revoke,
                                 on_lost=self._handle_revoke)

    def _handle_assign(self, consumer: Any, partitions: list[Any]) -> None:
        self._pending_seeks = {}
        self._in_assign_callback = True
        try:
            if self._on_assign is not None:
                self._on_assign(_tps(partitions))
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
            self._on_revoke(_tps(partitions))

    def _assign(self, partitions: list[TopicPartition]) -> None:
        self._consumer.assign([_ck_tp(tp) for tp in partitions])

    def _seek(self, tp: TopicPartition, offset: int) -> None:
        if self._in_assign_callback:
            self._pending_seeks[tp] = offset
            return
        if tp not in self.assignment():
            raise ValueError(f"{tp} is not assigned to this consumer")
        deadline = time.monotonic() + 5.0
        while True:
            try:
                self._consumer.seek(_ck_tp(tp, offset))
                return
            except ck.KafkaException as exc:
                # _STATE: the partition's fetcher is still starting (right after
                # assign); it is ready within milliseconds.
                if _error_code(exc) == ck.KafkaError._STATE and time.monotonic() < deadline:
                    time.sleep(0.005)
                    continue
                raise KafkaTransportError(f"seek {tp} to {offset}: {exc}") from exc

    # -- reading -------------------------------------------------------------------

    def poll(self, max_records: int = 500, timeout: float = 1.0) -> list[Record]:
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
                    record_headers(m.headers()),
                )
            )
        return records

    # -- offsets ---------------------------------------------------------------------

    def _commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        try:
            result = self._consumer.commit(offsets=[_ck_tp(tp, off) for tp, off in offsets.items()], asynchronous=False)
        except ck.KafkaException as exc:
            if _error_code(exc) in REBALANCE_ERRORS:
                raise CommitFailedError(str(exc)) from exc
            raise KafkaTransportError(f"commit failed: {exc}") from exc
        failed = [p for p in (result or []) if p.error is not None]
        if failed:
            raise CommitFailedError("; ".join(f"{p.topic}[{p.partition}]: {p.error}" for p in failed))

    def _committed(self, tps: list[TopicPartition], timeout: float) -> dict[TopicPartition, int | None]:
        try:
            result = self._consumer.committed([_ck_tp(tp) for tp in tps], timeout=timeout)
        except ck.KafkaException as exc:
            raise KafkaTransportError(f"committed(): {exc}") from exc
        return {TopicPartition(p.topic, p.partition): (p.offset if p.offset >= 0 else None) for p in result}

    def assignment(self) -> set[TopicPartition]:
        return {TopicPartition(p.topic, p.partition) for p in self._consumer.assignment()}

    def _watermarks(self, tps: list[TopicPartition], timeout: float, what: str) -> dict[TopicPartition, tuple[int, int]]:
        marks = {}
        for tp in tps:
            try:
                marks[tp] = self._consumer.get_watermark_offsets(_ck_tp(tp), timeout=timeout, cached=False)
            except ck.KafkaException as exc:
                raise KafkaTransportError(f"{what} of {tp}: {exc}") from exc
        return marks

    def _end_offsets(self, tps: list[TopicPartition], timeout: float) -> dict[TopicPartition, int]:
        return {tp: int(high) for tp, (_low, high) in self._watermarks(tps, timeout, "end offset").items()}

    def beginning_offsets(self, tps, timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[TopicPartition, int]:  # noqa: ANN001
        return {tp: int(low) for tp, (low, _high) in self._watermarks(list(tps), timeout, "log start offset").items()}

    def _open_end_probe(self) -> EndOffsetProbe:
        return _ConfluentEndProbe(ConfluentOptions.end_probe(self._conf))

    def position(self, tp: TopicPartition) -> int | None:
        try:
            found = self._consumer.position([_ck_tp(tp)])
        except ck.KafkaException:
            return None
        offset = found[0].offset if found else -1
        return int(offset) if offset >= 0 else None

    def partitions_for(self, topic: str) -> list[int]:
        try:
            metadata = self._consumer.list_topics(topic, timeout=DEFAULT_REQUEST_TIMEOUT)
        except ck.KafkaException as exc:
            raise KafkaTransportError(f"metadata for {topic!r}: {exc}") from exc
        t = metadata.topics.get(topic)
        if t is None or t.error is not None:
            return []
        return sorted(t.partitions)

    def _close(self) -> None:
        self._consumer.close()  # runs on_revoke for a group member


class _ConfluentAdmin(Admin):
    def __init__(self, conf: dict[str, Any]) -> None:
        self._admin = AdminClient(conf)

    def create_topics(self, topics, exist_ok: bool = True, timeout: float = 30.0) -> None:  # noqa: ANN001
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
                if exist_ok and _error_code(exc) == ck.KafkaError.TOPIC_ALREADY_EXISTS:
                    continue
                raise KafkaTransportError(f"create topic {name!r}: {exc}") from exc
            except TimeoutError as exc:  # no broker answered: a transport error, as the Admin contract says
                raise KafkaTransportError(f"create topic {name!r}: no answer within {timeout:g} s") from exc
        wait_for_topics(self, [name for name, _, _ in topics], timeout)

    def topic_id(self, topic: str, timeout: float = DEFAULT_REQUEST_TIMEOUT) -> str | None:
        futures = self._admin.describe_topics(ck.TopicCollection([topic]), request_timeout=timeout)
        try:
            described = futures[topic].result(timeout)
        except ck.KafkaException as exc:
            if _error_code(exc) == ck.KafkaError.UNKNOWN_TOPIC_OR_PART:
                return None
            raise KafkaTransportError(f"describe topic {topic!r}: {exc}") from exc
        except concurrent.futures.TimeoutError:
            raise KafkaTransportError(f"describe topic {topic!r}: no answer in {timeout:g} s") from None
        topic_id = getattr(described, "topic_id", None)
        return None if topic_id is None or str(topic_id) in ("", "AAAAAAAAAAAAAAAAAAAAAA") else str(topic_id)

    def list_topics(self, timeout: float = DEFAULT_REQUEST_TIMEOUT) -> dict[str, int]:
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
