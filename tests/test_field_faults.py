"""The field-fault suite, part 1: faults met in the field, each through the real broker (issue #15).

One test per finding of the issue (numbered as there); part 2 (process-level
faults: broker down at start, memory, disk full, start-up mistakes) is in
tests/test_field_faults_process.py, the exact totals in tests/test_exact_totals.py.
Every test here failed on the code before the fix (docs/RELIABILITY.md,
"Field faults", says how each failed).

The broker is the session's (tests/kafka_fixtures.py: Tansu unless Docker or
KAFKA_BOOTSTRAP_SERVERS say otherwise); services run in-process (a thread),
each with its own topics.
"""
from __future__ import annotations

import time

import pytest

from sgm.stream.broker import EmbeddedBroker
from sgm.stream.kafka import KafkaConfig, open_client
from sgm.stream.records import ScoreRecord, encode_score
from tests.field_fault_helpers import (
    dead_letters,
    field_config,
    learn,
    outputs,
    produce,
    ready_status,
    sample,
    wait_until,
)
from tests.service_helpers import start_service

pytestmark = pytest.mark.kafka

PROBES = ["hamw1 hamcommon shared1", "spamw3 spamw2 spamcommon", "shared0 word3", "hamw4 spamw4 shared2"]


def _posteriors(model) -> list[dict]:
    return model.predict_proba_many(PROBES)


# ------------------------------------------------------------------------------ 1. a future timestamp
def test_1_a_record_from_the_future_never_moves_the_model_clock(kafka_broker, unique_name, tmp_path):
    """One learn without ``ts`` whose Kafka CreateTime is 2100-01-01 used to expire a decayed model at once."""
    cfg = field_config(kafka_broker.bootstrap_servers, unique_name, tmp_path / "state", half_life=604800.0)
    client = open_client("confluent", kafka_broker.config())
    running = start_service(cfg, client)
    try:
        produce(cfg.bootstrap_servers, cfg.train_topic, [learn(i) for i in range(300)])
        wait_until(lambda: len(running.service.model) >= 300, 30, "300 learned")
        # the batch finished too: the model is read from this thread, and mid-batch its totals lag its documents
        wait_until(lambda: not running.service.checkpoint.half_applied, 30, "the batch applied")
        before, documents = _posteriors(running.service.model), len(running.service.model)
        running.service.refresh_gauges()
        gauge_before = sample(running.service, "sgm_model_documents")
        year_2100_ms = 4_102_444_800_000
        produce(cfg.bootstrap_servers, cfg.train_topic, [learn(999, ts=None, prefix="future")],
                timestamps_ms=[year_2100_ms])
        # the offset moves past the record inside the batch: wait for the batch to end before reading the model
        service = running.service
        wait_until(lambda: service.train_offsets.get(0, 0) >= 301 and not service.checkpoint.half_applied, 30,
                   "the future record applied")
        running.service.refresh_gauges()
        assert len(running.service.model) == documents == 300
        assert sample(running.service, "sgm_model_documents") == gauge_before == 300
        assert _posteriors(running.service.model) == before  # bit for bit: the clock did not move
        assert running.service.model.state.clock.now < 1.8e9
        assert sample(running.service, "sgm_records_rejected_total",
                      {"reason": "future_timestamp", "source": "train"}) == 1
        letters = dead_letters(client, cfg.dlq_topic, 1)
        assert [(d.reason.value, d.topic, d.partition, d.offset) for d in letters] == [
            ("future_timestamp", cfg.train_topic, 0, 300)]
        # old event times stay valid: a backfill from four months earlier is learned
        produce(cfg.bootstrap_servers, cfg.train_topic, [learn(5000, ts=1_690_000_000.0)])
        wait_until(lambda: len(running.service.model) == 301, 30, "the backfilled record learned")
    finally:
        running.halt()


# ------------------------------------------------------------------------------ 2. a recreated topic
# Tansu implements DeleteTopics, but deleting a topic while a librdkafka 2.16 consumer is assigned to it
# crashes that process (SIGSEGV in rd_kafka_metadata_cache_find; docs/RELIABILITY.md). The condition is
# recreated as a wiped cluster instead: a new, empty broker on the same port, where the topic is created
# again (new topic id, offsets from 0), as after a cluster rebuild or a recreated topic.
def _wipe(broker: EmbeddedBroker) -> EmbeddedBroker:
    port = broker.port
    broker.stop()
    fresh = EmbeddedBroker(port=port)
    fresh.start()
    return fresh


