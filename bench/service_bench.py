"""End-to-end service benchmark through the local broker, beside the raw client ceiling.

    python -m bench.service_bench [--docs 50000] [--clients confluent kafka-python] [--json OUT]

For each Kafka client, in one run against one embedded broker (Tansu):

1. **ceiling**: the same scoring records produced to a fresh topic and consumed
   back with no processing, through ``stream.kafka`` (what the service
   uses) -- records/s;
2. **throughput**: a model trained on r8-sized generated news documents, then
   ``--docs`` scoring records waiting in the topic; the service (``--role all``)
   scores them; documents/s is taken from the output records' own timestamps
   (first to last output), so broker start and group join are not counted;
3. **relay ceiling**: the service's transport skeleton with no work in it:
   each polled batch (as many records as the service polls) is relayed to an
   output topic (one output-sized record per input, keyed by the input's key),
   flushed, and its offsets committed -- records/s. What any service that
   writes one acknowledged output per input and commits after the acks can
   reach on this machine before it parses or scores anything;
4. **latency**: scoring records produced at a steady rate (a fraction of the
   measured throughput) for a few seconds; latency of each document is the
   output record's timestamp minus the input record's timestamp (both written
   by producers on this machine), p50 and p99.
5. **training**: ``--train-records`` training records waiting in the topic; a
   trainer (``--role trainer``, in this process) applies them from offset 0
   (poll, validate, tokenize, learn, advance offsets; no snapshot on the way) --
   records/s and process CPU per record (the client's threads included).

Documents are the project's generated news stream with about 100 words each,
like r8. The broker, the benchmark's producers and the service share the
machine's cores, which the ceiling shares too.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import numpy as np
import orjson

from sgm.consumers.config import ServiceConfig
from sgm.stream.broker import EmbeddedBroker
from sgm.stream.records import ScoreRecord, encode_score
from sgm.stream.synthetic import SyntheticConfig, SyntheticStream
from sgm.stream.kafka import KafkaConfig, TopicPartition, open_client

PARTITIONS = 4
MAX_POLL_RECORDS = 2000  # the service's batch in this benchmark; the relay ceiling polls the same


def generated(n_train: int, n_score: int, seed: int) -> tuple[list[bytes], list[bytes]]:
    stream = SyntheticStream(SyntheticConfig(seed=seed, n_docs=n_train + n_score, profiles=("news",),
                                             news_length=100.0, malformed_rate=0.0, forget_rate=0.0,
                                             label_noise_rate=0.0, new_label_every=None))
    train, score = [], []
    for event in stream.events():
        if event.kind == "train" and len(train) < n_train:
            train.append(event.value)
        elif event.kind == "score" and len(train) >= n_train and len(score) < n_score:
            score.append(encode_score(ScoreRecord(id=event.id, text=json.loads(event.value)["text"])))
    return train, score


def produce(client, topic: str, values: list[bytes], rate: float = 0.0) -> None:
    producer = client.producer()
    chunk = 500
    started = time.perf_counter()
    for i in range(0, len(values), chunk):
        for value in values[i : i + chunk]:
            producer.send(topic, value)
        if rate:
            wait = started + (i + chunk) / rate - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
        producer.flush()
    producer.close()


def ceiling(client, values: list[bytes]) -> float:
    topic = f"ceiling-{uuid.uuid4().hex[:8]}"
    with client.admin() as admin:
        admin.create_topics([(topic, PARTITIONS, 1)])
    produce(client, topic, values)
    consumer = client.consumer(None)
    consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    total, first, first_size = 0, None, 0
    deadline = time.monotonic() + 300
    while total < len(values) and time.monotonic() < deadline:
        batch = consumer.poll(1000, 1.0)
        if batch and first is None:
            first, first_size = time.perf_counter(), len(batch)  # steady state: from the first batch on
        total += len(batch)
    rate = (total - first_size) / max(time.perf_counter() - first, 1e-9) if first else 0.0
    consumer.close()
    return rate


#: Bytes of each relayed record: about the size of one output record (id, top-5 labels and posteriors, model).
RELAY_OUTPUT_BYTES = 320


def relay_ceiling(client, values: list[bytes], batch: int) -> float:
    """Records/s through consume -> produce -> flush -> commit with no processing (see the module docstring)."""
    topic = f"relay-{uuid.uuid4().hex[:8]}"
    with client.admin() as admin:
        admin.create_topics([(topic, PARTITIONS, 1), (f"{topic}-out", PARTITIONS, 1)])
    produce(client, topic, values)
    consumer = client.consumer(f"{topic}-g")
    consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    producer = client.producer()
    total, first, first_size = 0, None, 0
    deadline = time.monotonic() + 300
    while total < len(values) and time.monotonic() < deadline:
        records = consumer.poll(batch, 1.0)
        if not records:
            continue
        if first is None:
            first, first_size = time.perf_counter(), len(records)  # steady state: from the first batch on
        for record in records:
            producer.send(f"{topic}-out", record.value[:RELAY_OUTPUT_BYTES], key=record.key)
        producer.flush()
        offsets: dict = {}
        for record in records:
            offsets[record.tp] = max(offsets.get(record.tp, 0), record.offset + 1)
        consumer.commit(offsets)
        total += len(records)
    rate = (total - first_size) / max(time.perf_counter() - first, 1e-9) if first else 0.0
    producer.close()
    consumer.close()
    return rate


def read_outputs(client, topic: str, n: int, timeout: float) -> list:
    """The ``n`` output records, read once they are all written (reading them while the
    service runs would take CPU from it: this machine has two cores)."""
    consumer = client.consumer(None)
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer.assign(tps)
    deadline = time.monotonic() + timeout
    while sum(consumer.end_offsets(tps).values()) < n and time.monotonic() < deadline:
        time.sleep(0.5)
    records: list = []
    while len(records) < n and time.monotonic() < deadline:
        records.extend(consumer.poll(5000, 0.5))
    consumer.close()
    return records


def serve_process(cfg: ServiceConfig, log_path: str) -> subprocess.Popen:
    """``sgm serve`` in its own process, as deployed (the benchmark's threads must not share its GIL)."""
    args = [sys.executable, "-m", "sgm.consumers.cli", "serve", "--bootstrap-servers", cfg.bootstrap_servers,
            "--client", cfg.client, "--train-topic", cfg.train_topic, "--score-topic", cfg.score_topic,
            "--output-topic", cfg.output_topic, "--dlq-topic", cfg.dlq_topic, "--group", cfg.group,
            "--state-dir", cfg.state_dir, "--model", cfg.model, "--metrics-address", "",
            "--snapshot-every-records", str(10**9), "--snapshot-every-seconds", str(10**9),
            "--max-poll-records", str(cfg.max_poll_records), "--log-level", "WARNING"]
    for name, value in cfg.param.items():
        args += ["--param", f"{name}={value}"]
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(log_path, "ab"))


