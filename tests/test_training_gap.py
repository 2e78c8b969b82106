"""A training log that lost records before a replica read them is reported, not silently absorbed.

Every replica reads the training topic from offset 0 (or from its snapshot).
When retention has deleted records it never applied, its consumer jumps to the
log start and the model lacks those documents: the service logs an error with
the missed offsets and counts them in ``sgm_training_offsets_missed_total``
(alert ``SgmTrainingLogGap``). Offsets above the log start that never arrive
(a transactional producer's markers) are only counted, in
``sgm_training_offsets_skipped_total``. Tansu does not implement DeleteRecords, so
retention is played by the memory transport's ``MemoryBroker.delete_records``
(markers by ``append_marker``; tests/test_service_kafka.py has real ones).
"""
from __future__ import annotations

import contextlib
import logging
import uuid
from typing import Iterator

from sgm.consumers.config import ServiceConfig
from sgm.consumers.service import Service
from sgm.stream.records import TrainRecord, encode_train
from sgm.stream.kafka import KafkaConfig, KafkaTransportError, TopicPartition, open_client
from tests.service_helpers import run_until_idle


def config(name: str, state_dir: str) -> ServiceConfig:
    return ServiceConfig(bootstrap_servers=f"memory://{name}", client="memory", train_topic=f"{name}-train",
                         score_topic=f"{name}-score", output_topic=f"{name}-out", dlq_topic=f"{name}-dlq",
                         group=f"{name}-g", state_dir=state_dir, metrics_address="", model="u_jm",
                         poll_timeout=0.0, snapshot_every_records=10**9, snapshot_every_seconds=10**9)


@contextlib.contextmanager
def idle_service(cfg: ServiceConfig, client, prepare=lambda service: None) -> Iterator[Service]:
    """A started service (``prepare``d after start) that has applied everything it can read; closed on exit."""
    service = Service(cfg, client=client)
    service.start()
    try:
        prepare(service)
        run_until_idle(service)
        yield service
    finally:
        service.close()


def missed(service: Service) -> float:
    return service.metrics.training_offsets_missed._value.get()


def skipped(service: Service) -> float:
    return service.metrics.training_offsets_skipped._value.get()


def send_training(client, topic: str, ids: range) -> None:
    producer = client.producer()
    for i in ids:
        producer.send(topic, encode_train(TrainRecord(id=f"d{i}", labels=("a" if i % 2 else "b",),
                                                      text=f"word{i} shared words")))
    producer.flush()


def test_records_deleted_before_a_replica_read_them_are_reported(tmp_path, caplog):
    name = f"gap-{uuid.uuid4().hex[:8]}"
    cfg = config(name, str(tmp_path / "first"))
    client = open_client("memory", KafkaConfig(bootstrap_servers=cfg.bootstrap_servers))
    first = Service(cfg, client=client)
    first.start()
    send_training(client, cfg.train_topic, range(10))
    run_until_idle(first)
    assert len(first.model) == 10 and missed(first) == 0  # a whole log: nothing missed
    first.snapshot()
    first.close()

    # retention deletes offsets 0..3; a new replica (no snapshot) can only read 4..9
    client.broker.delete_records(TopicPartition(cfg.train_topic, 0), 4)
    late = Service(config(name, str(tmp_path / "late")), client=client)
    with caplog.at_level(logging.ERROR, logger="sgm.service"):
        late.start()
        run_until_idle(late)
    try:
        assert sorted(late.model.state.docs) == [f"d{i}" for i in range(4, 10)]
        assert missed(late) == 4
        gaps = [r for r in caplog.records if r.getMessage().startswith("training log gap")]
        assert [(r.first_missed, r.last_missed, r.missed) for r in gaps] == [(0, 3, 4)]
    finally:
        late.close()

    # the first replica restarts from its snapshot (offset 10); records 10..14 arrive, 10..11 are deleted first
    send_training(client, cfg.train_topic, range(10, 15))
    client.broker.delete_records(TopicPartition(cfg.train_topic, 0), 12)
    restarted = Service(cfg, client=client)
    restarted.start()
    try:
        run_until_idle(restarted)
        assert len(restarted.model) == 13 and missed(restarted) == 2
        assert restarted.train_offsets[0] == 15
    finally:
        restarted.close()