def _learned_then_stopped(cfg, client, count: int) -> None:
    """A service learns ``count`` records of a new training topic and stops (its final snapshot at that offset)."""
    running = start_service(cfg, client)
    produce(cfg.bootstrap_servers, cfg.train_topic, [learn(i) for i in range(count)])
    wait_until(lambda: len(running.service.model) >= count, 30, f"{count} learned")
    running.halt()


def _recreated(broker: EmbeddedBroker, cfg, client, count: int) -> EmbeddedBroker:
    """The training topic deleted (a fresh broker on the same port) and created again with ``count`` new records."""
    broker = _wipe(broker)
    with client.admin() as admin:
        admin.create_topics([(cfg.train_topic, 1, 1)])
    produce(cfg.bootstrap_servers, cfg.train_topic, [learn(i, prefix="new") for i in range(count)])
    return broker


def test_2_a_recreated_training_topic_with_more_partitions_is_learned_not_skipped(unique_name, tmp_path):
    """Policy rebuild (the default): the running model is rebuilt from the new log; every new record is learned."""
    broker = EmbeddedBroker()
    broker.start()
    cfg = field_config(broker.bootstrap_servers, unique_name, tmp_path / "state", role="trainer")
    client = open_client("confluent", KafkaConfig(bootstrap_servers=broker.bootstrap_servers))
    running = start_service(cfg, client)
    try:
        produce(cfg.bootstrap_servers, cfg.train_topic, [learn(i) for i in range(300)])
        wait_until(lambda: len(running.service.model) >= 300, 30, "300 learned")
        # the snapshot is written from this thread: not while the service thread still applies the batch
        wait_until(lambda: not running.service.checkpoint.half_applied, 30, "the batch applied")
        running.service.snapshot()
        broker = _wipe(broker)
        with client.admin() as admin:
            admin.create_topics([(cfg.train_topic, 4, 1), (cfg.dlq_topic, 1, 1)])
        produce(cfg.bootstrap_servers, cfg.train_topic, [learn(i, prefix="new") for i in range(120)],
                keys=[f"new{i}".encode() for i in range(120)])
        wanted = {f"new{i}" for i in range(120)}
        wait_until(lambda: running.service.model.document_ids() == wanted, 60, "every new record learned")
        service = running.service
        assert sample(service, "sgm_training_log_resets_total", {"policy": "rebuild"}) == 1
        assert sorted(service.train_offsets) == [0, 1, 2, 3] and sum(service.train_offsets.values()) == 120
        assert sample(service, "sgm_training_stopped") == 0
        assert list((tmp_path / "state").glob("before-reset-*/snapshot-*.sgm")), "old snapshots are kept aside"
    finally:
        running.halt()
        broker.stop()


def test_2_a_service_restarted_on_a_recreated_topic_rebuilds_or_stops_as_configured(unique_name, tmp_path):
    """Snapshot at offset 300, topic recreated with 50 records: rebuild learns all 50; stop alerts and keeps."""
    broker = EmbeddedBroker()
    broker.start()
    cfg = field_config(broker.bootstrap_servers, unique_name, tmp_path / "rebuild", role="trainer")
    client = open_client("confluent", KafkaConfig(bootstrap_servers=broker.bootstrap_servers))
    try:
        _learned_then_stopped(cfg, client, 300)  # final snapshot at offset 300
        stopped_dir = tmp_path / "stop"
        stopped_dir.mkdir()
        for snapshot in (tmp_path / "rebuild").glob("snapshot-*.sgm"):
            (stopped_dir / snapshot.name).write_bytes(snapshot.read_bytes())
        broker = _recreated(broker, cfg, client, 50)

        running = start_service(cfg, client)
        try:
            wait_until(lambda: len(running.service.model) == 50, 30, "the new log learned")
            assert running.service.model.document_ids() == {f"new{i}" for i in range(50)}
            assert sample(running.service, "sgm_training_log_resets_total", {"policy": "rebuild"}) == 1
        finally:
            running.halt()

        stop_cfg = field_config(cfg.bootstrap_servers, unique_name, stopped_dir, on_training_log_reset="stop")
        running = start_service(stop_cfg, client)
        try:
            service = running.service
            wait_until(lambda: sample(service, "sgm_training_stopped") == 1, 30, "training stopped")
            assert len(service.model) == 300 and service.train_offsets == {0: 300}  # kept, not mixed with the new log
            assert sample(service, "sgm_training_log_resets_total", {"policy": "stop"}) == 1
            assert ready_status(service.metrics_address[1]) == 503
            time.sleep(0.5)
            assert len(service.model) == 300
        finally:
            running.halt()
    finally:
        broker.stop()


