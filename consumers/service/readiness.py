"""Readiness: a process serves ``/ready`` 200 only once its model has caught up with the training topic.

A classifier that starts (or rebuilds its model) while training records wait
in Kafka would answer scoring records with a model that holds a fraction of
them. So, with ``--wait-for-training`` (the default), the service reads the
training topic's end offsets when it connects: its *target*. Until the model
has applied the log up to the target (its offsets, or the consumer's position
past transaction markers, reach it), the process is not ready: ``/ready``
answers 503 with the reason, ``sgm_ready`` is 0 and the classifier does not
join the scoring group, so the scoring partitions go to replicas that are
ready (or wait in Kafka). Records produced after the start do not move the
target: a busy stream cannot keep a replica unready for ever.

Training stopped by ``--on-training-log-reset stop`` makes a process unready
too (its model no longer follows the log).
"""
from __future__ import annotations

import logging
import time

from sgm.stream.kafka import TopicPartition

from ..config import ServiceConfig
from ..prometheus import ServiceMetrics
from .checkpoint import ModelState

log = logging.getLogger("sgm.service")


class Readiness:
    """Whether the process is ready to score, and why not.

    Parameters
    ----------
    config : ServiceConfig
    state : ModelState
        The model's training offsets.
    metrics : ServiceMetrics
        ``sgm_ready``; its ``/ready`` endpoint asks :meth:`status`.
    """

    def __init__(self, config: ServiceConfig, state: ModelState, metrics: ServiceMetrics) -> None:
        self.config, self.state, self.metrics = config, state, metrics
        self.running = False
        self.target: dict[int, int] | None = None  # training end offsets as of the start (or the last rebuild)
        self.caught_up = not config.wait_for_training
        self.stopped: str | None = None  # why training stopped (then not ready)
        self.since = time.monotonic()
        metrics.readiness = self.status

    def status(self) -> tuple[bool, str]:
        if not self.running:
            return False, "connecting to Kafka"
        if self.stopped is not None:
            return False, f"training stopped: {self.stopped}"
        if not self.caught_up:
            return False, f"catching up with the training topic: offsets {self.state.train_offsets} of {self.target}"
        return True, ""

    def publish(self) -> None:
        self.metrics.ready.set(1 if self.status()[0] else 0)

    def start(self, connections) -> None:
        """The loop runs: take the training topic's end offsets now as the target (Kafka errors propagate)."""
        self.running = True
        self.aim(connections)

    def aim(self, connections) -> None:
        """Catch up with the training topic's end offsets as they are now (at start, and after a rebuild)."""
        self.since = time.monotonic()
        if not self.config.wait_for_training:
            self.caught_up = True
        else:
            tps = sorted(connections.train_consumer.assignment())
            ends = connections.offsets_reader().end_offsets(tps, timeout=10.0)
            self.target = {tp.partition: end for tp, end in ends.items()}
            self.caught_up = False
            self.progress(connections.train_consumer, polled=True)
        self.publish()

    def stop(self, reason: str) -> None:
        self.stopped = reason
        self.publish()

    def progress(self, consumer, polled: bool) -> bool:
        """After a training poll (``polled``: it returned records): True once the target is reached."""
        if self.caught_up:
            return True
        offsets, topic = self.state.train_offsets, self.config.train_topic
        behind = {p: end for p, end in (self.target or {}).items() if offsets.get(p, 0) < end}
        for p in list(behind):
            position = consumer.position(TopicPartition(topic, p)) if consumer is not None else None
            if position is not None and position >= behind[p]:
                del behind[p]  # what is left below the target delivers nothing (markers)
        if behind:
            return False
        self.caught_up = True
        log.info("caught up with the training topic; ready", extra={
            "train_offsets": offsets, "target": self.target, "seconds": round(time.monotonic() - self.since, 2)})
        self.publish()
        return True
