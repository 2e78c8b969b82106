"""A training consumer stuck on a record a fresh consumer can fetch is re-created; the record is not skipped.

``StallWatch`` probes a partition whose records wait beyond the model's
offset while nothing arrives (consumers/service/stalls.py). The real-broker
test (tests/test_field_faults.py, 4) covers the record nobody can fetch: it is
dead-lettered and skipped. This covers the other outcome, which must not lose
anything: the probe fetches the record, so only the service's consumer was
stuck (``fetchable``); it is replaced at the model's offsets, every record is
learned once, and no dead letter is written. Memory transport; the first
training consumer returns nothing, ever.
"""
from __future__ import annotations

import json
import time
import uuid

from sgm.stream.kafka import KafkaConfig, KafkaTransportError, open_client
from tests.service_helpers import start_service, wait_for_documents
from tests.test_consumer_reset import FirstConsumerBroken
from tests.test_chaos import FlakyConsumer, memory_config, read_all


class StuckConsumer(FlakyConsumer):
    """Polls return nothing although records wait (a client stuck on a fetch)."""

    def poll(self, max_records: int = 500, timeout: float = 1.0):
        time.sleep(min(timeout, 0.01))
        return []


class FirstTrainingConsumerStuck(FirstConsumerBroken):
    def consumer(self, group_id=None, **kwargs):  # noqa: ANN001
        inner = self.inner.consumer(group_id, **kwargs)
        if group_id is None and not self.broken:
            self.broken += 1
            return StuckConsumer(inner, self.plan)
        return FlakyConsumer(inner, self.plan)


def test_a_stuck_consumer_on_a_fetchable_record_is_replaced_and_nothing_is_skipped(tmp_path):
    name = f"stall-{uuid.uuid4().hex[:8]}"
    cfg = memory_config(name, str(tmp_path), role="trainer", poison_timeout=1.0)
    plain = open_client("memory", KafkaConfig(bootstrap_servers=cfg.bootstrap_servers))
    plain.admin().create_topics([(cfg.train_topic, 1, 1), (cfg.dlq_topic, 1, 1)])
    producer = plain.producer()
    for i in range(20):
        producer.send(cfg.train_topic, json.dumps({"id": f"t{i}", "text": f"word{i % 3}", "labels": ["a"]}).encode())
    producer.flush()
    client = FirstTrainingConsumerStuck(plain, scoring=False)
    running = start_service(cfg, client)
    service = running.service
    try:
        wait_for_documents(service, 20)
    finally:
        running.halt()
    assert client.broken == 1
    assert len(service.model) == 20 and service.train_offsets == {0: 20}
    assert read_all(plain, cfg.dlq_topic) == []
    stalls = service.metrics.registry.get_sample_value
    assert stalls("sgm_partition_stalls_total", {"source": "train", "outcome": "fetchable"}) == 1
    assert stalls("sgm_partition_stalls_total", {"source": "train", "outcome": "skipped"}) in (None, 0.0)


class SilentBroker:
    """Connections whose training consumer is stuck at offset 0 and whose broker stops answering offset requests
    once the stall is noticed: the probe cannot tell a poison record from a broker that is down."""

    def __init__(self) -> None:
        self.answers, self.dropped = True, 0
        position = lambda tp: 0  # noqa: E731 - the stuck consumer never moves
        self.train_consumer = type("Stuck", (), {"position": staticmethod(position)})()

    def offsets_reader(self):
        if not self.answers:
            raise KafkaTransportError("broker not answering")
        raise AssertionError("the watch itself reads no offsets")

    def drop_offsets_reader(self) -> None:
        self.dropped += 1

    def replace_train_consumer(self, offsets) -> None:  # noqa: ANN001
        raise AssertionError("nothing was found out: the consumer stays")


def test_a_stall_while_the_broker_does_not_answer_skips_nothing(tmp_path, caplog):
    """The probe's inconclusive outcome (``probe_fetch`` returns None): no dead letter, no skip, no stall counted,
    and the watch probes again only after another ``poison_timeout`` (a frozen broker is not a poison record)."""
    import logging

    from sgm.consumers.prometheus import ServiceMetrics
    from sgm.consumers.service.checkpoint import ModelState
    from sgm.consumers.service.stalls import StallWatch
    from sgm.model import build_model

    cfg = memory_config(f"silent-{uuid.uuid4().hex[:8]}", str(tmp_path), role="trainer", poison_timeout=5.0)
    now = [100.0]
    connections, skipped = SilentBroker(), []
    metrics = ServiceMetrics("trainer")
    watch = StallWatch(cfg, ModelState(build_model({"model": "u_jm"})), connections, metrics,
                       lambda tp, offset, detail: skipped.append(offset), clock=lambda: now[0])
    watch.check({0: 3})  # records wait beyond offset 0: the stall's clock starts
    now[0] += 4.0
    watch.check({0: 3})  # not yet poison_timeout
    connections.answers = False
    now[0] += 2.0
    with caplog.at_level(logging.WARNING, logger="sgm.service"):
        watch.check({0: 3})
    assert skipped == [] and connections.dropped == 1
    assert any("probe inconclusive" in m for m in caplog.messages), caplog.messages
    stalls = metrics.registry.get_sample_value
    assert stalls("sgm_partition_stalls_total", {"source": "train", "outcome": "skipped"}) in (None, 0.0)
    caplog.clear()
    now[0] += 1.0
    with caplog.at_level(logging.WARNING, logger="sgm.service"):
        watch.check({0: 3})  # the stall's clock restarted at the probe: no second probe a second later
    assert not any("probing" in m for m in caplog.messages)


def test_a_scoring_skip_whose_commit_was_lost_is_committed_again_not_dead_lettered_again(tmp_path, monkeypatch):
    """Seen in a full-suite run (tests/test_output_limits.py): the commit past a skipped scoring record failed
    after the rebalance its broken consumer caused, the partition stalled again at the record, and it was
    probed and dead-lettered a second time. Now the watch remembers the offset it skipped: found stalled there
    again, it commits past it again (``commit_past``) without a probe or a second dead letter."""
    from sgm.consumers.prometheus import ServiceMetrics
    from sgm.consumers.service import stalls
    from sgm.stream.kafka import TopicPartition

    cfg = memory_config(f"lost-{uuid.uuid4().hex[:8]}", str(tmp_path), role="classifier", poison_timeout=5.0)
    now, probes, letters, commits = [100.0], [], [], []

    def probe(side, config, connections, metrics, tp, offset, stalled_for, skip):  # noqa: ANN001
        probes.append(offset)
        skip(tp, offset, "unfetchable")
        return "skipped"

    monkeypatch.setattr(stalls, "probe_stalled", probe)
    watch = stalls.ScoringStallWatch(cfg, None, ServiceMetrics("classifier"),
                                     lambda tp, offset, detail: letters.append(offset),
                                     lambda tp, offset: commits.append(offset), clock=lambda: now[0])
    tp = TopicPartition("score", 0)
    for _ in range(2):  # stalled at offset 0 with records waiting, twice: the commit past it never lands
        watch.check({tp: (0, 6)})
        now[0] += 6.0
        watch.check({tp: (0, 6)})
    assert probes == [0] and letters == [0]  # one probe, one dead letter
    assert commits == [0]  # the second stall: committed past again
    now[0] += 6.0
    watch.check({tp: (1, 6)})  # it moved on: nothing more
    assert probes == [0] and letters == [0] and commits == [0]
