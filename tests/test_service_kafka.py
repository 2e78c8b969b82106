"""The service against a real Kafka-protocol broker (Tansu, testcontainers or KAFKA_BOOTSTRAP_SERVERS).

* train -> score -> output end to end, for both clients, with malformed records
  dead-lettered (reason and source) and the model equal to one trained on the
  valid records only;
* a process killed with SIGKILL mid-stream and restarted ends with the same
  model (snapshot checksum) as an uninterrupted run, and every scoring id gets
  an output;
* two classifier replicas split the scoring partitions and answer everything.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from sgm.consumers.config import ServiceConfig
from sgm.model.persistence import read_meta
from sgm.stream.records import parse_train
from sgm.stream.snapshot_store import SnapshotStore
from sgm.stream.synthetic import SyntheticConfig, SyntheticStream
from sgm.stream.kafka import open_client
from tests.service_helpers import (
    dead_letters,
    expected_reasons,
    feed,
    outputs_by_id,
    read_topic,
    reference_model,
    start_service,
)

pytestmark = pytest.mark.kafka
ROOT = Path(__file__).resolve().parents[1]


def service_config(broker, name: str, tmp_path: Path, **overrides) -> ServiceConfig:
    values = dict(
        bootstrap_servers=broker.bootstrap_servers, train_topic=f"{name}-train", score_topic=f"{name}-score",
        output_topic=f"{name}-out", dlq_topic=f"{name}-dlq", group=f"{name}-group", state_dir=str(tmp_path / "state"),
        metrics_address="127.0.0.1:0", model="uc_pd_jm_dp", param={"beta": 0.3, "mu": 20.0, "delta": 0.5, "ups": 0.2},
        half_life=3600.0, score_partitions=3,
    )
    values.update(overrides)
    return ServiceConfig(**values)


@pytest.mark.parametrize("client_kind", ["confluent", "kafka-python"])
def test_train_score_output_end_to_end_with_dead_letters(kafka_broker, unique_name, tmp_path, client_kind):
    cfg = service_config(kafka_broker, unique_name, tmp_path, client=client_kind)
    client = open_client(client_kind, kafka_broker.config())
    events = list(SyntheticStream(SyntheticConfig(seed=11, n_docs=600, profiles=("news", "spam"), malformed_rate=0.03,
                                                  forget_rate=0.01)).events())
    scoring_ids = {e.id for e in events if e.kind == "score" and e.valid}
    running = start_service(cfg, client)
    try:
        feed(client, cfg, events)
        outputs = outputs_by_id(read_topic(client, cfg.output_topic, lambda r: len(r) >= len(scoring_ids)))
        expected = expected_reasons(events)
        letters = dead_letters(read_topic(client, cfg.dlq_topic, lambda r: len(r) >= sum(expected.values()), 30))
        deadline = time.monotonic() + 30
        train_end = sum(e.kind == "train" for e in events)
        while running.service.train_offsets.get(0, 0) < train_end and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        running.halt()
    assert set(outputs) == scoring_ids  # every valid scoring record answered, nothing else
    for out in (o[0] for o in outputs.values()):
        assert out.top_k and all(isinstance(p, float) and 0.0 <= p <= 1.0 for _, p in out.top_k)
        assert [p for _, p in out.top_k] == sorted((p for _, p in out.top_k), reverse=True)
        assert out.labels == (out.top_k[0][0],)
        assert out.model["kind"] == "mnb" and "0" in out.model["train_offsets"]
    # every malformed record is in the DLQ with the validator's reason and its source position
    got = Counter(("train" if d.topic == cfg.train_topic else "score", d.reason.value) for d in letters
                  if d.reason.value in {r for _, r in expected})
    assert got == expected
    by_value = {e.value: e for e in events if not e.valid}
    for letter in letters:
        if letter.value in by_value:
            assert letter.offset is not None and letter.partition is not None
    # the model equals one trained on the valid records only (bit for bit)
    assert running.service.model.checksum() == reference_model(cfg, events).checksum()


def _latest_offsets(state_dir: Path) -> tuple[int, str | None]:
    try:
        found = SnapshotStore(state_dir).latest()
    except Exception:  # noqa: BLE001 - a snapshot being written
        return -1, None
    if found is None:
        return -1, None
    meta = read_meta(found[1])
    return int(meta["extra"]["train_offsets"].get("0", 0)), meta["state_checksum"]


def _serve(cfg: ServiceConfig, log_path: Path) -> subprocess.Popen:
    args = [sys.executable, "-m", "sgm.consumers.cli", "serve", "--bootstrap-servers", cfg.bootstrap_servers,
            "--client", cfg.client, "--train-topic", cfg.train_topic, "--score-topic", cfg.score_topic,
            "--output-topic", cfg.output_topic, "--dlq-topic", cfg.dlq_topic, "--group", cfg.group,
            "--state-dir", cfg.state_dir, "--model", cfg.model, "--half-life", str(cfg.half_life),
            "--snapshot-every-records", "1500", "--snapshot-every-seconds", "0.5", "--metrics-address", "127.0.0.1:0",
            "--score-partitions", str(cfg.score_partitions)]
    for name, value in cfg.param.items():
        args += ["--param", f"{name}={value}"]
    return subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=open(log_path, "ab"))


def test_sigkill_mid_stream_then_restart_gives_the_uninterrupted_model(kafka_broker, unique_name, tmp_path):
    cfg = service_config(kafka_broker, unique_name, tmp_path, client="confluent")
    client = open_client("confluent", kafka_broker.config())
    events = list(SyntheticStream(SyntheticConfig(seed=5, n_docs=12_000, profiles=("news", "spam"),
                                                  malformed_rate=0.002)).events())
    train_end = sum(e.kind == "train" for e in events)
    scoring_ids = {e.id for e in events if e.kind == "score" and e.valid}
    log_path = tmp_path / "serve.log"
    with client.admin() as admin:  # as a deployment would: topics exist before anyone produces
        admin.create_topics([(cfg.train_topic, 1, 1), (cfg.score_topic, cfg.score_partitions, 1),
                             (cfg.output_topic, cfg.score_partitions, 1), (cfg.dlq_topic, 1, 1)])
    process = _serve(cfg, log_path)
    try:
        feed(client, cfg, events[: len(events) // 3])
        deadline = time.monotonic() + 60
        while _latest_offsets(Path(cfg.state_dir))[0] <= 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        feed(client, cfg, events[len(events) // 3 :])
        applied, _ = _latest_offsets(Path(cfg.state_dir))
        assert 0 < applied < train_end, "kill must land mid-stream, after a snapshot"
        process.send_signal(signal.SIGKILL)
        process.wait(10)
        process = _serve(cfg, log_path)  # restart on the same state directory
        deadline = time.monotonic() + 120
        while _latest_offsets(Path(cfg.state_dir))[0] < train_end and time.monotonic() < deadline:
            time.sleep(0.2)
        outputs = outputs_by_id(read_topic(client, cfg.output_topic, lambda r: len({x.key for x in r}) >= len(scoring_ids)))
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0, log_path.read_text()[-2000:]
    finally:
        if process.poll() is None:
            process.kill()
    restarted_offset, restarted_checksum = _latest_offsets(Path(cfg.state_dir))
    assert restarted_offset == train_end
    # the uninterrupted run: the same training log replayed without interruption
    uninterrupted = reference_model(cfg, [e for e in events])
    assert restarted_checksum == uninterrupted.checksum()
    assert set(outputs) == scoring_ids  # every scoring id answered (duplicates allowed: at least once)
    duplicates = sum(len(v) - 1 for v in outputs.values())
    assert duplicates <= 2 * cfg.max_poll_records  # bounded by what was in flight at the kill


def test_two_classifier_replicas_split_partitions_and_answer_everything(kafka_broker, unique_name, tmp_path):
    client = open_client("confluent", kafka_broker.config())
    first = service_config(kafka_broker, unique_name, tmp_path / "a", role="classifier", score_partitions=4)
    second = service_config(kafka_broker, unique_name, tmp_path / "b", role="classifier", score_partitions=4)
    events = list(SyntheticStream(SyntheticConfig(seed=3, n_docs=1500, profiles=("news",), malformed_rate=0.0)).events())
    scoring_ids = {e.id for e in events if e.kind == "score"}
    a = start_service(first, client)
    b = start_service(second, client)
    try:
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and not (a.service.score_consumer.assignment()
                                                  and b.service.score_consumer.assignment()):
            time.sleep(0.2)
        assigned_a = {tp.partition for tp in a.service.score_consumer.assignment()}
        assigned_b = {tp.partition for tp in b.service.score_consumer.assignment()}
        feed(client, first, events)
        outputs = outputs_by_id(read_topic(client, first.output_topic, lambda r: len({x.key for x in r}) >= len(scoring_ids)))
        train_end = sum(e.kind == "train" for e in events)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and min(a.service.train_offsets.get(0, 0), b.service.train_offsets.get(0, 0)) < train_end:
            time.sleep(0.1)
    finally:
        a.halt()
        b.halt()
    # read once both stopped: a batch is counted after its outputs are acknowledged and committed, so the
    # last batch's outputs can be read before it is counted
    scored_a, scored_b = a.service.metrics.scored._value.get(), b.service.metrics.scored._value.get()
    assert assigned_a and assigned_b and not (assigned_a & assigned_b)
    assert assigned_a | assigned_b == {0, 1, 2, 3}
    assert set(outputs) == scoring_ids
    assert scored_a > 0 and scored_b > 0 and scored_a + scored_b >= len(scoring_ids)
    # each replica consumed the whole training topic itself: identical models
    assert a.service.model.checksum() == b.service.model.checksum()


@pytest.mark.parametrize("client_kind", ["confluent", "kafka-python"])
def test_transactional_training_producer_markers_are_skipped_not_missed(kafka_broker, unique_name, tmp_path,
                                                                         client_kind):
    """A transactional producer's commit markers take offsets no consumer receives: not a training log gap."""
    import confluent_kafka

    from sgm.stream.records import TrainRecord, encode_train

    cfg = service_config(kafka_broker, unique_name, tmp_path, client=client_kind, score_partitions=1)
    client = open_client(client_kind, kafka_broker.config())
    with client.admin() as admin:
        admin.create_topics([(cfg.train_topic, 1, 1), (cfg.score_topic, 1, 1), (cfg.output_topic, 1, 1),
                             (cfg.dlq_topic, 1, 1)])
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka_broker.bootstrap_servers,
                                         "transactional.id": f"{unique_name}-tx"})
    producer.init_transactions(30)
    ids = iter(range(100))
    for size in (3, 2, 2):  # three committed transactions: records 0-2, 4-5, 7-8; markers at 3, 6, 9
        producer.begin_transaction()
        for _ in range(size):
            i = next(ids)
            producer.produce(cfg.train_topic, encode_train(TrainRecord(id=f"d{i}", labels=("a" if i % 2 else "b",),
                                                                          text=f"word{i} shared words")))
        producer.commit_transaction(30)
    running = start_service(cfg, client)
    try:
        deadline = time.monotonic() + 30
        while running.service.train_offsets.get(0, 0) < 9 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        running.halt()  # joins the service thread: what it applied is complete
    metrics = running.service.metrics
    assert running.service.train_offsets.get(0) == 9
    assert sorted(running.service.model.state.docs) == [f"d{i}" for i in range(7)]
    assert metrics.training_offsets_missed._value.get() == 0
    assert metrics.training_offsets_skipped._value.get() == 2  # the markers at 3 and 6 (9 ends the log)
