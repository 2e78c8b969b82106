"""A consumer whose every poll fails is replaced after ``RESET_AFTER_ERRORS`` errors in a row, and nothing is lost.

Some client errors are fatal to the client object and never heal (a consumer
whose connection broke on a poison fetch, a fenced member): retrying its poll
forever would stall the service. The run loop closes and re-creates the
consumer of the failing stage (``Service._reset_consumer``): the training
consumer at the model's offsets (nothing skipped, nothing twice), the scoring
consumer by rejoining the group (from the last commit). Memory transport; the
first consumer of the stage is broken for good, every later one works.
"""
from __future__ import annotations

import json
import time
import uuid

import pytest

from sgm.consumers.service.retry import RESET_AFTER_ERRORS
from sgm.stream.kafka import KafkaConfig, KafkaTransportError, open_client
from sgm.stream.records import parse_output
from tests.service_helpers import read_topic, start_service, wait_for_documents
from tests.test_chaos import FlakyClient, FlakyConsumer, memory_config


class NoFaults:
    enabled = True

    def fail(self, operation: str) -> bool:
        return False


class BrokenConsumer(FlakyConsumer):
    """Every poll fails, as a client whose connection is gone for good."""

    def poll(self, max_records: int = 500, timeout: float = 1.0):
        time.sleep(min(timeout, 0.01))
        raise KafkaTransportError("injected: this consumer is broken for good")


class FirstConsumerBroken(FlakyClient):
    """The first consumer of the chosen kind (the training one: group-less; the scoring one: in a group) is broken."""

    def __init__(self, inner, scoring: bool) -> None:
        super().__init__(inner, NoFaults())
        self.scoring, self.broken = scoring, 0

    def consumer(self, group_id=None, **kwargs):  # noqa: ANN001
        inner = self.inner.consumer(group_id, **kwargs)
        if (group_id is not None) == self.scoring and not self.broken:
            self.broken += 1
            return BrokenConsumer(inner, self.plan)
        return FlakyConsumer(inner, self.plan)


@pytest.mark.parametrize("stage", ["train_poll", "score_poll"])
def test_a_consumer_that_keeps_failing_is_replaced(tmp_path, stage):
    name = f"reset-{uuid.uuid4().hex[:8]}"
    cfg = memory_config(name, str(tmp_path), score_partitions=1)
    plain = open_client("memory", KafkaConfig(bootstrap_servers=cfg.bootstrap_servers))
    client = FirstConsumerBroken(plain, scoring=stage == "score_poll")
    running = start_service(cfg, client)
    service = running.service
    producer = plain.producer()
    for i in range(30):
        producer.send(cfg.train_topic, json.dumps({"id": f"t{i}", "text": f"word{i % 3} common",
                                                   "labels": [f"c{i % 3}"]}).encode())
    for i in range(10):
        producer.send(cfg.score_topic, json.dumps({"id": f"s{i}", "text": "word1 common"}).encode())
    producer.flush()
    try:
        outputs = read_topic(plain, cfg.output_topic, lambda records: len(records) >= 10, timeout=60.0)
        wait_for_documents(service, 30)
    finally:
        running.halt()
    assert client.broken == 1
    assert len(service.model) == 30 and service.train_offsets == {0: 30}  # every training record once
    assert sorted(parse_output(r.value).id for r in outputs) == [f"s{i}" for i in range(10)]
    errors = service.metrics.registry.get_sample_value("sgm_transport_errors_total", {"stage": stage})
    assert errors == RESET_AFTER_ERRORS  # replaced at the 5th error in a row; the new consumer never failed
