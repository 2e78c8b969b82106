"""``model.version`` of an output record (docs/SCHEMAS.md): the training offsets the model had applied.

The encoder writes it only as a non-negative integer, the parser accepts it absent
(outputs written before it existed) and rejects anything else, and the service
stamps every output with the sum of the training offsets its model held when it
scored -- so outputs scored before and after more training differ by exactly the
number of training records (valid or dead-lettered) read in between.
"""
from __future__ import annotations

import json
import uuid

import numpy as np
import pytest

from sgm.consumers.config import ServiceConfig
from sgm.consumers.service import Service
from sgm.stream.kafka import KafkaConfig, TopicPartition, open_client
from sgm.stream.records import (
    InvalidRecord,
    OutputRecord,
    Reason,
    ScoreRecord,
    TrainRecord,
    encode_output,
    encode_outputs,
    encode_score,
    encode_train,
    model_version,
    parse_output,
)
from tests.service_helpers import run_until_idle


def output_bytes(model: dict) -> bytes:
    return encode_outputs(["q"], [["a"]], np.array([[1.0]]), [["a"]], model=model, scored_at=1.0, latency_ms=[0.0],
                          ts=[None])[0]


def test_model_version_sums_the_next_training_offsets():
    assert model_version({}) == 0
    assert model_version({0: 17}) == 17
    assert model_version({0: 10, 1: 5, 2: 0}) == 15


def test_encoder_writes_a_valid_version_and_refuses_others():
    assert json.loads(output_bytes({"kind": "mnb", "version": 12}))["model"] == {"kind": "mnb", "version": 12}
    assert json.loads(output_bytes({"kind": "mnb", "version": None}))["model"]["version"] is None  # null = absent
    for bad in (-1, 1.5, "3", True, [1]):
        with pytest.raises(ValueError, match="version"):
            output_bytes({"version": bad})
        with pytest.raises(ValueError, match="version"):
            encode_output(OutputRecord.from_scores("q", [("a", 1.0)], model={"version": bad}, latency_ms=0))


def test_parser_accepts_a_missing_version_and_rejects_a_bad_one():
    assert parse_output(output_bytes({"kind": "mnb"})).model == {"kind": "mnb"}
    assert parse_output(output_bytes({"version": 0})).model == {"version": 0}
    for bad in (b"-1", b"1.5", b'"3"', b"true", b"[1]", b"{}"):
        value = output_bytes({"version": 7}).replace(b'"version":7', b'"version":' + bad)
        with pytest.raises(InvalidRecord) as info:
            parse_output(value)
        assert info.value.reason is Reason.WRONG_TYPE and "model.version" in info.value.detail


def test_service_stamps_outputs_with_the_training_offsets_it_had_applied(tmp_path):
    name = f"version-{uuid.uuid4().hex[:8]}"
    cfg = ServiceConfig(bootstrap_servers=f"memory://{name}", client="memory", train_topic=f"{name}-train",
                        score_topic=f"{name}-score", output_topic=f"{name}-out", dlq_topic=f"{name}-dlq",
                        group=f"{name}-g", state_dir=str(tmp_path), metrics_address="", model="u_jm",
                        poll_timeout=0.0, snapshot_every_records=10**9, snapshot_every_seconds=10**9)
    client = open_client("memory", KafkaConfig(bootstrap_servers=cfg.bootstrap_servers))
    service = Service(cfg, client=client)
    service.start()
    producer = client.producer()

    def train(ids: range, junk: int = 0) -> None:
        for i in ids:
            producer.send(cfg.train_topic, encode_train(TrainRecord(id=f"d{i}", labels=("a" if i % 2 else "b",),
                                                                    text=f"word{i} shared")))
        for _ in range(junk):
            producer.send(cfg.train_topic, b"not json")  # dead-lettered, but an offset the model has read
        producer.flush()

    def score(ids: list[str]) -> None:
        for doc_id in ids:
            producer.send(cfg.score_topic, encode_score(ScoreRecord(id=doc_id, text="shared words")))
        producer.flush()

    try:
        train(range(6), junk=1)
        run_until_idle(service)
        score(["q1", "q2"])
        run_until_idle(service)
        train(range(6, 9))
        run_until_idle(service)
        score(["q3"])
        run_until_idle(service)
        assert service.train_offsets == {0: 10}
    finally:
        producer.close()
        service.close()

    reader = client.consumer(None)
    reader.assign([TopicPartition(cfg.output_topic, p) for p in reader.partitions_for(cfg.output_topic)])
    outputs = {parsed.id: parsed for parsed in (parse_output(r.value) for r in reader.poll(100, 0.5))}
    reader.close()
    assert sorted(outputs) == ["q1", "q2", "q3"]
    assert outputs["q1"].model["version"] == outputs["q2"].model["version"] == 7  # 6 learnt + 1 dead-lettered
    assert outputs["q3"].model["version"] == 10
    assert outputs["q3"].model["train_offsets"] == {"0": 10}
