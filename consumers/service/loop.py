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
import os
import threading
import time
from typing import Callable

from sgm.model import build_model
from sgm.stream.kafka import Client, KafkaTransportError, Record, open_client
from sgm.stream.records import DEFAULT_LIMITS
from sgm.stream.snapshot_store import SnapshotStore, StateDirInUse

from ..config import ServiceConfig
from ..prometheus import ServiceMetrics
from .checkpoint import Checkpoint, LogIdentity, ModelState, restore
from .connections import Connections
from .dead_letters import DeadLetters
from .gauges import Gauges
from .housekeeping import HeapFreezer, freeze_long_lived_heap
from .kernels import CompileLog
from .log_identity import LogReset, TrainingLog
from .prequential import RecentPredictions
from .readiness import Readiness
from .retry import RESET_AFTER_ERRORS, RETRY_BACKOFF_MIN, KafkaErrors, next_backoff
from .scoring import Scoring
from .stalls import ScoringStallWatch, StallWatch
from .training import Training

log = logging.getLogger("sgm.service")


#: Seconds one attempt to connect may wait (topic creation, metadata) before it counts as failed and is retried.
ATTEMPT_TIMEOUT = 15.0


class StartupError(RuntimeError):
    """The process cannot start as configured (``sgm serve`` prints it on one line and exits 2).

    Examples
    --------
    >>> import socket, tempfile
    >>> with socket.socket() as taken, tempfile.TemporaryDirectory() as folder:
    ...     taken.bind(("127.0.0.1", 0)); taken.listen()
    ...     service = Service(ServiceConfig(client="memory", bootstrap_servers="memory://startup-doc", state_dir=folder,
    ...                                     metrics_address=f"127.0.0.1:{taken.getsockname()[1]}"))
    ...     try:
    ...         service.prepare()  # restore, check the state directory, open the metrics endpoint: no Kafka yet
    ...     except StartupError as exc:
    ...         print(exc)
    ...     finally:
    ...         service.metrics.close()
    cannot serve metrics on --metrics-address '127.0.0.1:...': Address already in use
    """


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
        self.readiness = Readiness(config, self.state, self.metrics)
        self.training_log = TrainingLog(config, self.state, self.connections)
        self.training.on_below = self._records_below_offsets
        self.training.on_fault = self._reload_after_fault
        self.stalls = StallWatch(config, self.state, self.connections, self.metrics, self.training.skip_unfetchable)
        self.score_stalls = ScoringStallWatch(config, self.connections, self.metrics, self.scoring.skip_unfetchable,
                                              self.scoring.commit_past)
        self.exit_status = 0  # 1 once a snapshot needed at shutdown could not be written

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
    def prepare(self) -> None:
        """Everything that needs no Kafka: restore the model, check the state directory, open the metrics endpoint.

        A corrupt or oversized snapshot, a snapshot of another configuration, a
        state directory that cannot be written, an endpoint that cannot be
        bound: each raises here (``SnapshotError``, ``ConfigMismatch``,
        :class:`StartupError`) before the process touches Kafka.
        """
        try:  # one writer per state directory: a second service on it stops here, before reading anything
            self.store.claim()
        except StateDirInUse as exc:
            raise StartupError(str(exc)) from None
        self._restore()
        self._check_state_dir()
        try:
            self._open_metrics_endpoint()
        except OSError as exc:
            raise StartupError(f"cannot serve metrics on --metrics-address {self.config.metrics_address!r}: "
                               f"{exc.strerror or exc}") from None

    def start(self) -> None:
        """Restore the model, create topics, open consumers/producer, expose metrics.

        The snapshot is checked first: a corrupt or oversized one stops the
        process before it touches Kafka. :meth:`run` retries the Kafka part
        with backoff; a direct call raises :class:`KafkaTransportError`.
        """
        self._watch_compilation()
        self.prepare()
        self._connect()
        self._serve_metrics()
        freeze_long_lived_heap()

    def run(self, stop: threading.Event, *, idle_exit: float | None = None) -> int:
        """Loop until ``stop`` is set (or, with ``idle_exit``, after that many idle seconds); the exit status.

        Kafka errors (:class:`KafkaTransportError`: timeouts, a frozen or
        unreachable broker, failed deliveries or commits) do not end the loop:
        each is logged with its stage, counted in ``sgm_transport_errors_total``
        and retried after a backoff (0.1 s doubling to 5 s); at start they are
        retried until ``--connect-timeout`` passes (:class:`StartupError`).
        Training stays exactly once (the model and its offsets only move
        together), scoring at least once. A bad snapshot or a configuration
        mismatch still stops the process at start, as does any other exception
        (a bug). Returns 0, or 1 when the snapshot needed at shutdown failed.
        """
        errors = self.errors
        try:
            self._watch_compilation()
            if not self.started.is_set():
                self.prepare()
                self.connections.stopping = stop  # a stop ends a start attempt's waits at once
                self._retry(stop, self._connect, deadline=self.config.connect_timeout)
                if stop.is_set():
                    return self.exit_status
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
        return self.exit_status

    def close(self) -> None:
        """Snapshot, commit, leave the group and release everything (graceful shutdown)."""
        self.readiness.running = False
        if self.compile_log is not None:
            self.compile_log.close()
            self.compile_log = None
        try:
            if not self.checkpoint.final_snapshot():
                self.exit_status = 1
                log.error("final snapshot failed; on restart the records since the last snapshot are read again "
                          "from Kafka", extra={"state_dir": self.config.state_dir})
        finally:
            self.checkpoint.final_commit()
            self.connections.close()
            self.metrics.up.labels(self.config.role).set(0)
            self.metrics.ready.set(0)
            self.metrics.close()
            self.store.release()

    def _restore(self) -> None:
        if self.state.model is None:
            restored = restore(self.config, self.store, self.metrics)
            # the log identity too: without it a recreated topic already longer than the model goes unnoticed
            self.state.model, self.state.train_offsets, self.state.log = (restored.model, restored.train_offsets,
                                                                          restored.log)

    def _reload_after_fault(self) -> None:
        """Learning raised (Training.recover): the model may be half changed. Take the last snapshot's model and
        offsets (an empty model at offset 0 without one) and read the training topic again from there."""
        restored = restore(self.config, self.store, self.metrics)
        self.state.model, self.state.train_offsets, self.state.log = (restored.model, restored.train_offsets,
                                                                      restored.log)
        self.checkpoint.half_applied = False  # the model and its offsets agree again
        self.checkpoint.pending = 0
        self.connections.replace_train_consumer(self.state.train_offsets)
        log.warning("model reloaded from its last snapshot after a fault while learning",
                    extra={"documents": len(self.model), "train_offsets": self.state.train_offsets})

    def _watch_compilation(self) -> None:
        if self.compile_log is None:
            self.compile_log = CompileLog()

    def _check_state_dir(self) -> None:
        """Snapshots must be writable: find out now, not at the first snapshot (or the final one)."""
        probe = self.store.directory / f".sgm-write-check.{os.getpid()}"
        try:
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise StartupError(f"--state-dir {str(self.store.directory)!r} is not writable: {exc.strerror or exc}") from None

    def _connect(self, timeout: float = 30.0) -> None:
        """Open everything, check the training log is the one the model knows, and aim for catching up."""
        cfg, connections = self.config, self.connections
        self.errors.stage = "start"
        connections.connect(self.state.train_offsets, score=False, timeout=timeout)
        if self.readiness.stopped is None:
            reset = self.training_log.check()
            if reset is not None:
                self._on_log_reset(reset)
        if self.readiness.stopped is None:
            self.readiness.start(connections)
        else:
            self.readiness.running = True
        self._open_scoring_when_ready()

    def _open_scoring_when_ready(self) -> None:
        if self.config.classifies and self.connections.score_consumer is None and (
                self.readiness.caught_up or self.readiness.stopped is not None):
            self.errors.stage = "score_poll"
            self.connections.open_score_consumer()

    # ------------------------------------------------------------------ the training log's identity
    def _records_below_offsets(self, below: dict[int, int]) -> bool:
        """Records below the model's offsets arrived: the log may have been recreated (log_identity.py)."""
        self.errors.stage = "train_check"
        try:
            reset = self.training_log.check(below)
        except KafkaTransportError:
            # Undecided: read the batch again later from the model's offsets, never skip it unjudged.
            self.connections.drop_offsets_reader()
            self.connections.replace_train_consumer(self.state.train_offsets)
            raise
        if reset is None:
            return False
        self._on_log_reset(reset)
        return True

    def _on_log_reset(self, reset: LogReset) -> None:
        """The training topic is another log than the model's offsets refer to: follow the configured policy."""
        cfg, connections = self.config, self.connections
        policy = cfg.on_training_log_reset
        self.metrics.training_log_resets.labels(policy).inc()
        log.error("training log reset: the training topic is not the log the model was built from", extra={
            "topic": cfg.train_topic, "reason": reset.reason, "policy": policy, "train_offsets": self.state.train_offsets,
            "documents": len(self.model), "partitions": reset.partitions})
        if policy == "stop":
            connections.close_train_consumer()
            self.metrics.training_stopped.set(1)
            self.readiness.stop(reset.reason)
            log.error("training stopped (--on-training-log-reset stop): the model keeps what it learned and "
                      "serves; restart with --on-training-log-reset rebuild, or with an empty --state-dir, to learn "
                      "the new log", extra={"topic": cfg.train_topic})
            return
        self.training.forget_faults()
        aside = self.store.set_aside(f"before-reset-{time.strftime('%Y%m%dT%H%M%S')}")
        starts = self.training_log.log_starts(reset.partitions)
        self.state.model = build_model(cfg.model_config())
        self.state.train_offsets = {p: start for p, start in starts.items() if start > 0}
        self.state.log = LogIdentity(reset.topic_id, len(reset.partitions))
        self.checkpoint.pending = 0
        connections.replace_train_consumer(self.state.train_offsets)
        log.warning("rebuilding the model from the new training log", extra={
            "topic": cfg.train_topic, "train_offsets": self.state.train_offsets, "old_snapshots": aside})
        if self.readiness.running:
            self.readiness.aim(connections)
            if cfg.wait_for_training and connections.score_consumer is not None:
                connections.close_score_consumer()  # answer with the rebuilt model only once it caught up

    def _open_metrics_endpoint(self) -> None:
        # Before Kafka: a process retrying an unreachable broker is still scraped, with sgm_up 0 and
        # sgm_transport_errors_total{stage="start"} rising, instead of looking like a dead target.
        if self.metrics_address is None:
            self.metrics_address = self.metrics.serve(self.config.metrics_address)
            self.metrics.up.labels(self.config.role).set(0)
            if self.metrics_address is not None:
                log.info("metrics endpoint", extra={"metrics": self.metrics_address})

    def _serve_metrics(self) -> None:
        cfg = self.config
        self._open_metrics_endpoint()
        self.metrics.up.labels(cfg.role).set(1)
        log.info("service started", extra={"role": cfg.role, "model": self.model.spec.name, "documents": len(self.model),
                                           "train_offsets": self.train_offsets, "metrics": self.metrics_address})
        self.started.set()

    def _retry(self, stop: threading.Event, action: Callable[[float], None], deadline: float | None = None) -> None:
        """Run ``action(timeout)`` until it succeeds or ``stop`` is set, backing off on Kafka errors (one log line
        each); ``timeout`` bounds one attempt's waits.

        With a ``deadline`` (seconds), give up once it has passed: :class:`StartupError`.
        """
        backoff = RETRY_BACKOFF_MIN
        started = time.monotonic()
        while not stop.is_set():
            try:
                left = None if deadline is None else deadline - (time.monotonic() - started)
                action(ATTEMPT_TIMEOUT if left is None else max(1.0, min(ATTEMPT_TIMEOUT, left)))
                return
            except KafkaTransportError as exc:
                if stop.is_set():  # the attempt ended because the process is stopping: not an error to report
                    self.connections.close_consumers()
                    break
                self.errors.in_row += 1
                if deadline is not None and time.monotonic() - started + backoff > deadline:
                    raise StartupError(f"could not reach Kafka at {self.config.bootstrap_servers} within "
                                       f"--connect-timeout {deadline:g} s: {exc}") from None
                self.errors.report(self.errors.stage, exc, retry_in=backoff)
                self.connections.close_consumers()
                stop.wait(backoff)
                backoff = next_backoff(backoff)
        self.errors.in_row = 0

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
        training = self.readiness.stopped is None
        if training and connections.train_consumer is None:  # a reset failed half-way: open it again
            errors.stage = "train_poll"
            connections.open_train_consumer(self.state.train_offsets)
        self._open_scoring_when_ready()
        if self.dead_letters.unflushed:
            self.dead_letters.flush_training()
        score_consumer = connections.score_consumer
        if training:
            errors.stage = "train_poll"
            train_consumer = connections.train_consumer
            records = train_consumer.poll(cfg.max_poll_records, timeout=0.0 if score_consumer else cfg.poll_timeout)
            if records:
                self.training.apply(records)
                self.heap.learned(len(records))
                worked = True
            if not self.readiness.caught_up and self.readiness.progress(connections.train_consumer, bool(records)):
                self._open_scoring_when_ready()
            if self.training_log.due():
                errors.stage = "train_check"
                try:
                    reset = self.training_log.check()
                    partitions = set(connections.offsets_reader().partitions_for(cfg.train_topic))
                except KafkaTransportError:
                    connections.drop_offsets_reader()
                    raise
                if reset is not None:
                    self._on_log_reset(reset)
                elif partitions and {tp.partition for tp in connections.train_consumer.assignment()} != partitions:
                    connections.replace_train_consumer(self.state.train_offsets)  # partitions were added
        elif not score_consumer:
            time.sleep(cfg.poll_timeout)  # training stopped and nothing to score: do not spin
        score_consumer = connections.score_consumer  # a training log reset may have closed it meanwhile
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
            ends = self.gauges.train_ends
            if training and ends:
                offsets = self.state.train_offsets
                if any(end < offsets.get(p, 0) for p, end in ends.items()):
                    self.training_log.last_check = 0.0  # a log shorter than the model: check its identity now
                else:
                    self.stalls.check(ends)
            if connections.score_consumer is not None and self.gauges.score_positions:
                errors.stage = "score_poll"
                self.score_stalls.check(self.gauges.score_positions)
        self.readiness.publish()
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
