"""The parts of stream/kafka/ that need no broker: option mapping, the client registry, the end-offset probe.

Behaviour against a real broker is in tests/test_transport.py (every client) and the
service tests; here: the client-neutral settings land on each library's own option
names with the documented precedence, ``open_client`` finds registered kinds, and the
Tansu workaround (``correct_end_offsets``) only ever raises an end offset.
"""
from __future__ import annotations

import argparse

import pytest

from sgm.stream.kafka import (
    CONFLUENT_CONSUMER_DEFAULTS,
    KAFKA_PYTHON_CONSUMER_DEFAULTS,
    ConsumerSettings,
    KafkaConfig,
    MemoryClient,
    ProducerSettings,
    TopicPartition,
    broker_client_kinds,
    client_kinds,
    open_client,
    register_client,
)
from sgm.stream.kafka.config import ConfluentOptions, KafkaPythonOptions
from sgm.stream.kafka.tansu import EndOffsetProbe, correct_end_offsets


def test_fetch_wait_is_one_neutral_setting_mapped_per_client():
    config = KafkaConfig(bootstrap_servers="k:9092", client_id="svc")
    confluent, kafka_python = ConfluentOptions(config), KafkaPythonOptions(config)
    assert confluent.consumer(ConsumerSettings())["fetch.wait.max.ms"] == CONFLUENT_CONSUMER_DEFAULTS["fetch.wait.max.ms"]
    assert kafka_python.consumer(ConsumerSettings())["fetch_max_wait_ms"] == KAFKA_PYTHON_CONSUMER_DEFAULTS["fetch_max_wait_ms"]
    assert confluent.consumer(ConsumerSettings(fetch_wait_ms=7))["fetch.wait.max.ms"] == 7
    assert kafka_python.consumer(ConsumerSettings(fetch_wait_ms=7))["fetch_max_wait_ms"] == 7
    assert "fetch_wait_ms" not in confluent.consumer(ConsumerSettings(fetch_wait_ms=7))
    # precedence: KafkaConfig.extra < fetch_wait_ms < per-call dialect overrides
    extra = KafkaConfig(extra={"fetch.wait.max.ms": 3, "fetch_max_wait_ms": 3})
    assert ConfluentOptions(extra).consumer(ConsumerSettings())["fetch.wait.max.ms"] == 3
    assert ConfluentOptions(extra).consumer(ConsumerSettings(fetch_wait_ms=7))["fetch.wait.max.ms"] == 7
    assert ConfluentOptions(extra).consumer(ConsumerSettings(fetch_wait_ms=7), {"fetch.wait.max.ms": 9})[
        "fetch.wait.max.ms"] == 9
    assert KafkaPythonOptions(extra).consumer(ConsumerSettings(fetch_wait_ms=7))["fetch_max_wait_ms"] == 7


def test_consumer_settings_map_to_each_clients_names():
    settings = ConsumerSettings("g", auto_offset_reset="latest", session_timeout_ms=12_000)
    confluent = ConfluentOptions(KafkaConfig(client_id="svc")).consumer(settings)
    assert (confluent["group.id"], confluent["auto.offset.reset"], confluent["session.timeout.ms"],
            confluent["heartbeat.interval.ms"]) == ("g", "latest", 12_000, 2000)
    kafka_python = KafkaPythonOptions(KafkaConfig()).consumer(settings, assignor=object)
    assert (kafka_python["group_id"], kafka_python["auto_offset_reset"], kafka_python["session_timeout_ms"],
            kafka_python["heartbeat_interval_ms"], kafka_python["partition_assignment_strategy"]) == (
        "g", "latest", 12_000, 2000, (object,))
    # librdkafka needs a group.id even without a group: a private one per consumer
    a, b = (ConfluentOptions(KafkaConfig(client_id="svc")).consumer(ConsumerSettings())["group.id"] for _ in "ab")
    assert a.startswith("svc.nogroup.") and a != b
    # the probes: a private group (confluent) / none (kafka-python), prompt fetches, the consumer's connection
    probe = ConfluentOptions.end_probe(confluent)
    assert probe["group.id"].startswith("sgm.endprobe.") and probe["fetch.wait.max.ms"] == 10
    assert probe["bootstrap.servers"] == confluent["bootstrap.servers"]
    probe = KafkaPythonOptions.end_probe(kafka_python)
    assert probe["group_id"] is None and "partition_assignment_strategy" not in probe and probe["fetch_max_wait_ms"] == 10


