"""Gauges that cost a model walk or a broker request, refreshed by the loop every ``GAUGE_INTERVAL`` seconds.

Model sizes, pending snapshot records, training offsets, and the lag of
every training partition and of the scoring partitions assigned to this
process (docs/OBSERVABILITY.md). Counters and histograms move with the
records instead (``training.py``, ``scoring.py``).
"""
from __future__ import annotations

import logging
import time

from sgm.stream.kafka import KafkaTransportError

from ..config import ServiceConfig
from ..prometheus import ServiceMetrics
from .checkpoint import Checkpoint, ModelState
from .connections import Connections

log = logging.getLogger("sgm.service")

#: Seconds between refreshes of gauges that cost a broker request (lag) or a model walk (sizes).
GAUGE_INTERVAL = 2.0


class Gauges:
    """Refreshes the service's costly gauges (see the module docstring).

    Parameters
    ----------
    config : ServiceConfig
    state : ModelState
    checkpoint : Checkpoint
        Pending snapshot records; positions of acknowledged scoring batches.
    connections : Connections
        Both consumers: assignments, end and committed offsets.
    metrics : ServiceMetrics
    """

    def __init__(self, config: ServiceConfig, state: ModelState, checkpoint: Checkpoint, connections: Connections,
                 metrics: ServiceMetrics) -> None:
        self.config, self.state, self.checkpoint, self.connections, self.metrics = (
            config, state, checkpoint, connections, metrics)
        self.last_refresh = 0.0
        self.train_ends: dict[int, int] = {}  # the training partitions' end offsets at the last refresh
        self.score_positions: dict = {}  # assigned scoring partition -> (position, end offset) at the last refresh

    def due(self, now: float) -> bool:
        return now - self.last_refresh >= GAUGE_INTERVAL

    def refresh(self) -> None:
        metrics, model, offsets = self.metrics, self.state.model, self.state.train_offsets
        train_consumer, score_consumer = self.connections.train_consumer, self.connections.score_consumer
        self.last_refresh = time.time()
        metrics.refresh_model(model.stats(), model.memory_bytes())
        metrics.refresh_snapshot(self.checkpoint.pending)
        # Every assigned training partition, also before its first record (a stuck trainer shows lag from zero).
        self.train_ends = {}
        train_tps = sorted(train_consumer.assignment()) if train_consumer is not None else []
        metrics.set_training_offsets({tp.partition: offsets.get(tp.partition, 0) for tp in train_tps})
        try:
            if train_tps:
                ends = self.connections.offsets_reader().end_offsets(train_tps, timeout=2.0)
                self.train_ends = {tp.partition: end for tp, end in ends.items()}
                metrics.set_lag("train", self.config.train_topic,
                                {tp.partition: end - offsets.get(tp.partition, 0) for tp, end in ends.items()})
            if score_consumer is not None:
                acknowledged = self.checkpoint.acknowledged
                assigned = sorted(score_consumer.assignment())
                for tp in list(acknowledged):
                    if tp not in assigned:  # moved to another replica: its position here is stale from now on
                        del acknowledged[tp]
                lags, self.score_positions = {}, {}
                if assigned:
                    # the offsets reader, which never fetches: a poison record breaks the fetching consumer's link
                    for tp, end in self.connections.offsets_reader().end_offsets(assigned, timeout=2.0).items():
                        position = acknowledged.get(tp)
                        if position is None:
                            position = (score_consumer.committed([tp], timeout=2.0).get(tp) or 0)
                        lags[tp.partition] = end - position
                        self.score_positions[tp] = (position, end)
                metrics.set_lag("score", self.config.score_topic, lags)
        except KafkaTransportError as exc:
            self.connections.drop_offsets_reader()
            log.debug("lag refresh failed", extra={"error": str(exc)})
