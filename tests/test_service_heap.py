"""The service keeps its long-lived heap out of the cyclic garbage collector's scans.

Full collections walking the imported modules and the model's document
records cost ~7 of 32 us of CPU per scored document (bench/service_bench.py);
the service freezes what is alive once it has started and again after every
snapshot, so those objects are never walked again.
"""
from __future__ import annotations

import gc

from sgm.consumers.config import ServiceConfig
from sgm.consumers.service import Service
from sgm.stream.records import TrainRecord, encode_train
from sgm.stream.kafka import KafkaConfig, Record, open_client


def test_the_heap_is_frozen_at_start_and_after_each_snapshot(tmp_path):
    name = "heap"
    cfg = ServiceConfig(bootstrap_servers=f"memory://{name}", client="memory", train_topic=f"{name}-train",
                        score_topic=f"{name}-score", output_topic=f"{name}-out", dlq_topic=f"{name}-dlq",
                        group=f"{name}-g", state_dir=str(tmp_path), model="u_jm", metrics_address="")
    service = Service(cfg, client=open_client("memory", KafkaConfig(bootstrap_servers=cfg.bootstrap_servers)))
    gc.unfreeze()
    try:
        service.start()
        frozen_at_start = gc.get_freeze_count()
        assert frozen_at_start > 0
        records = [Record(cfg.train_topic, 0, i, None,
                          encode_train(TrainRecord(id=f"d{i}", labels=("a" if i % 2 else "b",), text=f"word{i} common")),
                          None, None) for i in range(200)]
        service.apply_training(records)
        learned = service.model.state.docs["d7"]
        assert any(obj is learned for obj in gc.get_objects())  # scanned by full collections until frozen
        service.snapshot()
        assert gc.get_freeze_count() > frozen_at_start
        assert not any(obj is learned for obj in gc.get_objects())  # frozen: no collection walks it
        assert len(service.model) == 200  # nothing was lost by freezing
    finally:
        service.close()
        gc.unfreeze()


def test_the_heap_is_frozen_every_few_thousand_training_records_without_a_snapshot(tmp_path):
    name = "heap-steps"
    cfg = ServiceConfig(bootstrap_servers=f"memory://{name}", client="memory", train_topic=f"{name}-train",
                        score_topic=f"{name}-score", output_topic=f"{name}-out", dlq_topic=f"{name}-dlq",
                        group=f"{name}-g", state_dir=str(tmp_path), model="u_jm", metrics_address="",
                        snapshot_every_records=10**9, snapshot_every_seconds=1e9, max_poll_records=500)
    client = open_client("memory", KafkaConfig(bootstrap_servers=cfg.bootstrap_servers))
    service = Service(cfg, client=client)
    service.heap.every = 1000
    gc.unfreeze()
    try:
        service.start()
        producer = client.producer()
        for i in range(1200):
            producer.send(cfg.train_topic, encode_train(TrainRecord(id=f"d{i}", labels=("a",), text=f"w{i} common")))
        producer.flush()
        while service.train_offsets.get(0, 0) < 1000:  # two batches of 500: the freeze is due
            service.step()
        early = service.model.state.docs["d7"]
        assert not any(obj is early for obj in gc.get_objects())  # frozen without any snapshot
        while service.step():
            pass
        late = service.model.state.docs["d1100"]
        assert any(obj is late for obj in gc.get_objects())  # learned after the freeze: not frozen yet
        assert len(service.model) == 1200
    finally:
        service.close()
        gc.unfreeze()