def test_2_a_recreated_topic_already_longer_than_the_model_is_told_apart_by_its_topic_id(unique_name, tmp_path):
    """Snapshot at offset 100, topic recreated and refilled with 150 records before the restart: no end offset
    gives it away, only the topic id the snapshot recorded. That id was written to every snapshot but never
    read back at restore (session 6, by hand): the first 100 new records were skipped as redeliveries."""
    broker = EmbeddedBroker()
    broker.start()
    cfg = field_config(broker.bootstrap_servers, unique_name, tmp_path / "state", role="trainer")
    client = open_client("confluent", KafkaConfig(bootstrap_servers=broker.bootstrap_servers))
    try:
        _learned_then_stopped(cfg, client, 100)  # final snapshot at offset 100, with the topic's id
        broker = _recreated(broker, cfg, client, 150)

        running = start_service(cfg, client)
        try:
            # the offsets move record by record, the documents are learned at the batch's end (learn_many)
            service = running.service
            wait_until(lambda: service.train_offsets.get(0) == 150 and not service.checkpoint.half_applied, 30,
                       "the new log applied")
            assert sample(running.service, "sgm_training_log_resets_total", {"policy": "rebuild"}) == 1
            assert running.service.model.document_ids() == {f"new{i}" for i in range(150)}
        finally:
            running.halt()
    finally:
        broker.stop()