def service_run(kind: str, bootstrap: str, train: list[bytes], score: list[bytes], seed: int) -> dict:
    client = open_client(kind, KafkaConfig(bootstrap_servers=bootstrap))
    name = f"bench-{kind}-{uuid.uuid4().hex[:6]}"
    with tempfile.TemporaryDirectory() as state_dir:
        cfg = ServiceConfig(bootstrap_servers=bootstrap, client=kind, train_topic=f"{name}-train",
                            score_topic=f"{name}-score", output_topic=f"{name}-out", dlq_topic=f"{name}-dlq",
                            group=f"{name}-g", state_dir=state_dir, score_partitions=PARTITIONS,
                            model="uc_pd_jm_dp", param={"beta": 0.3, "mu": 50.0, "delta": 0.5, "ups": 0.2},
                            max_poll_records=MAX_POLL_RECORDS)
        with client.admin() as admin:
            admin.create_topics([(cfg.train_topic, 1, 1), (cfg.score_topic, PARTITIONS, 1),
                                 (cfg.output_topic, PARTITIONS, 1), (cfg.dlq_topic, 1, 1)])
        produce(client, cfg.train_topic, train)
        produce(client, cfg.score_topic, score)
        process = serve_process(cfg, f"{state_dir}/serve.log")
        try:
            outputs = read_outputs(client, cfg.output_topic, len(score), timeout=600)
            stamps = np.array(sorted(r.timestamp_ms for r in outputs), dtype=np.float64)
            throughput = (len(stamps) - 1) / max((stamps[-1] - stamps[0]) / 1000.0, 1e-9) if len(stamps) > 1 else 0.0
            # latency at a steady rate below the throughput
            rate = max(200.0, 0.5 * throughput)
            n_latency = int(min(len(score), rate * 8))
            latency_values = [encode_score(ScoreRecord(id=f"lat-{i}", text=json.loads(v)["text"]))
                              for i, v in enumerate(score[:n_latency])]
            consumer = client.consumer(None)
            tps = [TopicPartition(cfg.output_topic, p) for p in range(PARTITIONS)]
            consumer.assign(tps)
            for tp, end in consumer.end_offsets(tps).items():
                consumer.seek(tp, end)
            feeder = threading.Thread(target=produce, args=(client, cfg.score_topic, latency_values, rate), daemon=True)
            feeder.start()
            latencies, arrivals = [], []
            deadline = time.monotonic() + 120
            while len(latencies) < n_latency and time.monotonic() < deadline:
                for record in consumer.poll(5000, 0.2):
                    if record.key and record.key.startswith(b"lat-"):
                        # produce of the input -> output written: both timestamps are set by producers here
                        output = orjson.loads(record.value)
                        sent_ms = output["scored_at"] * 1000.0 - output["latency_ms"]
                        latencies.append(record.timestamp_ms - sent_ms)
                        arrivals.append(time.perf_counter())
            feeder.join()
            print("latency by quarter (ms):", [round(float(np.median(q)), 1) for q in np.array_split(np.array(latencies), 4)] if latencies else None, flush=True)
            consumer.close()
        finally:
            process.terminate()
            process.wait(60)
    lat = np.array(latencies) if latencies else np.array([np.nan])
    return {"client": kind, "scored": len(outputs), "docs_per_s": throughput, "latency_rate": rate,
            "latency_docs": len(latencies), "latency_p50_ms": float(np.percentile(lat, 50)),
            "latency_p99_ms": float(np.percentile(lat, 99))}


