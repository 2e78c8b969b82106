"""The Kafka transport: both real clients against a real broker, and the memory broker.

Every behaviour test runs for ``memory``, ``confluent`` and ``kafka-python``;
the real ones are marked ``kafka`` and share the session broker (see
tests/kafka_fixtures.py), each with its own topic and group names. Group joins
are the slow part on Tansu (about half the session timeout, ~3 s), so only
one test per client kind forms a group.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator

import pytest

from sgm.stream.broker import BrokerStartError, EmbeddedBroker, free_port, kafka_metadata_ready
from sgm.stream.kafka import (
    Client,
    CommitFailedError,
    Consumer,
    DeliveryError,
    KafkaConfig,
    KafkaTransportError,
    MemoryBroker,
    Record,
    TopicPartition,
    confluent_config,
    kafka_python_config,
    murmur2_partition,
    open_client,
)

from tests.kafka_fixtures import KafkaBroker

# kafka-python 3.0 loads its protocol schemas with deprecated importlib.resources calls.
pytestmark = [
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]

KINDS = [
    "memory",
    pytest.param("confluent", marks=pytest.mark.kafka),
    pytest.param("kafka-python", marks=pytest.mark.kafka),
]


@pytest.fixture(params=KINDS)
def client(request: pytest.FixtureRequest, unique_name: str) -> Client:
    kind = request.param
    if kind == "memory":
        return open_client("memory", KafkaConfig(bootstrap_servers=f"memory://{unique_name}"))
    broker: KafkaBroker = request.getfixturevalue("kafka_broker")
    return open_client(kind, broker.config())


def poll_until(consumer: Consumer, count: int, timeout: float = 15.0) -> list[Record]:
    """Poll until ``count`` records arrived or ``timeout`` passed."""
    records: list[Record] = []
    deadline = time.monotonic() + timeout
    while len(records) < count and time.monotonic() < deadline:
        records.extend(consumer.poll(max_records=count - len(records), timeout=0.2))
    return records


def all_partitions(consumer: Consumer, topic: str) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in consumer.partitions_for(topic)]


# ---------------------------------------------------------------------------------
# Behaviour, for every client kind
# ---------------------------------------------------------------------------------


def test_create_and_list_topics(client: Client, unique_name: str) -> None:
    admin = client.admin()
    try:
        admin.create_topics([(unique_name, 3, 1), (unique_name + "-b", 1, 1)])
        topics = admin.list_topics()
        assert topics[unique_name] == 3
        assert topics[unique_name + "-b"] == 1
        admin.create_topics([(unique_name, 3, 1)])  # exist_ok
        with pytest.raises(KafkaTransportError):
            admin.create_topics([(unique_name, 3, 1)], exist_ok=False)
        with client.consumer() as consumer:
            assert consumer.partitions_for(unique_name) == [0, 1, 2]
            assert consumer.partitions_for(unique_name + "-missing") == []
        # asking about a topic must not create it
        assert unique_name + "-missing" not in admin.list_topics()
    finally:
        admin.close()


def test_round_trip_keys_headers_and_partitioning(client: Client, unique_name: str) -> None:
    topic = unique_name
    with client.admin() as admin:
        admin.create_topics([(topic, 3, 1)])
    sent = []
    with client.producer() as producer:
        for i in range(30):
            key = None if i % 10 == 9 else f"key-{i % 7}".encode()
            value = None if i == 5 else f"value-{i}".encode()  # one tombstone
            headers = [("seq", str(i).encode()), ("kind", b"test")]
            producer.send(topic, value, key=key, headers=headers)
            sent.append((key, value, (("seq", str(i).encode()), ("kind", b"test"))))
        producer.flush()
    before_ms = int(time.time() * 1000) - 60_000
    with client.consumer() as consumer:
        consumer.assign(all_partitions(consumer, topic))
        records = poll_until(consumer, 30)
        assert not consumer.poll(max_records=10, timeout=0.3), "no extra records"
    assert len(records) == 30
    assert sorted((r.key or b"", r.value or b"", r.headers) for r in records) == sorted(
        (k or b"", v or b"", h) for k, v, h in sent
    )
    assert [r for r in records if r.value is None][0].headers[0] == ("seq", b"5")
    by_partition: dict[int, list[int]] = defaultdict(list)
    for r in records:
        by_partition[r.partition].append(r.offset)
        assert r.topic == topic
        assert r.timestamp_ms is not None and r.timestamp_ms > before_ms
        if r.key is not None:
            # All three implementations hash keys the Java way.
            assert r.partition == murmur2_partition(r.key, 3), r
    for offsets in by_partition.values():
        assert sorted(offsets) == list(range(len(offsets))), "offsets are dense from 0"
        assert offsets == sorted(offsets), "order within a partition is kept"


def test_commit_then_new_consumer_in_group_resumes(client: Client, unique_name: str) -> None:
    topic, group = unique_name, unique_name + "-g"
    tp = TopicPartition(topic, 0)
    with client.admin() as admin:
        admin.create_topics([(topic, 1, 1)])
    with client.producer() as producer:
        for i in range(10):
            producer.send(topic, f"m{i}".encode())
    with client.consumer(group) as first:
        assert first.committed([tp]) == {tp: None}
        first.assign([tp])
        got = poll_until(first, 4)
        # poll may return more than asked across calls; process exactly four
        assert [r.offset for r in got[:4]] == [0, 1, 2, 3]
        first.commit({tp: 4})
        assert first.committed([tp]) == {tp: 4}
    with client.consumer(group) as second:
        assert second.committed([tp]) == {tp: 4}
        second.assign([tp])
        rest = poll_until(second, 6)
    assert [r.offset for r in rest] == [4, 5, 6, 7, 8, 9]
    assert [r.value for r in rest] == [f"m{i}".encode() for i in range(4, 10)]
    with client.consumer(group + "-other") as stranger:
        assert stranger.committed([tp]) == {tp: None}, "commits are per group"


def test_seek(client: Client, unique_name: str) -> None:
    topic = unique_name
    tp = TopicPartition(topic, 0)
    with client.admin() as admin:
        admin.create_topics([(topic, 1, 1), (topic + "-other", 1, 1)])
    with client.producer() as producer:
        for i in range(10):
            producer.send(topic, f"m{i}".encode())
    with client.consumer() as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 7)  # right after assign, before any poll
        assert [r.offset for r in poll_until(consumer, 3)] == [7, 8, 9]
        consumer.seek(tp, 2)
        again = poll_until(consumer, 2)
        assert [r.offset for r in again[:2]] == [2, 3]
        with pytest.raises(ValueError):
            consumer.seek(TopicPartition(topic + "-other", 0), 0)


def test_manual_assign_of_all_partitions_outside_any_group(client: Client, unique_name: str) -> None:
    topic = unique_name
    with client.admin() as admin:
        admin.create_topics([(topic, 4, 1)])
    with client.producer() as producer:
        for i in range(40):
            producer.send(topic, f"m{i}".encode(), partition=i % 4)
    with client.consumer(group_id=None) as reader:
        partitions = all_partitions(reader, topic)
        reader.assign(partitions)
        assert reader.assignment() == set(partitions)
        records = poll_until(reader, 40)
        assert len(records) == 40
        assert {(r.partition, r.offset) for r in records} == {(p, o) for p in range(4) for o in range(10)}
        assert reader.committed(partitions) == {tp: None for tp in partitions}
        with pytest.raises(KafkaTransportError):
            reader.commit({partitions[0]: 1})
        with pytest.raises(ValueError):
            reader.subscribe([topic])


def test_end_offsets_count_every_record_of_multi_record_batches(client: Client, unique_name: str) -> None:
    # Batched produce puts many records in one batch; Tansu's ListOffsets
    # reports base-of-last-batch + 1 for those, which the transport corrects.
    topic = unique_name
    with client.admin() as admin:
        admin.create_topics([(topic, 3, 1)])
    counts = {0: 25, 1: 1, 2: 0}
    with client.producer() as producer:
        for partition, n in counts.items():
            for i in range(n):
                producer.send(topic, b"x" * 10, partition=partition)
    with client.consumer() as consumer:
        tps = all_partitions(consumer, topic)
        assert consumer.end_offsets(tps) == {TopicPartition(topic, p): n for p, n in counts.items()}
        with client.producer() as producer:  # a second batch on top of the first
            for i in range(7):
                producer.send(topic, b"y", partition=0)
        assert consumer.end_offsets([TopicPartition(topic, 0)]) == {TopicPartition(topic, 0): 32}
        with pytest.raises(KafkaTransportError):
            consumer.end_offsets([TopicPartition(topic, 9)])


def test_beginning_offsets_report_the_log_start(client: Client, unique_name: str) -> None:
    """The log start is 0 until retention deletes records (played by the memory broker)."""
    topic = unique_name
    with client.admin() as admin:
        admin.create_topics([(topic, 2, 1)])
    with client.producer() as producer:
        for i in range(5):
            producer.send(topic, b"x", partition=0)
    with client.consumer() as consumer:
        tps = all_partitions(consumer, topic)
        assert consumer.beginning_offsets(tps) == {tp: 0 for tp in tps}
        if hasattr(client, "broker"):  # the memory broker models retention
            client.broker.delete_records(TopicPartition(topic, 0), 3)
            assert consumer.beginning_offsets([TopicPartition(topic, 0)]) == {TopicPartition(topic, 0): 3}


def test_flush_raises_for_failed_delivery_and_producer_survives(client: Client, unique_name: str) -> None:
    topic = unique_name
    with client.admin() as admin:
        admin.create_topics([(topic, 1, 1)])
    with client.producer() as producer:
        producer.send(topic, b"to-nowhere", partition=5)
        with pytest.raises(DeliveryError) as raised:
            producer.flush(timeout=10)
        assert [(f.topic, f.partition, f.value) for f in raised.value.failures] == [(topic, 5, b"to-nowhere")]
        producer.send(topic, b"fine", partition=0)
        producer.flush(timeout=10)  # failures are reported once
        with pytest.raises(TypeError):
            producer.send(topic, "not bytes")  # type: ignore[arg-type]
    with client.consumer() as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        assert [r.value for r in poll_until(consumer, 1)] == [b"fine"]


class GroupMember:
    """Polls one group consumer on its own thread (consumers are not thread-safe).

    Processing a record means recording it; on revoke the member commits what
    it processed, as the service does, so a partition's next owner continues
    exactly there.
    """

    def __init__(self, client: Client, group: str, topic: str) -> None:
        self.client, self.group, self.topic = client, group, topic
        self.records: list[Record] = []
        self.assignments: list[list[TopicPartition]] = []
        self.revocations: list[list[TopicPartition]] = []
        self.commit_errors: list[BaseException] = []
        self.current: set[TopicPartition] = set()
        self._processed: dict[TopicPartition, int] = {}
        self._stop = threading.Event()
        self._ready = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        assert self._ready.wait(30), "consumer did not start"

    def _on_assign(self, tps: list[TopicPartition]) -> None:
        self.assignments.append(tps)
        self.current = set(tps)

    def _on_revoke(self, tps: list[TopicPartition]) -> None:
        self.revocations.append(tps)
        mine = {tp: off for tp, off in self._processed.items() if tp in tps}
        try:
            self.consumer.commit(mine)
        except CommitFailedError as exc:
            self.commit_errors.append(exc)
        # Progress on a revoked partition is the next owner's business now; keeping
        # it would let a later revoke commit a stale (lower) offset over theirs.
        for tp in tps:
            self._processed.pop(tp, None)
        self.current -= set(tps)

    def _run(self) -> None:
        try:
            self.consumer = self.client.consumer(self.group)
            self.consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
            self._ready.set()
            while not self._stop.is_set():
                for r in self.consumer.poll(max_records=100, timeout=0.1):
                    self.records.append(r)
                    self._processed[r.tp] = r.offset + 1
            self.consumer.close()
        except BaseException as exc:  # noqa: BLE001 - surfaced by stop()
            self.error = exc
            self._ready.set()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive()
        if self.error is not None:
            raise self.error


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def test_group_splits_partitions_and_hands_over_at_committed_offsets(client: Client, unique_name: str) -> None:
    topic, group = unique_name, unique_name + "-g"
    partitions = [TopicPartition(topic, p) for p in range(4)]
    with client.admin() as admin:
        admin.create_topics([(topic, 4, 1)])
    producer = client.producer()
    for i in range(40):
        producer.send(topic, f"first-{i}".encode(), partition=i % 4)
    producer.flush()

    a = GroupMember(client, group, topic)
    try:
        wait_for(lambda: a.current == set(partitions) and len(a.records) == 40, 30, "A to own everything and read it")
        b = GroupMember(client, group, topic)
        try:
            wait_for(
                lambda: a.current and b.current and a.current | b.current == set(partitions) and not a.current & b.current,
                30,
                "the group to split the partitions",
            )
            a_split, b_split = set(a.current), set(b.current)
            for i in range(40):
                producer.send(topic, f"second-{i}".encode(), partition=i % 4)
            producer.flush()
            wait_for(lambda: len(a.records) + len(b.records) >= 80, 20, "the second batch")
            time.sleep(0.3)  # any duplicate would show up now
        finally:
            b.stop()
    finally:
        a.stop()
        producer.close()

    # Range assignment of 4 partitions to 2 members: two each.
    assert len(a_split) == 2 and len(b_split) == 2
    assert a.revocations[0] == partitions, "A gave up everything when B joined"
    assert not a.commit_errors and not b.commit_errors, "commits from on_revoke are accepted"
    # No record lost or repeated across the hand-over: A committed on revoke, B resumed there.
    seen = [(r.partition, r.offset) for r in a.records + b.records]
    assert len(seen) == len(set(seen)) == 80
    assert all(r.value.startswith(b"second") for r in b.records)  # type: ignore[union-attr]
    assert {r.tp for r in b.records} == b_split
    assert b.revocations and b.revocations[-1] == sorted(b_split), "close() revokes"
    with client.consumer(group) as probe:
        assert probe.committed(partitions) == {tp: 20 for tp in partitions}


# ---------------------------------------------------------------------------------
# Memory broker specifics (behaviour the real brokers make slow or racy to provoke)
# ---------------------------------------------------------------------------------


def test_memory_group_generations_gate_commits(unique_name: str) -> None:
    client = open_client("memory", KafkaConfig(bootstrap_servers=f"memory://{unique_name}"))
    client.admin().create_topics([("t", 2, 1)])
    both = {TopicPartition("t", 0), TopicPartition("t", 1)}
    a = client.consumer("g", session_timeout_ms=300)
    a.subscribe(["t"])
    a.poll(timeout=0.1)
    assert a.assignment() == both
    b = client.consumer("g", session_timeout_ms=300)
    b.subscribe(["t"])
    b.poll(timeout=0.1)  # b has joined; the rebalance waits for a
    assert b.assignment() == set()
    a.commit({TopicPartition("t", 0): 1})  # accepted: a has not rejoined yet (Kafka's revoke window)
    a.poll(timeout=0.1)  # a revokes and rejoins: the rebalance completes
    assert len(a.assignment()) == 1
    with pytest.raises(CommitFailedError):
        b.commit({TopicPartition("t", 1): 1})  # b has not taken up the new generation
    b.poll(timeout=0.1)
    assert a.assignment() | b.assignment() == both and not a.assignment() & b.assignment()
    b.commit({TopicPartition("t", 1): 1})
    # a member that stops polling during a rebalance is evicted after its session timeout
    c = client.consumer("g", session_timeout_ms=300)
    c.subscribe(["t"])
    c.poll(timeout=0.1)
    a.poll(timeout=0.1)
    time.sleep(0.4)  # b does not poll
    a.poll(timeout=0.5)
    c.poll(timeout=0.1)
    assert a.assignment() | c.assignment() == both
    with pytest.raises(CommitFailedError):
        b.commit({TopicPartition("t", 1): 2})
    assert a.committed(both) == {TopicPartition("t", 0): 1, TopicPartition("t", 1): 1}
    b.poll(timeout=0.1)  # an evicted member rejoins on its next poll
    for consumer in (a, b, c):
        consumer.close()


def test_memory_callback_error_propagates_from_poll(unique_name: str) -> None:
    client = open_client("memory", KafkaConfig(bootstrap_servers=f"memory://{unique_name}"))
    consumer = client.consumer("g")

    def boom(tps: list[TopicPartition]) -> None:
        raise RuntimeError("callback failed")

    consumer.subscribe(["t"], on_assign=boom)
    with pytest.raises(RuntimeError, match="callback failed"):
        consumer.poll(timeout=0.5)


def test_memory_brokers_are_shared_by_name(unique_name: str) -> None:
    one = open_client("memory", KafkaConfig(bootstrap_servers=f"memory://{unique_name}"))
    two = open_client("memory", KafkaConfig(bootstrap_servers=f"memory://{unique_name}"))
    other = open_client("memory", KafkaConfig(bootstrap_servers=f"memory://{unique_name}-other"))
    one.admin().create_topics([("t", 1, 1)])
    assert two.admin().list_topics() == {"t": 1}
    assert other.admin().list_topics() == {}
    assert isinstance(one.broker, MemoryBroker) and one.broker is two.broker  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------------
# Configuration mapping
# ---------------------------------------------------------------------------------


def test_config_maps_security_settings_to_each_client() -> None:
    config = KafkaConfig(
        bootstrap_servers="b1:9093,b2:9093",
        client_id="svc",
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="user",
        sasl_password="secret",
        ssl_cafile="/ca.pem",
        ssl_certfile="/cert.pem",
        ssl_keyfile="/key.pem",
        ssl_check_hostname=False,
        extra={"linger.ms": 20},
    )
    assert confluent_config(config) == {
        "bootstrap.servers": "b1:9093,b2:9093",
        "client.id": "svc",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "user",
        "sasl.password": "secret",
        "ssl.ca.location": "/ca.pem",
        "ssl.certificate.location": "/cert.pem",
        "ssl.key.location": "/key.pem",
        "ssl.endpoint.identification.algorithm": "none",
        "linger.ms": 20,
    }
    kp = kafka_python_config(dataclasses_replace(config, extra={"linger_ms": 20}))
    assert kp == {
        "bootstrap_servers": ["b1:9093", "b2:9093"],
        "client_id": "svc",
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "user",
        "sasl_plain_password": "secret",
        "ssl_cafile": "/ca.pem",
        "ssl_certfile": "/cert.pem",
        "ssl_keyfile": "/key.pem",
        "ssl_check_hostname": False,
        "linger_ms": 20,
    }
    assert "secret" not in repr(config)
    plain = confluent_config(KafkaConfig(bootstrap_servers="h:1"))
    assert plain == {"bootstrap.servers": "h:1", "client.id": "sgm-stream", "security.protocol": "PLAINTEXT"}


def dataclasses_replace(config: KafkaConfig, **changes: object) -> KafkaConfig:
    import dataclasses

    return dataclasses.replace(config, **changes)  # type: ignore[arg-type]


def test_config_validation_and_environment() -> None:
    with pytest.raises(ValueError):
        KafkaConfig(security_protocol="SASL_SSL")  # no mechanism
    with pytest.raises(ValueError):
        KafkaConfig(security_protocol="TLS")  # type: ignore[arg-type]
    env = {
        "KAFKA_BOOTSTRAP_SERVERS": "k:9092",
        "KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "KAFKA_SASL_MECHANISM": "PLAIN",
        "KAFKA_SASL_USERNAME": "u",
        "KAFKA_SSL_CHECK_HOSTNAME": "false",
    }
    config = KafkaConfig.from_env(environ=env, client_id="x")
    assert (config.bootstrap_servers, config.security_protocol, config.sasl_mechanism, config.sasl_username) == (
        "k:9092", "SASL_PLAINTEXT", "PLAIN", "u",
    )
    assert config.ssl_check_hostname is False and config.client_id == "x"


def test_kafka_python_drops_extras_of_other_roles_and_unknown_kind() -> None:
    client = open_client("kafka-python", KafkaConfig(bootstrap_servers="127.0.0.1:1", extra={"max_poll_records": 7}))
    from sgm.stream.kafka import KAFKA_PYTHON_PRODUCER_DEFAULTS, kafka_python_role_options
    from kafka import KafkaConsumer, KafkaProducer

    assert kafka_python_role_options(KafkaProducer.DEFAULT_CONFIG, client.config.extra) == {}
    assert kafka_python_role_options(KafkaConsumer.DEFAULT_CONFIG, client.config.extra) == {"max_poll_records": 7}
    assert "linger_ms" in KAFKA_PYTHON_PRODUCER_DEFAULTS
    with pytest.raises(ValueError):
        open_client("kafka", KafkaConfig())  # type: ignore[arg-type]


def test_murmur2_matches_kafka_python() -> None:
    from kafka.partitioner.default import murmur2

    for key in [b"", b"a", b"ab", b"abc", b"abcd", b"key-123", bytes(range(256))]:
        assert murmur2_partition(key, 7) == (murmur2(key) & 0x7FFFFFFF) % 7


# ---------------------------------------------------------------------------------
# The embedded broker itself
# ---------------------------------------------------------------------------------


@pytest.mark.kafka
def test_embedded_broker_lifecycle_survives_sigstop(tmp_path) -> None:  # noqa: ANN001
    log_path = tmp_path / "tansu.log"
    broker = EmbeddedBroker(log_path=log_path)
    with broker:
        assert broker.is_running
        host, port = broker.bootstrap_servers.split(":")
        assert kafka_metadata_ready(host, int(port))
        pid = broker.pid
        # what the fault-injection tests do; freeze() returns once every thread stopped (os.kill returns before:
        # a Metadata request sent at once was still answered on a loaded machine, a CI-like stress run failed so)
        broker.freeze()
        assert not kafka_metadata_ready(host, int(port), timeout=0.3)
        broker.thaw()
        # It must answer again; under a loaded CI machine the resumed process can take longer than
        # one probe's 1 s to be scheduled and drain the stalled probe's connection, so keep probing.
        deadline = time.monotonic() + 20.0
        while not kafka_metadata_ready(host, int(port)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert kafka_metadata_ready(host, int(port), timeout=5.0)
        os.kill(pid, signal.SIGSTOP)  # left stopped: stop() must still end it
    assert not broker.is_running
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert "listening on" in log_path.read_text()
    assert not kafka_metadata_ready("127.0.0.1", free_port(), timeout=0.3)
    with pytest.raises(RuntimeError):
        _ = broker.bootstrap_servers


@pytest.mark.kafka
def test_a_broker_whose_port_another_broker_holds_is_not_reported_started(tmp_path) -> None:  # noqa: ANN001
    """Tansu logs "listening" before it binds and, on a taken port, exits (code 0) ~15 ms later: the readiness
    probe was answered by the other broker meanwhile, so start() returned a broker that was never there (tests
    that restart a broker on its old port, or wait for a free port to come up, would talk to a stranger)."""
    with EmbeddedBroker(log_path=tmp_path / "first.log") as first:
        second = EmbeddedBroker(port=first.port, log_path=tmp_path / "second.log")
        try:
            with pytest.raises(BrokerStartError, match="exited"):
                second.start()
        finally:
            second.stop()
        assert kafka_metadata_ready(first.host, first.port)  # the first one is untouched
