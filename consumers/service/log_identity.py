"""Training-log identity: notice a training topic that was recreated or truncated under the model.

The model holds, per training partition, the next offset it has not applied
(docs/PROTOCOL.md). That position means something only in the log it came
from. When the topic is deleted and created again (by an operator, a producer
with auto-creation, a wiped cluster), the new log starts again at offset 0:
a consumer positioned at 3,000 is out of range, resets to the new log's start,
and every record below 3,000 would look like a redelivery and be skipped
silently. So the service checks the log's identity and never lets that pass:

* the topic id (KIP-516; a recreated topic gets a new one) against the one the
  model's snapshot recorded, where the client and broker report ids;
* the partition count against the one the model was built from;
* the log end below the model's position (a shorter new log, or a truncation);
* records delivered *below* the model's position: a consumer only goes back
  when its position fell out of the log.

It checks at start (before seeking), whenever records below the position
arrive, and every ``CHECK_INTERVAL`` seconds. A reset is reported (error log,
``sgm_training_log_resets_total{policy}``, alert ``SgmTrainingLogReset``) and
handled by the ``--on-training-log-reset`` policy, which the service carries
out (``loop.py``): ``rebuild`` the model from the new log, or ``stop``
training (the model stays as it was; ``sgm_training_stopped`` is 1).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from sgm.stream.kafka import KafkaTransportError, Record, TopicPartition

from ..config import ServiceConfig
from .checkpoint import ModelState
from .connections import Connections

log = logging.getLogger("sgm.service")

#: Seconds between checks of the topic id, partition count and log ends while running.
CHECK_INTERVAL = 10.0


@dataclass
class LogReset:
    """What made the service decide that the training log it knew is gone."""

    reason: str
    partitions: list[int] = field(default_factory=list)  # the training topic's partitions now
    topic_id: str | None = None  # the training topic's id now (None: unknown)


class TrainingLog:
    """Checks that the training topic is still the log the model's offsets refer to.

    Parameters
    ----------
    config : ServiceConfig
    state : ModelState
        The model's offsets and the identity of the log they belong to (``state.log``).
    connections : Connections
        The training consumer (ends, log starts) and an admin (topic id).
    """

    def __init__(self, config: ServiceConfig, state: ModelState, connections: Connections) -> None:
        self.config, self.state, self.connections = config, state, connections
        self.last_check = time.monotonic()

    def check(self, below: dict[int, int] | None = None) -> LogReset | None:
        """Compare the topic now with what the model knows; a :class:`LogReset` if it is another log.

        ``below``: partitions where records below the model's offset were just
        delivered (their lowest offset). Also records the topic's id and
        partition count as the model's once they are known and consistent.
        Kafka errors propagate (the caller retries).
        """
        self.last_check = time.monotonic()
        consumer = self.connections.offsets_reader()
        topic = self.config.train_topic
        known, offsets = self.state.log, self.state.train_offsets
        partitions = consumer.partitions_for(topic)
        if not partitions:
            return None  # the topic is gone for now: nothing to read, nothing to compare (checked again later)
        topic_id = self.connections.train_topic_id()
        if known.topic_id is not None and topic_id is not None and topic_id != known.topic_id:
            return LogReset(f"the training topic's id changed from {known.topic_id} to {topic_id}: it was deleted and "
                            "created again", partitions, topic_id)
        if known.partitions is not None and len(partitions) != known.partitions:
            return LogReset(f"the training topic has {len(partitions)} partitions, the model was built from "
                            f"{known.partitions}", partitions, topic_id)
        gone = [p for p in offsets if p not in partitions and offsets[p] > 0]
        if gone:
            return LogReset(f"partitions {gone} the model has applied records from no longer exist", partitions,
                            topic_id)
        tps = [TopicPartition(topic, p) for p in partitions if offsets.get(p, 0) > 0]
        if tps:
            ends = consumer.end_offsets(tps, timeout=5.0)
            short = {tp.partition: end for tp, end in ends.items() if end < offsets[tp.partition]}
            if short and (below is None or any(p in short for p in below)) and self._confirm_short(consumer, short):
                detail = ", ".join(f"partition {p}: log end {end} < model offset {offsets[p]}"
                                   for p, end in sorted(short.items()))
                return LogReset(f"the training log is shorter than what the model applied ({detail}): it was "
                                "recreated or truncated", partitions, topic_id)
        if below:
            # Records below the model's offsets arrived although the log reaches them: take them for
            # redeliveries (skipped, as before), but say so.
            log.warning("training records below the model's offsets were delivered; skipped as redeliveries",
                        extra={"topic": topic, "first_offsets": below, "train_offsets": offsets})
        known.topic_id = known.topic_id or topic_id
        known.partitions = len(partitions)
        return None

    def _confirm_short(self, consumer, short: dict[int, int]) -> bool:
        """A log end below the model's offset, read twice (Tansu can under-report an end once)."""
        time.sleep(0.2)
        topic = self.config.train_topic
        offsets = self.state.train_offsets
        again = consumer.end_offsets([TopicPartition(topic, p) for p in short], timeout=5.0)
        return any(end < offsets[tp.partition] for tp, end in again.items())

    def due(self) -> bool:
        return time.monotonic() - self.last_check >= CHECK_INTERVAL

    @staticmethod
    def below_offsets(records: list[Record], offsets: dict[int, int]) -> dict[int, int]:
        """Partitions whose records arrived below the model's offset: ``{partition: lowest such offset}``."""
        below: dict[int, int] = {}
        for record in records:
            if record.offset < offsets.get(record.partition, 0):
                below[record.partition] = min(below.get(record.partition, record.offset), record.offset)
        return below

    def log_starts(self, partitions: list[int]) -> dict[int, int]:
        """Where the new log starts, per partition (0 where it cannot be read)."""
        topic = self.config.train_topic
        try:
            starts = self.connections.offsets_reader().beginning_offsets([TopicPartition(topic, p) for p in partitions], timeout=5.0)
        except KafkaTransportError:
            return {p: 0 for p in partitions}
        return {tp.partition: int(offset) for tp, offset in starts.items()}
