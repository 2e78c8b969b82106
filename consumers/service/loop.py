"""The service loop (``sgm serve``): connect, step, retry; the parts that do each job are wired here.

One :class:`Service` is one process's loop around one model. Depending on its
role it trains (``training.py``), scores (``scoring.py``) or both; its Kafka
handles are in ``connections.py``, snapshots and commits in
``checkpoint.py``, dead letters in ``dead_letters.py``, the costly gauges in
``gauges.py``, and what a Kafka error does in ``retry.py``.

The commit protocol, step by step, is in ``docs/PROTOCOL.md``. In short:
training records are applied in log order and the next offset per partition is
kept *inside* the model snapshot, so restoring a snapshot and seeking there
applies every record exactly once; scoring offsets are committed only after the
outputs of the batch are acknowledged by the broker (at least once, outputs
carry the input id).
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from sgm.stream.kafka import Client, KafkaTransportError, Record, open_client
from sgm.stream.records import DEFAULT_LIMITS
from sgm.stream.snapshot_store import SnapshotStore

from ..config import ServiceConfig
from ..prometheus import ServiceMetrics
from .checkpoint import Checkpoint, ModelState, restore
from .connections import Connections
from .dead_letters import DeadLetters
from .gauges import Gauges
from .housekeeping import HeapFreezer, freeze_long_lived_heap
from .kernels import CompileLog
from .prequential import RecentPredictions
from .retry import RESET_AFTER_ERRORS, RETRY_BACKOFF_MIN, KafkaErrors, next_backoff
from .scoring import Scoring
from .training import Training

log = logging.getLogger("sgm.service")


class Service:
    """One ``sgm serve`` process: trainer, classifier, or both around one model.

    Parameters
    ----------
    config : ServiceConfig
    client : stream.kafka.Client, optional
        Defaults to ``open_client(config.client, config.kafka())``.

    Examples
    --------
    >>> import tempfile
    >>> from sgm.stream.kafka import KafkaConfig
    >>> config = ServiceConfig(bootstrap_servers="memory://doc-service", client="memory", train_topic="doc-train",
    ...                        score_topic="doc-score", output_topic="doc-out", dlq_topic="doc-dlq",
    ...                        state_dir=tempfile.mkdtemp(), metrics_address="", model="u_jm")
    >>> client = open_client("memory", KafkaConfig(bootstrap_servers=config.bootstrap_servers))
    >>> service = Service(config, client=client)
    >>> service.start()
    >>> producer = client.producer()
    >>> producer.send("doc-train", b'{"id": "m1", "labels": ["spam"], "text": "cheap pills"}')
    >>> producer.send("doc-score", b'{"id": "q1", "text": "pills"}'); producer.flush()
    >>> while service.step():
    ...     pass
    >>> service.train_offsets, len(service.model)
    ({0: 1}, 1)
    >>> service.close()
    """

    def __init__(self, config: ServiceConfig, client: Client | None = None) -> None:
        self.config = config
        self.client = client or open_client(config.client, config.kafka())
        self.metrics = ServiceMetrics(config.role)
        self.limits = DEFAULT_LIMITS
        self.store = SnapshotStore(config.state_dir, keep=config.snapshot_keep, max_bytes=config.max_snapshot_bytes)
        self.state = ModelState()  # the model and its training offsets, restored at start
        self.compile_log: CompileLog | None = None  # says when the first batches wait for numba (kernels.py)
        self.heap = HeapFreezer()  # what was learned leaves the garbage collector's view (housekeeping.py)
        self.metrics_address: tuple[str, int] | None = None
        self.started = threading.Event()
        self.errors = KafkaErrors(self.metrics.transport_errors)
        self.connections = Connections(self.client, config)
        self.checkpoint = Checkpoint(config, self.state, self.store, self.metrics, self.connections, self.errors)
        self.connections.on_rejoin = self.checkpoint.acknowledged.clear  # positions of another membership
        self.dead_letters = DeadLetters(config, self.connections, self.errors)
        recent = RecentPredictions(self.metrics.record_feedback)
        self.training = Training(config, self.state, self.checkpoint, self.dead_letters, recent, self.metrics,
                                 self.connections, self.limits)
        self.scoring = Scoring(config, self.state, self.connections, self.checkpoint, self.dead_letters, recent,
                               self.metrics, self.errors, self.limits)
        self.gauges = Gauges(config, self.state, self.checkpoint, self.connections, self.metrics)

    # ------------------------------------------------------------------ what callers read
    @property
    def model(self):
        return self.state.model

    @property
    def train_offsets(self) -> dict[int, int]:
        return self.state.train_offsets

    @property
    def producer(self):
        return self.connections.producer

    @producer.setter
    def producer(self, producer) -> None:  # tests wrap it to inject delivery failures
        self.connections.producer = producer

    @property
    def train_consumer(self):
        return self.connections.train_consumer

    @property
    def score_consumer(self):
        return self.connections.score_consumer

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Restore the model, create topics, open consumers/producer, expose metrics.

        The snapshot is checked first: a corrupt or oversized one stops the
        process before it touches Kafka. :meth:`run` retries the Kafka part
        with backoff; a direct call raises :class:`KafkaTransportError`.
        """
        self._watch_compilation()
        self._restore()
        self._open_metrics_endpoint()
        self._connect()
        self._serve_metrics()
        freeze_long_lived_heap()

    def run(self, stop: threading.Event, *, idle_exit: float | None = None) -> None:
        """Loop until ``stop`` is set (or, with ``idle_exit``, after that many idle seconds).

        Kafka errors (:class:`KafkaTransportError`: timeouts, a frozen or
        unreachable broker, failed deliveries or commits) do not end the loop:
        each is logged with its stage, counted in ``sgm_transport_errors_total``
        and retried after a backoff (0.1 s doubling to 5 s). Training stays
        exactly once (the model and its offsets only move together), scoring
        at least once. A bad snapshot or a configuration mismatch still stops
        the process at start, as does any other exception (a bug).
        """
        errors = self.errors
        try:
            self._watch_compilation()
            if not self.started.is_set():
                self._restore()
                self._open_metrics_endpoint()
                self._retry(stop, self._connect)
                if stop.is_set():
                    return
                self._serve_metrics()
                freeze_long_lived_heap()
            idle_since = time.monotonic()
            backoff = RETRY_BACKOFF_MIN
            while not stop.is_set():
                try:
                    worked = self.step()
                except KafkaTransportError as exc:
                    errors.in_row += 1
                    errors.report(errors.stage, exc, retry_in=backoff)
                    if errors.in_row % RESET_AFTER_ERRORS == 0:
                        self._reset_consumer(errors.stage)
                    stop.wait(backoff)
                    backoff = next_backoff(backoff)
                    continue
                errors.in_row = 0
                backoff = RETRY_BACKOFF_MIN
                if worked:
                    idle_since = time.monotonic()
                elif idle_exit is not None and time.monotonic() - idle_since > idle_exit:
                    break
        finally:
            self.close()

    def close(self) -> None:
        """Snapshot, commit, leave the group and release everything (graceful shutdown)."""
        if self.compile_log is not None:
            self.compile_log.close()
            self.compile_log = None
        try:
            self.checkpoint.final_snapshot()
        finally:
            self.checkpoint.final_commit()
            self.connections.close()
            self.metrics.up.labels(self.config.role).set(0)
            self.metrics.close()

    def _restore(self) -> None:
        if self.state.model is None:
            restored = restore(self.config, self.store, self.metrics)
            self.state.model, self.state.train_offsets = restored.model, restored.train_offsets

    def _watch_compilation(self) -> None:
        if self.compile_log is None:
            self.compile_log = CompileLog()

    def _connect(self) -> None:
        self.errors.stage = "start"
        self.connections.connect(self.state.train_offsets)

    def _open_metrics_endpoint(self) -> None:
        # Before Kafka: a process retrying an unreachable broker is still scraped, with sgm_up 0 and
        # sgm_transport_errors_total{stage="start"} rising, instead of looking like a dead target.
        if self.metrics_address is None:
            self.metrics_address = self.metrics.serve(self.config.metrics_address)
            self.metrics.up.labels(self.config.role).set(0)

    def _serve_metrics(self) -> None:
        cfg = self.config
        self._open_metrics_endpoint()
        self.metrics.up.labels(cfg.role).set(1)
        log.info("service started", extra={"role": cfg.role, "model": self.model.spec.name, "documents": len(self.model),
                                           "train_offsets": self.train_offsets, "metrics": self.metrics_address})
        self.started.set()

    def _retry(self, stop: threading.Event, action: Callable[[], None]) -> None:
        """Run ``action`` until it succeeds or ``stop`` is set, backing off on Kafka errors."""
        backoff = RETRY_BACKOFF_MIN
        while not stop.is_set():
            try:
                action()
                return
            except KafkaTransportError as exc:
                self.errors.report(self.errors.stage, exc, retry_in=backoff)
                self.connections.close_consumers()
                stop.wait(backoff)
                backoff = next_backoff(backoff)

    def _reset_consumer(self, stage: str) -> None:
        """Replace the consumer of a stage that keeps failing (a fatal client error does not heal)."""
        connections = self.connections
        try:
            if stage == "train_poll" and connections.train_consumer is not None:
                connections.replace_train_consumer(self.state.train_offsets)
            elif stage in ("score_poll", "score_rewind") and connections.score_consumer is not None:
                connections.rejoin()
            else:
                return
            log.warning("consumer re-created after repeated errors", extra={"stage": stage})
        except KafkaTransportError as exc:
            self.errors.report(stage, exc)

    # ------------------------------------------------------------------ the loop
    def step(self) -> bool:
        """One round: apply available training records, then score one batch."""
        cfg, connections, errors = self.config, self.connections, self.errors
        worked = False
        if connections.train_consumer is None:  # a reset failed half-way: open it again
            errors.stage = "train_poll"
            connections.open_train_consumer(self.state.train_offsets)
        if cfg.classifies and connections.score_consumer is None:
            errors.stage = "score_poll"
            connections.open_score_consumer()
        if self.dead_letters.unflushed:
            self.dead_letters.flush_training()
        errors.stage = "train_poll"
        score_consumer = connections.score_consumer
        records = connections.train_consumer.poll(cfg.max_poll_records,
                                                  timeout=0.0 if score_consumer else cfg.poll_timeout)
        if records:
            self.training.apply(records)
            self.heap.learned(len(records))
            worked = True
        if score_consumer is not None:
            errors.stage = "score_poll"
            records = score_consumer.poll(cfg.max_poll_records, timeout=0.0 if worked else cfg.poll_timeout)
            if records:
                self.scoring.score_batch(records)
                worked = True
            elif self.checkpoint.uncommitted:
                self.checkpoint.commit({})  # retry a commit that failed earlier
        now = time.time()
        if self.checkpoint.snapshot_due(now):
            self.checkpoint.snapshot()
        if self.gauges.due(now):
            self.gauges.refresh()
        if self.compile_log is not None:
            self.compile_log.report()
        return worked

    # ------------------------------------------------------------------ entry points of the parts
    def apply_training(self, records: list[Record]) -> None:
        """Apply training records in log order; each offset at most once (see docs/PROTOCOL.md)."""
        self.training.apply(records)

    def score_batch(self, records: list[Record]) -> None:
        """Score, write outputs and dead letters, wait for acks, then commit the batch."""
        self.scoring.score_batch(records)

    def snapshot(self) -> None:
        """Write the model with its training offsets, atomically."""
        self.checkpoint.snapshot()

    def refresh_gauges(self) -> None:
        self.gauges.refresh()
