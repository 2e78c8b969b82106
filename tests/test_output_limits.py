"""Outputs larger than the producer (or the output topic) accepts: dead-lettered, never rescored for ever.

Field walk-through, session 6: a model with thousands of long label names and ``--top-k 10000``
writes outputs over librdkafka's ``message.max.bytes`` (1,000,000). Their delivery fails for good
(``MSG_SIZE_TOO_LARGE``), so the batch was rewound and scored again without end: the scoring
partition stalled (48 rescorings in 30 s by hand), no dead letter, only ``score_flush`` errors.
Now the records whose outputs failed for their size are dead-lettered ``output_too_large`` at the
batch's next scoring, and the group moves on. Tansu does not enforce a topic's
``max.message.bytes``, so the producer's own limit stands in for it here.
"""
from __future__ import annotations

import time

import pytest

from sgm.stream.kafka import TopicPartition, open_client
from sgm.stream.records import ScoreRecord, TrainRecord, encode_score, encode_train
from tests.field_fault_helpers import dead_letters, field_config, outputs, produce, sample, wait_until
from tests.service_helpers import start_service

pytestmark = pytest.mark.kafka

LABELS = 7_000  # 7,000 labels of ~128 characters: an output of every label is ~1.2 MB


def _label(i: int) -> str:
    return f"L{i:05d}-" + "x" * 120


def test_an_output_over_the_size_limit_is_dead_lettered_and_the_partition_moves_on(kafka_broker, unique_name,
                                                                                   tmp_path):
    cfg = field_config(kafka_broker.bootstrap_servers, unique_name, tmp_path / "state", top_k=10_000)
    client = open_client("confluent", kafka_broker.config())
    running = start_service(cfg, client)
    try:
        produce(cfg.bootstrap_servers, cfg.train_topic,
                [encode_train(TrainRecord(id=f"t{i}", labels=(_label(i),), text=f"common word{i}"))
                 for i in range(LABELS)])
        wait_until(lambda: len(running.service.model) == LABELS, 60, f"{LABELS} learned")
        produce(cfg.bootstrap_servers, cfg.score_topic,
                [encode_score(ScoreRecord(id=f"q{i}", text=f"common word{i}")) for i in range(3)])
        letters = dead_letters(client, cfg.dlq_topic, 3, timeout=60)
        assert sorted((d.reason.value, d.topic, d.offset) for d in letters) == [
            ("output_too_large", cfg.score_topic, offset) for offset in range(3)]
        assert "can never be delivered" in letters[0].detail
        # counted once the batch is acknowledged and committed, just after its dead letters are flushed
        wait_until(lambda: sample(running.service, "sgm_records_rejected_total",
                                  {"reason": "output_too_large", "source": "score"}) == 3, 30,
                   "the three rejections counted")
        # the batch was scored once more, then committed: no rescoring without end
        errors = sample(running.service, "sgm_transport_errors_total", {"stage": "score_flush"})
        assert 1 <= errors <= 3
        time.sleep(2.0)
        assert sample(running.service, "sgm_transport_errors_total", {"stage": "score_flush"}) == errors
        assert running.service.scoring.oversized == {}  # forgotten once committed
        # the group committed past the three records: a restart does not meet them again
        with client.consumer(cfg.group) as consumer:
            assert consumer.committed([TopicPartition(cfg.score_topic, 0)]) == {TopicPartition(cfg.score_topic, 0): 3}
    finally:
        running.halt()


def test_a_scoring_record_too_large_to_fetch_is_skipped_with_a_dead_letter(kafka_broker, unique_name, tmp_path):
    # Session 6 by hand: a 3 MB scoring record with --max-fetch-bytes 2 MiB stalled its scoring partition for
    # good (lag 6, the records behind it never answered), while training has a skip path (test_field_faults 4)
    cfg = field_config(kafka_broker.bootstrap_servers, unique_name, tmp_path / "state", poison_timeout=3.0,
                       max_fetch_bytes=2 * 1024 * 1024)
    client = open_client("confluent", kafka_broker.config())
    running = start_service(cfg, client)
    try:
        produce(cfg.bootstrap_servers, cfg.train_topic,
                [encode_train(TrainRecord(id=f"t{i}", labels=("spam" if i % 2 else "ham",), text=f"word{i % 5} x"))
                 for i in range(20)])
        wait_until(lambda: len(running.service.model) == 20, 30, "20 learned")
        huge = encode_score(ScoreRecord(id="huge", text="a " * 1_500_000))  # 3 MB: over the fetch limit
        produce(cfg.bootstrap_servers, cfg.score_topic,
                [huge] + [encode_score(ScoreRecord(id=f"q{i}", text=f"word{i} x")) for i in range(5)],
                **{"message.max.bytes": 10_000_000})
        answered = outputs(client, cfg.output_topic, 5, timeout=90)
        assert sorted(o.id for o in answered) == [f"q{i}" for i in range(5)]
        letters = dead_letters(client, cfg.dlq_topic, 1)
        assert [(d.reason.value, d.topic, d.partition, d.offset) for d in letters] == [
            ("unfetchable", cfg.score_topic, 0, 0)]
        assert sample(running.service, "sgm_partition_stalls_total", {"source": "score", "outcome": "skipped"}) == 1
    finally:
        running.halt()