def test_producer_settings_map_to_each_clients_names():
    config = KafkaConfig(bootstrap_servers="k:9092")
    confluent, kafka_python = ConfluentOptions(config), KafkaPythonOptions(config)
    plain = confluent.producer(ProducerSettings())
    assert "enable.idempotence" not in plain and "message.timeout.ms" not in plain
    settings = ProducerSettings(idempotent=True, delivery_timeout_ms=900_000)
    mapped = confluent.producer(settings)
    assert (mapped["enable.idempotence"], mapped["message.timeout.ms"]) == (True, 900_000)
    assert ConfluentOptions.delivery_timeout_s(mapped) == 900.0  # the producer's flush bound follows it
    mapped = kafka_python.producer(settings)
    assert (mapped["enable_idempotence"], mapped["delivery_timeout_ms"]) == (True, 900_000)
    assert "idempotent" not in mapped and "delivery_timeout_ms" not in confluent.producer(settings)
    # per-call dialect overrides still win
    assert confluent.producer(settings, {"message.timeout.ms": 5})["message.timeout.ms"] == 5
    assert "message.max.bytes" not in plain and "max_request_size" not in kafka_python.producer(ProducerSettings())
    big = ProducerSettings(max_request_bytes=2 << 20)
    assert confluent.producer(big)["message.max.bytes"] == kafka_python.producer(big)["max_request_size"] == 2 << 20
    # the memory client accepts the neutral settings (it has nothing to map them to)
    MemoryClient(MemoryClient.default_config()).producer(idempotent=True, delivery_timeout_ms=1,
                                                         max_request_bytes=1).close()


def test_registry_opens_registered_kinds_only(monkeypatch):
    from sgm.stream.kafka import registry

    monkeypatch.setattr(registry, "_LOADERS", dict(registry._LOADERS))  # the registrations below end with the test
    monkeypatch.setattr(registry, "_IN_PROCESS", set(registry._IN_PROCESS))
    assert set(client_kinds()) >= {"confluent", "kafka-python", "memory"}
    with pytest.raises(ValueError, match="unknown client kind"):
        open_client("nope")  # type: ignore[arg-type]

    class NamedMemory(MemoryClient):
        kind = "named-memory"

    register_client("named-memory", lambda: NamedMemory, in_process=True)
    assert "named-memory" in client_kinds()
    client = open_client("named-memory")  # type: ignore[arg-type]
    assert isinstance(client, NamedMemory) and client.config.bootstrap_servers == "memory://default"
    # the commands that start their own processes or broker offer the registered kinds that reach a broker
    register_client("third", lambda: NamedMemory)
    assert set(broker_client_kinds()) >= {"confluent", "kafka-python", "third"}
    assert not {"memory", "named-memory"} & set(broker_client_kinds())
    from sgm.consumers.commands import chaos, demo

    for command in (demo, chaos):
        parser = argparse.ArgumentParser()
        command.add_arguments(parser)
        assert parser.parse_args(["--client", "third"]).client == "third"
        with pytest.raises(SystemExit):
            parser.parse_args(["--client", "named-memory"])


class FakeProbe(EndOffsetProbe):
    """Answers with the given watermarks, ``late`` partitions never answer."""

    def __init__(self, highs: dict[TopicPartition, int], late: set[TopicPartition] = frozenset()) -> None:
        self.highs, self.late, self.positions, self.stopped = highs, late, None, 0

    def fetch_from(self, positions):  # noqa: ANN001
        self.positions = dict(positions)

    def answered(self, wait: float) -> set[TopicPartition]:
        return {tp for tp in self.positions if tp not in self.late}

    def high_watermark(self, tp: TopicPartition) -> int | None:
        return None if tp in self.late else self.highs.get(tp)

    def stop(self) -> None:
        self.stopped += 1

    def close(self) -> None:
        pass


def test_end_offsets_are_raised_to_the_fetch_high_watermark_never_lowered():
    a, b, c, empty = (TopicPartition("t", p) for p in range(4))
    probe = FakeProbe({a: 10, b: 3, c: 99})
    ends = {a: 7, b: 5, c: 40, empty: 0}
    correct_end_offsets(ends, lambda: probe, timeout=1.0)
    assert ends == {a: 10, b: 5, c: 99, empty: 0}
    assert probe.positions == {a: 6, b: 4, c: 39} and probe.stopped == 1  # fetch from end - 1; empty skipped

    late = FakeProbe({a: 10}, late={b})
    ends = {a: 7, b: 5}
    correct_end_offsets(ends, lambda: late, timeout=0.2)  # b never answers: kept as reported
    assert ends == {a: 10, b: 5} and late.stopped == 1

    created = []
    correct_end_offsets({empty: 0}, lambda: created.append(1), timeout=1.0)  # nothing to probe: no probe made
    assert created == []