def training_run(kind: str, bootstrap: str, train: list[bytes]) -> dict:
    """Apply ``train`` from a topic with an in-process trainer; records/s and CPU per record."""
    from sgm.consumers.service import Service

    client = open_client(kind, KafkaConfig(bootstrap_servers=bootstrap))
    name = f"bench-train-{kind}-{uuid.uuid4().hex[:6]}"
    with tempfile.TemporaryDirectory() as state_dir:
        cfg = ServiceConfig(bootstrap_servers=bootstrap, client=kind, role="trainer", train_topic=f"{name}-train",
                            score_topic=f"{name}-score", output_topic=f"{name}-out", dlq_topic=f"{name}-dlq",
                            group=f"{name}-g", state_dir=state_dir, metrics_address="",
                            model="uc_pd_jm_dp", param={"beta": 0.3, "mu": 50.0, "delta": 0.5, "ups": 0.2},
                            max_poll_records=MAX_POLL_RECORDS, snapshot_every_records=10**12,
                            snapshot_every_seconds=10**9)
        with client.admin() as admin:
            admin.create_topics([(cfg.train_topic, 1, 1), (cfg.dlq_topic, 1, 1)])
        produce(client, cfg.train_topic, train)
        service = Service(cfg, client=client)
        service.start()
        try:
            wall, cpu = time.perf_counter(), time.process_time()
            while service.train_offsets.get(0, 0) < len(train):
                service.step()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            learned = len(service.model)
        finally:
            service.close()
    return {"client": kind, "train_records": len(train), "learned": learned, "train_records_per_s": len(train) / wall,
            "train_cpu_us_per_record": cpu / len(train) * 1e6}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=50_000, help="scoring records (kafka-python gets a fifth)")
    parser.add_argument("--train", type=int, default=5000, help="training records before scoring")
    parser.add_argument("--train-records", type=int, default=30_000, help="training records of the training measure")
    parser.add_argument("--clients", nargs="+", default=["confluent", "kafka-python"])
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    train, score = generated(args.train, args.docs, args.seed)
    training_set, _ = generated(args.train_records, 0, args.seed + 1)
    words = np.mean([len(json.loads(v)["text"].split()) for v in score[:1000]])
    print(f"{len(train)} training and {len(score)} scoring records, {words:.0f} words per document", flush=True)
    results = []
    with EmbeddedBroker() as broker:
        for kind in args.clients:
            n = len(score) if kind == "confluent" else max(2000, len(score) // 5)
            client = open_client(kind, KafkaConfig(bootstrap_servers=broker.bootstrap_servers))
            ceiling_rate = ceiling(client, score[:n])
            relay_rate = relay_ceiling(client, score[:n], MAX_POLL_RECORDS)
            run = service_run(kind, broker.bootstrap_servers, train, score[:n], args.seed)
            run["ceiling_consume_per_s"] = ceiling_rate
            run["fraction_of_ceiling"] = run["docs_per_s"] / ceiling_rate if ceiling_rate else float("nan")
            run["relay_per_s"] = relay_rate
            run["relay_fraction_of_ceiling"] = relay_rate / ceiling_rate if ceiling_rate else float("nan")
            run["fraction_of_relay"] = run["docs_per_s"] / relay_rate if relay_rate else float("nan")
            results.append(run)
            print(f"{kind:>12}: ceiling (consume, no model) {ceiling_rate:9.0f} rec/s | relay (consume, produce, commit; "
                  f"no parsing, no model) {relay_rate:9.0f} rec/s = {run['relay_fraction_of_ceiling'] * 100:5.1f}% of the "
                  f"ceiling | service {run['docs_per_s']:8.0f} docs/s = {run['fraction_of_ceiling'] * 100:5.1f}% of the "
                  f"ceiling, {run['fraction_of_relay'] * 100:5.1f}% of the relay | latency at "
                  f"{run['latency_rate']:.0f} docs/s: p50 {run['latency_p50_ms']:.1f} ms, p99 {run['latency_p99_ms']:.1f} ms",
                  flush=True)
            trained = training_run(kind, broker.bootstrap_servers, training_set)
            run.update({k: v for k, v in trained.items() if k != "client"})
            print(f"{kind:>12}: trainer {trained['train_records_per_s']:8.0f} records/s from offset 0 "
                  f"({trained['train_records']} records, {trained['learned']} documents learned), "
                  f"CPU {trained['train_cpu_us_per_record']:.1f} us/record", flush=True)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"results": results, "docs": len(score), "train": len(train)}, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