# ------------------------------------------------------------------------------ 4. a poison record
def test_4_a_record_too_large_to_fetch_is_skipped_with_a_dead_letter(kafka_broker, unique_name, tmp_path):
    """A 101 MB record used to stall the partition for good (librdkafka: "Invalid response size")."""
    # the client's fetch limit below the record (the default, 128 MiB, would read it and refuse it as too_large)
    cfg = field_config(kafka_broker.bootstrap_servers, unique_name, tmp_path / "state", poison_timeout=3.0,
                       max_fetch_bytes=32 * 1024 * 1024)
    client = open_client("confluent", kafka_broker.config())
    with client.admin() as admin:
        admin.create_topics([(cfg.train_topic, 1, 1)])
    huge = b'{"id": "huge", "labels": ["x"], "text": "' + b"a " * (101 * 1024 * 1024 // 2) + b'"}'
    produce(cfg.bootstrap_servers, cfg.train_topic, [huge], **{"message.max.bytes": 200_000_000})
    del huge
    produce(cfg.bootstrap_servers, cfg.train_topic, [learn(i) for i in range(100)])
    running = start_service(cfg, client)
    try:
        wait_until(lambda: len(running.service.model) == 100, 60, "the 100 records behind it learned")
        assert running.service.train_offsets == {0: 101}
        letters = dead_letters(client, cfg.dlq_topic, 1)
        assert [(d.reason.value, d.topic, d.partition, d.offset) for d in letters] == [
            ("unfetchable", cfg.train_topic, 0, 0)]
        assert sample(running.service, "sgm_partition_stalls_total", {"source": "train", "outcome": "skipped"}) == 1
    finally:
        running.halt()


# ------------------------------------------------------------------------------ 9. readiness
def test_9_a_classifier_scores_only_once_it_caught_up_with_training(kafka_broker, unique_name, tmp_path, monkeypatch):
    """All training produced first: every output must come from a model holding all of it.

    Applying is slowed (20 ms per poll of two records: ~6 s for the backlog) so that catching up
    outlasts the scoring group's join (~3 s on Tansu): before readiness the classifier joined
    and answered with a half-trained model; now ``/ready`` says 503 until it caught up.
    """
    from sgm.consumers.service import training

    applying = training.apply_in_log_order

    def slowly(*args, **kwargs):
        time.sleep(0.02)
        return applying(*args, **kwargs)

    monkeypatch.setattr(training, "apply_in_log_order", slowly)
    cfg = field_config(kafka_broker.bootstrap_servers, unique_name, tmp_path / "state", max_poll_records=2,
                       score_partitions=2)
    client = open_client("confluent", kafka_broker.config())
    with client.admin() as admin:
        admin.create_topics([(cfg.train_topic, 1, 1), (cfg.score_topic, 2, 1), (cfg.output_topic, 2, 1)])
    n_train = 600
    produce(cfg.bootstrap_servers, cfg.train_topic, [learn(i) for i in range(n_train)])
    produce(cfg.bootstrap_servers, cfg.score_topic,
            [encode_score(ScoreRecord(id=f"q{i}", text=PROBES[i % len(PROBES)])) for i in range(200)],
            keys=[f"q{i}".encode() for i in range(200)])
    running = start_service(cfg, client)
    try:
        port = running.service.metrics_address[1]
        wait_until(lambda: len(running.service.model) > 0, 30, "catching up")
        assert ready_status(port) == 503 and sample(running.service, "sgm_ready") == 0  # before: no /ready
        assert len(running.service.model) < n_train
        answered = outputs(client, cfg.output_topic, 200)
        assert len({o.id for o in answered}) == 200
        assert min(o.model["version"] for o in answered) == n_train  # nothing answered by a half-trained model
        assert min(o.model["documents"] for o in answered) == n_train
        assert ready_status(port) == 200 and sample(running.service, "sgm_ready") == 1
    finally:
        running.halt()


# ------------------------------------------------------------------------------ 11. lone surrogates
def test_11_lone_surrogates_in_id_label_and_term_are_invalid_utf8(kafka_broker, unique_name, tmp_path):
    cfg = field_config(kafka_broker.bootstrap_servers, unique_name, tmp_path / "state")
    client = open_client("confluent", kafka_broker.config())
    running = start_service(cfg, client)
    try:
        produce(cfg.bootstrap_servers, cfg.train_topic, [
            b'{"id": "a\\ud800", "labels": ["x"], "text": "t"}',
            b'{"id": "b", "labels": ["x\\udc80"], "text": "t"}',
            b'{"id": "c", "labels": ["x"], "terms": {"t\\ud800": 1}}',
        ])
        letters = dead_letters(client, cfg.dlq_topic, 3)
        assert sorted((d.offset, d.reason.value) for d in letters) == [
            (0, "invalid_utf8"), (1, "invalid_utf8"), (2, "invalid_utf8")]
    finally:
        running.halt()


# ------------------------------------------------------------------------------ 13. a clock far behind
def test_13_a_learn_from_a_clock_years_behind_is_dead_lettered_not_counted_as_learned(kafka_broker, unique_name,
                                                                                      tmp_path):
    """With a one-day half-life, learns stamped ten years back (``ts``, or only a Kafka CreateTime of 1970)
    weigh 2**-3650: they expired on arrival, yet counted in ``sgm_documents_learned_total``, with no dead
    letter and no log line (session 6, by hand); a forget of their ids said ``unknown_id``."""
    cfg = field_config(kafka_broker.bootstrap_servers, unique_name, tmp_path / "state", half_life=86400.0)
    client = open_client("confluent", kafka_broker.config())
    with client.admin() as admin:
        admin.create_topics([(cfg.train_topic, 1, 1)])
    now = time.time()
    ten_years_ago = now - 10 * 365 * 86400
    # one poll batch: the old records sit behind newer learns not yet applied (judged after them)
    produce(cfg.bootstrap_servers, cfg.train_topic,
            [learn(i, ts=now - 100) for i in range(50)] + [learn(50, ts=ten_years_ago, prefix="old"),
                                                           learn(51, ts=None, prefix="epoch"),
                                                           learn(52, ts=now - 40 * 86400, prefix="month")],
            timestamps_ms=[None] * 51 + [1000, None])
    running = start_service(cfg, client)
    try:
        letters = dead_letters(client, cfg.dlq_topic, 2)
        assert sorted((d.reason.value, d.offset) for d in letters) == [("past_timestamp", 50), ("past_timestamp", 51)]
        assert "half-lives behind the model's time" in letters[0].detail
        # offsets move record by record, the learns are applied at the batch's end: wait for the batch to end
        service = running.service
        wait_until(lambda: service.train_offsets.get(0, 0) == 53 and not service.checkpoint.half_applied, 30,
                   "all 53 applied")
        running.service.refresh_gauges()
        assert len(running.service.model) == 51  # 40 days back is 40 half-lives: learned, decayed, kept
        assert sample(running.service, "sgm_documents_learned_total") == 51
        assert sample(running.service, "sgm_model_expired_documents") == 0
        assert sample(running.service, "sgm_records_rejected_total", {"reason": "past_timestamp", "source": "train"}) == 2
    finally:
        running.halt()