def test_redeliveries_and_a_contiguous_log_count_no_gap(tmp_path):
    name = f"nogap-{uuid.uuid4().hex[:8]}"
    cfg = config(name, str(tmp_path))
    client = open_client("memory", KafkaConfig(bootstrap_servers=cfg.bootstrap_servers))
    service = Service(cfg, client=client)
    service.start()
    try:
        send_training(client, cfg.train_topic, range(6))
        run_until_idle(service)
        consumer = client.consumer(None)
        consumer.assign([TopicPartition(cfg.train_topic, 0)])
        service.apply_training(consumer.poll(100, 0.0))  # the whole log again: all redeliveries
        consumer.close()
        assert len(service.model) == 6 and missed(service) == 0
    finally:
        service.close()


def test_transaction_markers_are_skipped_offsets_not_lost_documents(tmp_path, caplog):
    """Offsets above the log start that never arrive (markers, aborted records) are counted, not alerted."""
    name = f"txn-{uuid.uuid4().hex[:8]}"
    cfg = config(name, str(tmp_path))
    client = open_client("memory", KafkaConfig(bootstrap_servers=cfg.bootstrap_servers))
    client.broker.create_topic(cfg.train_topic, 1)
    send_training(client, cfg.train_topic, range(3))  # offsets 0..2
    client.broker.append_marker(cfg.train_topic, 0)  # 3: a commit marker
    send_training(client, cfg.train_topic, range(3, 5))  # 4..5
    client.broker.append_marker(cfg.train_topic, 0)  # 6
    client.broker.append_marker(cfg.train_topic, 0)  # 7
    send_training(client, cfg.train_topic, range(5, 6))  # 8
    with caplog.at_level(logging.ERROR, logger="sgm.service"), idle_service(cfg, client) as service:
        assert len(service.model) == 6 and service.train_offsets[0] == 9
        assert missed(service) == 0 and skipped(service) == 3
        assert not [r for r in caplog.records if r.getMessage().startswith("training log gap")]

    # retention then deletes 0..4 (d0-d3 and the marker at 3: once deleted, a marker cannot be told
    # from a record, so below the log start everything counts as missed); a marker and d6 follow
    client.broker.delete_records(TopicPartition(cfg.train_topic, 0), 5)
    client.broker.append_marker(cfg.train_topic, 0)  # 9
    send_training(client, cfg.train_topic, range(6, 7))  # 10
    with idle_service(config(name, str(tmp_path / "fresh")), client) as fresh:
        assert sorted(fresh.model.state.docs) == ["d4", "d5", "d6"]
        assert missed(fresh) == 5 and skipped(fresh) == 3  # 0..4 deleted; 6, 7 and 9 markers


def test_an_unreadable_log_start_counts_the_gap_as_missed(tmp_path, caplog):
    name = f"nostart-{uuid.uuid4().hex[:8]}"
    cfg = config(name, str(tmp_path))
    client = open_client("memory", KafkaConfig(bootstrap_servers=cfg.bootstrap_servers))
    client.broker.create_topic(cfg.train_topic, 1)
    send_training(client, cfg.train_topic, range(2))
    client.broker.append_marker(cfg.train_topic, 0)
    send_training(client, cfg.train_topic, range(2, 3))
    def unreadable(tps, timeout=None):
        raise KafkaTransportError("broker unavailable")

    with caplog.at_level(logging.WARNING, logger="sgm.service"), \
            idle_service(cfg, client,  # the log start is read by the consumer that never fetches (connections.py)
                         lambda s: setattr(s.connections.offsets_reader(), "beginning_offsets", unreadable)) as service:
        assert len(service.model) == 3 and missed(service) == 1 and skipped(service) == 0
        assert any(r.getMessage().startswith("training log gap: could not read the log start") for r in caplog.records)
