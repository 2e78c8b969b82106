"""The service's Kafka handles: one producer, the training consumer and the scoring consumer.

* The training consumer is manually assigned every partition of the training
  topic, outside any group (every model replica reads the whole log itself),
  and positioned at the offsets the model holds (docs/PROTOCOL.md).
* The scoring consumer is in the classifier group, sharing the scoring
  topic's partitions with the other replicas.
* The producer writes outputs and dead letters.

Opening, replacing and closing them lives here; when to do it (at start,
after repeated errors) is the loop's decision (``loop.py``).
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

from sgm.stream.kafka import Client, KafkaTransportError, TopicPartition

from ..config import ServiceConfig

log = logging.getLogger("sgm.service")

#: Seconds a start attempt waits for the brokers to answer at all before it counts as failed (and is logged).
REACH_TIMEOUT = 2.0


class Connections:
    """The producer and the two consumers of one service process.

    Parameters
    ----------
    client : stream.kafka.Client
    config : ServiceConfig
    on_rejoin : callable, optional
        Called whenever a new scoring consumer joins the group (positions
        known for the old one are stale from then on).

    Examples
    --------
    >>> from sgm.stream.kafka import KafkaConfig, open_client
    >>> config = ServiceConfig(bootstrap_servers="memory://doc-connections", client="memory", role="trainer",
    ...                        train_topic="doc-train", metrics_address="")
    >>> connections = Connections(open_client("memory", KafkaConfig(config.bootstrap_servers)), config)
    >>> connections.connect({0: 0})
    >>> sorted(tp.partition for tp in connections.train_consumer.assignment()), connections.score_consumer
    ([0], None)
    >>> connections.close()
    """

    def __init__(self, client: Client, config: ServiceConfig, on_rejoin: Callable[[], None] = lambda: None) -> None:
        self.client, self.config, self.on_rejoin = client, config, on_rejoin
        #: Set when the process is stopping: a start attempt's waits end at once (Service.run shares its event).
        self.stopping = threading.Event()
        self.producer = None
        self.train_consumer = None
        self.score_consumer = None
        self._reader = None  # see offsets_reader

    def consumer_options(self) -> dict[str, Any]:
        """Options of every consumer the service opens: how long a fetch waits for data."""
        return {"fetch_wait_ms": self.config.fetch_wait_ms, "max_response_bytes": self.config.max_fetch_bytes}

    def connect(self, train_offsets: dict[int, int], score: bool = True, timeout: float = 30.0) -> None:
        """Create the topics (if configured), then open the producer and the consumers this role needs.

        ``score=False`` leaves the scoring consumer closed (a classifier not ready yet); ``timeout``
        bounds each wait (topic creation, the training topic's metadata).
        """
        cfg = self.config
        with self.client.admin(timeout=min(timeout, REACH_TIMEOUT)) as admin:
            existing = admin.list_topics(timeout=min(timeout, REACH_TIMEOUT))  # an unreachable broker fails fast
            if cfg.create_topics:
                wanted = [(cfg.train_topic, cfg.train_partitions, "training"), (cfg.score_topic, cfg.score_partitions,
                          "scoring"), (cfg.output_topic, cfg.score_partitions, "output"), (cfg.dlq_topic, 1, "dead letters")]
                admin.create_topics([(name, partitions, cfg.replication_factor) for name, partitions, _ in wanted],
                                    timeout=timeout)
                created = [f"{name!r} ({job})" for name, _, job in wanted if name not in existing]
                if created:  # the one trace of a misspelt topic name: it is created, empty, and served without error
                    log.info("created topics that did not exist: %s", ", ".join(created))
        if self.producer is None:
            self.producer = self.client.producer()
        self.open_train_consumer(train_offsets, timeout)
        if cfg.classifies and score:
            self.open_score_consumer()

    def offsets_reader(self):
        """A group-less consumer that never fetches: the training topic's metadata and offsets come from it.

        A fetch response larger than the client accepts (a poison record) breaks the connection of the
        consumer that fetched it, and every request on it fails from then on; this one never fetches, so
        the checks that find and skip such a record keep working (stalls.py, log_identity.py, readiness.py).
        """
        if self._reader is None:
            self._reader = self.client.consumer(None, **self.consumer_options())
        return self._reader

    def drop_offsets_reader(self) -> None:
        """After a Kafka error: the next :meth:`offsets_reader` is a new consumer."""
        old, self._reader = self._reader, None
        _close_quietly(old)

    def train_topic_id(self) -> str | None:
        """The training topic's id (``None``: the client or broker cannot tell); Kafka errors propagate.

        A fresh admin client each time: one kept open would cache the topic's metadata across its deletion.
        """
        with self.client.admin() as admin:
            return admin.topic_id(self.config.train_topic, timeout=5.0)

    def close_score_consumer(self) -> None:
        """Leave the classifier group (its partitions go to the other replicas) until opened again."""
        old, self.score_consumer = self.score_consumer, None
        _close_quietly(old)

    def close_train_consumer(self) -> None:
        old, self.train_consumer = self.train_consumer, None
        _close_quietly(old)

    def open_train_consumer(self, train_offsets: dict[int, int], timeout: float = 30.0) -> None:
        """Assign every training partition and seek to the offsets the model holds (exactly once)."""
        cfg = self.config
        self.train_consumer = self.client.consumer(None, **self.consumer_options())
        partitions = self._wait_for_partitions(self.train_consumer, cfg.train_topic, timeout, self.stopping)
        if len(partitions) > 1:
            log.warning("training topic has several partitions: replicas agree only up to the order of records "
                        "across partitions", extra={"partitions": len(partitions)})
        tps = [TopicPartition(cfg.train_topic, p) for p in partitions]
        self.train_consumer.assign(tps)
        for tp in tps:
            self.train_consumer.seek(tp, train_offsets.get(tp.partition, 0))

    def open_score_consumer(self) -> None:
        """Join the classifier group; reading resumes at the group's committed offsets."""
        cfg = self.config
        self.score_consumer = self.client.consumer(cfg.group, auto_offset_reset="earliest", **self.consumer_options())
        self.score_consumer.subscribe([cfg.score_topic])
        self.on_rejoin()

    def replace_train_consumer(self, train_offsets: dict[int, int]) -> None:
        """Close the training consumer and open a new one at the model's offsets: nothing skipped, nothing twice."""
        old, self.train_consumer = self.train_consumer, None
        _close_quietly(old)
        self.open_train_consumer(train_offsets)

    def rejoin(self) -> None:
        """Leave the group and join again: reading restarts from the last committed offsets."""
        old, self.score_consumer = self.score_consumer, None
        _close_quietly(old)
        self.open_score_consumer()

    def close_consumers(self) -> None:
        """Drop the consumers (a start that failed half-way opens them again)."""
        self.drop_offsets_reader()
        for name in ("score_consumer", "train_consumer"):
            consumer = getattr(self, name)
            setattr(self, name, None)
            if consumer is not None:
                try:
                    consumer.close()
                except Exception as exc:  # noqa: BLE001 - a broken consumer is being replaced
                    log.warning("error closing consumer", extra={"consumer": name, "error": str(exc)})

    def close(self) -> None:
        """Close the consumers (leaving the group) and the producer (waiting for its deliveries)."""
        self.drop_offsets_reader()
        for closable in (self.score_consumer, self.train_consumer):
            if closable is not None:
                try:
                    closable.close()
                except KafkaTransportError as exc:
                    log.warning("error closing consumer", extra={"error": str(exc)})
        if self.producer is not None:
            try:
                self.producer.close()
            except KafkaTransportError as exc:
                log.warning("error closing producer", extra={"error": str(exc)})

    @staticmethod
    def _wait_for_partitions(consumer, topic: str, timeout: float = 30.0,
                             stopping: threading.Event | None = None) -> list[int]:
        deadline = time.monotonic() + timeout
        while True:
            partitions = consumer.partitions_for(topic)
            if partitions:
                return partitions
            if time.monotonic() > deadline:
                raise KafkaTransportError(f"topic {topic!r} does not exist (start with --create-topics true)")
            if stopping is None:
                time.sleep(0.2)
            elif stopping.wait(0.2):  # a stop during the wait ends it now, not after the attempt's timeout
                raise KafkaTransportError("stopping while waiting for the training topic")


def _close_quietly(closable) -> None:
    if closable is None:
        return
    try:
        closable.close()
    except Exception as exc:  # noqa: BLE001 - replacing a broken client
        log.warning("error closing a client being replaced", extra={"error": str(exc)})
