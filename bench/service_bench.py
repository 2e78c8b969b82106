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
3. **relay ceiling** (measured before and after the service; their mean): the
   service's transport skeleton with no work in it:
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

``--data FILE [FILE ...]`` adds real mail (``../shared/data``: e.g.
``spamassassin.jsonl.gz``, text, and ``spamassassin-raw.jsonl.gz``, whole messages
as ``raw_b64``, served with ``--preset spam``): every document is both a training
record (its labels) and a scoring record, both waiting in their topics, so the
service interleaves training and scoring batches as it polls them; the relay
relays the same scoring records. ``--repeat`` sends the file several times (new ids).

CPU: the service's process CPU (all its threads; ``/proc``), and the broker's,
from the first output to the last, per scored document (training included in the
real-mail runs); the relay's process CPU and the broker's per relayed record; and
the service's own split by stage (``sgm_batch_seconds``: parse, score, produce,
ack_commit), per document. On two shared cores, these say where the rate goes.
"""
from __future__ import annotations

import argparse
import base64
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import numpy as np
import orjson

from sgm.consumers.config import ServiceConfig
from sgm.stream.broker import EmbeddedBroker, free_port
from sgm.stream.records import ScoreRecord, encode_score
from sgm.stream.synthetic import SyntheticConfig, SyntheticStream
from sgm.stream.kafka import KafkaConfig, TopicPartition, open_client

PARTITIONS = 4
MAX_POLL_RECORDS = 2000  # the service's batch in this benchmark; the relay ceiling polls the same
#: The model the service benchmarks train (service_layers.py too).
MODEL, PARAMS = "uc_pd_jm_dp", {"beta": 0.3, "mu": 50.0, "delta": 0.5, "ups": 0.2}


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


def dataset_records(path: str, limit: int | None, repeat: int) -> tuple[list[bytes], list[bytes], bool]:
    """Training and scoring records of a JSON Lines dataset (text, or whole messages as ``raw_b64``)."""
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        rows = [json.loads(line) for _, line in zip(range(limit or 10**9), handle)]
    raw = "raw_b64" in rows[0]
    train, score = [], []
    for copy in range(repeat):
        for row in rows:
            doc_id = f"{row['id']}#{copy}"
            content = {"raw_b64": row["raw_b64"]} if raw else {"text": row["text"]}
            train.append(orjson.dumps({"id": doc_id, "labels": row["labels"], **content,
                                       **({"ts": row["ts"]} if row.get("ts") else {})}))
            score.append(orjson.dumps({"id": doc_id, **content}))
    return train, score, raw


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (all its threads), from /proc."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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


def relay_ceiling(client, values: list[bytes], batch: int, broker_pid: int | None = None) -> dict:
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
            cpu, broker_cpu = time.process_time(), cpu_seconds(broker_pid) if broker_pid else 0.0
        for record in records:
            producer.send(f"{topic}-out", record.value[:RELAY_OUTPUT_BYTES], key=record.key)
        producer.flush()
        offsets: dict = {}
        for record in records:
            offsets[record.tp] = max(offsets.get(record.tp, 0), record.offset + 1)
        consumer.commit(offsets)
        total += len(records)
    rate = (total - first_size) / max(time.perf_counter() - first, 1e-9) if first else 0.0
    relayed = max(total - first_size, 1)
    out = {"relay_per_s": rate, "relay_cpu_us": (time.process_time() - cpu) / relayed * 1e6 if first else 0.0,
           "relay_broker_cpu_us": (cpu_seconds(broker_pid) - broker_cpu) / relayed * 1e6 if first and broker_pid else 0.0}
    producer.close()
    consumer.close()
    return out


def read_outputs(client, topic: str, n: int, timeout: float, pids: tuple[int, ...] = (), cpu: dict | None = None) -> list:
    """The ``n`` output records, read once they are all written (reading them while the
    service runs would take CPU from it: this machine has two cores). With ``pids``,
    ``cpu`` gets their CPU seconds and the outputs written when the first output
    appeared (``start``) and when the last did (``end``), and when each was seen
    (``start_at``, ``end_at``: ``time.perf_counter()``)."""
    consumer = client.consumer(None)
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer.assign(tps)
    deadline = time.monotonic() + timeout
    written = 0
    while written < n and time.monotonic() < deadline:
        written = sum(consumer.end_offsets(tps).values())
        if cpu is not None and pids and written and "start" not in cpu:
            cpu["start"] = (written, [cpu_seconds(pid) for pid in pids])
            cpu["start_at"] = time.perf_counter()
        time.sleep(0.02 if cpu is not None else 0.5)
    if cpu is not None and pids:
        cpu["end"] = (written, [cpu_seconds(pid) for pid in pids])
        cpu["end_at"] = time.perf_counter()
    records: list = []
    while len(records) < n and time.monotonic() < deadline:
        records.extend(consumer.poll(5000, 0.5))
    consumer.close()
    return records


def serve_process(cfg: ServiceConfig, log_path: str, extra: tuple[str, ...] = ()) -> subprocess.Popen:
    """``sgm serve`` in its own process, as deployed (the benchmark's threads must not share its GIL)."""
    args = [sys.executable, "-m", "sgm.consumers.cli", "serve", "--bootstrap-servers", cfg.bootstrap_servers,
            "--client", cfg.client, "--train-topic", cfg.train_topic, "--score-topic", cfg.score_topic,
            "--output-topic", cfg.output_topic, "--dlq-topic", cfg.dlq_topic, "--group", cfg.group,
            "--state-dir", cfg.state_dir, "--model", cfg.model, "--metrics-address", cfg.metrics_address, *extra,
            "--snapshot-every-records", str(10**9), "--snapshot-every-seconds", str(10**9),
            "--max-poll-records", str(cfg.max_poll_records), "--log-level", "WARNING"]
    for name, value in cfg.param.items():
        args += ["--param", f"{name}={value}"]
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(log_path, "ab"))


_METRIC = re.compile(r'^(sgm_batch_seconds_sum\{stage="(\w+)"[^}]*\}|sgm_documents_scored_total(?:\{[^}]*\})?) (\S+)$', re.M)


def stage_us_per_doc(metrics_address: str) -> dict[str, float]:
    """The service's own seconds per stage (``sgm_batch_seconds_sum``) per scored document, in us."""
    import urllib.request

    with urllib.request.urlopen(f"http://{metrics_address}/metrics", timeout=10) as response:
        text = response.read().decode()
    stages, scored = {}, 0.0
    for match in _METRIC.finditer(text):
        if match.group(2):
            stages[match.group(2)] = float(match.group(3))
        else:
            scored = float(match.group(3))
    return {stage: seconds / scored * 1e6 for stage, seconds in stages.items()} if scored else {}


def service_run(kind: str, bootstrap: str, train: list[bytes], score: list[bytes], seed: int,
                broker_pid: int | None = None, extra: tuple[str, ...] = (), latency: bool = True) -> dict:
    client = open_client(kind, KafkaConfig(bootstrap_servers=bootstrap))
    name = f"bench-{kind}-{uuid.uuid4().hex[:6]}"
    with tempfile.TemporaryDirectory() as state_dir:
        cfg = ServiceConfig(bootstrap_servers=bootstrap, client=kind, train_topic=f"{name}-train",
                            score_topic=f"{name}-score", output_topic=f"{name}-out", dlq_topic=f"{name}-dlq",
                            group=f"{name}-g", state_dir=state_dir, score_partitions=PARTITIONS,
                            model="uc_pd_jm_dp", param={} if extra else {"beta": 0.3, "mu": 50.0, "delta": 0.5, "ups": 0.2},
                            max_poll_records=MAX_POLL_RECORDS, metrics_address=f"127.0.0.1:{free_port()}")
        with client.admin() as admin:
            admin.create_topics([(cfg.train_topic, 1, 1), (cfg.score_topic, PARTITIONS, 1),
                                 (cfg.output_topic, PARTITIONS, 1), (cfg.dlq_topic, 1, 1)])
        produce(client, cfg.train_topic, train)
        produce(client, cfg.score_topic, score)
        process = serve_process(cfg, f"{state_dir}/serve.log", extra)
        cpu: dict = {}
        latencies: list = []
        try:
            pids = (process.pid, broker_pid) if broker_pid else (process.pid,)
            outputs = read_outputs(client, cfg.output_topic, len(score), timeout=600, pids=pids, cpu=cpu)
            stages = stage_us_per_doc(cfg.metrics_address)
            stamps = np.array(sorted(r.timestamp_ms for r in outputs), dtype=np.float64)
            throughput = (len(stamps) - 1) / max((stamps[-1] - stamps[0]) / 1000.0, 1e-9) if len(stamps) > 1 else 0.0
            if not latency:
                rate = 0.0
                raise _Done
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
        except _Done:
            pass
        finally:
            process.terminate()
            process.wait(60)
    lat = np.array(latencies) if latencies else np.array([np.nan])
    out = {"client": kind, "scored": len(outputs), "docs_per_s": throughput, "latency_rate": rate,
           "latency_docs": len(latencies), "latency_p50_ms": float(np.percentile(lat, 50)),
           "latency_p99_ms": float(np.percentile(lat, 99)), "stage_us_per_doc": stages}
    if "start" in cpu and "end" in cpu and cpu["end"][0] > cpu["start"][0]:
        docs = cpu["end"][0] - cpu["start"][0]
        used = [(b - a) / docs * 1e6 for a, b in zip(cpu["start"][1], cpu["end"][1])]
        out["service_cpu_us"] = used[0]
        out["service_broker_cpu_us"] = used[1] if len(used) > 1 else 0.0
    return out


class _Done(Exception):
    """No latency phase (the real-mail runs)."""


def apply_training(client, cfg: ServiceConfig, train: list[bytes]) -> tuple[float, float, int]:
    """Produce ``train`` to ``cfg``'s training topic and apply it with the service's own trainer, in process; the
    wall and CPU seconds of applying it and the documents learned. Closing the service writes its final snapshot."""
    from sgm.consumers.service import Service

    with client.admin() as admin:
        admin.create_topics([(cfg.train_topic, 1, 1), (cfg.dlq_topic, 1, 1)])
    produce(client, cfg.train_topic, train)
    service = Service(cfg, client=client)
    service.start()
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        while service.train_offsets.get(0, 0) < len(train):
            service.step()
        return time.perf_counter() - wall, time.process_time() - cpu, len(service.model)
    finally:
        service.close()


def training_run(kind: str, bootstrap: str, train: list[bytes]) -> dict:
    """Apply ``train`` from a topic with an in-process trainer; records/s and CPU per record."""
    client = open_client(kind, KafkaConfig(bootstrap_servers=bootstrap))
    name = f"bench-train-{kind}-{uuid.uuid4().hex[:6]}"
    with tempfile.TemporaryDirectory() as state_dir:
        cfg = ServiceConfig(bootstrap_servers=bootstrap, client=kind, role="trainer", train_topic=f"{name}-train",
                            score_topic=f"{name}-score", output_topic=f"{name}-out", dlq_topic=f"{name}-dlq",
                            group=f"{name}-g", state_dir=state_dir, metrics_address="",
                            model=MODEL, param=PARAMS,
                            max_poll_records=MAX_POLL_RECORDS, snapshot_every_records=10**12,
                            snapshot_every_seconds=10**9)
        wall, cpu, learned = apply_training(client, cfg, train)
    return {"client": kind, "train_records": len(train), "learned": learned, "train_records_per_s": len(train) / wall,
            "train_cpu_us_per_record": cpu / len(train) * 1e6}


def report(label: str, run: dict) -> None:
    """One line of rates and one of CPU per document: where the service's time goes beside the relay's."""
    print(f"{label:>12}: ceiling (consume, no model) {run['ceiling_consume_per_s']:9.0f} rec/s | relay (consume, produce, "
          f"commit; no parsing, no model; before/after the service "
          f"{'/'.join(f'{r:.0f}' for r in run['relay_runs_per_s'])}) {run['relay_per_s']:9.0f} rec/s = {run['relay_fraction_of_ceiling'] * 100:5.1f}% "
          f"of the ceiling | service {run['docs_per_s']:8.0f} docs/s = {run['fraction_of_ceiling'] * 100:5.1f}% of the "
          f"ceiling, {run['fraction_of_relay'] * 100:5.1f}% of the relay"
          + (f" | latency at {run['latency_rate']:.0f} docs/s: p50 {run['latency_p50_ms']:.1f} ms, p99 "
             f"{run['latency_p99_ms']:.1f} ms" if run["latency_docs"] else ""), flush=True)
    stages = ", ".join(f"{stage} {us:.1f}" for stage, us in run.get("stage_us_per_doc", {}).items())
    print(f"{'':>12}  CPU us per document: service process {run.get('service_cpu_us', float('nan')):.1f} + broker "
          f"{run.get('service_broker_cpu_us', float('nan')):.1f}; relay process {run['relay_cpu_us']:.1f} + broker "
          f"{run['relay_broker_cpu_us']:.1f} (CPU-bound service/relay "
          f"{run.get('cpu_bound_fraction_of_relay', float('nan')) * 100:.1f}%; load {run['load']:.1f}) | service stages "
          f"(wall us/doc): {stages}", flush=True)


def measure(kind: str, broker, train: list[bytes], score: list[bytes], seed: int, extra: tuple[str, ...] = (),
            latency: bool = True) -> dict:
    """Ceiling, relay and service on the same scoring records, one after the other against one broker."""
    client = open_client(kind, KafkaConfig(bootstrap_servers=broker.bootstrap_servers))
    ceiling_rate = ceiling(client, score)
    # The relay before and after the service (a busy machine drifts): the rate is their mean, both are kept.
    relays = [relay_ceiling(client, score, MAX_POLL_RECORDS, broker.pid)]
    run = service_run(kind, broker.bootstrap_servers, train, score, seed, broker.pid, extra, latency)
    relays.append(relay_ceiling(client, score, MAX_POLL_RECORDS, broker.pid))
    relay = {key: float(np.mean([r[key] for r in relays])) for key in relays[0]}
    relay["relay_runs_per_s"] = [r["relay_per_s"] for r in relays]
    run.update(relay)
    run["ceiling_consume_per_s"] = ceiling_rate
    run["fraction_of_ceiling"] = run["docs_per_s"] / ceiling_rate if ceiling_rate else float("nan")
    run["relay_fraction_of_ceiling"] = relay["relay_per_s"] / ceiling_rate if ceiling_rate else float("nan")
    run["fraction_of_relay"] = run["docs_per_s"] / relay["relay_per_s"] if relay["relay_per_s"] else float("nan")
    run["load"] = os.getloadavg()[0]
    # What the rates would be if CPU were the only limit (two cores, service or relay plus the broker):
    # robust to the other load on a shared machine, which moves the rates far more than the CPU per record.
    if "service_cpu_us" in run:
        run["cpu_bound_fraction_of_relay"] = ((run["relay_cpu_us"] + run["relay_broker_cpu_us"])
                                              / (run["service_cpu_us"] + run["service_broker_cpu_us"]))
    return run


def data_path(name: str) -> str:
    """A dataset file: as given, or by name in the shared data folder beside the repository (../shared/data)."""
    if os.path.exists(name):
        return name
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data", name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=50_000, help="scoring records (kafka-python gets a fifth)")
    parser.add_argument("--train", type=int, default=5000, help="training records before scoring")
    parser.add_argument("--train-records", type=int, default=30_000,
                        help="training records of the training measure (0: skip it)")
    parser.add_argument("--clients", nargs="+", default=["confluent", "kafka-python"])
    parser.add_argument("--data", nargs="*", default=[], metavar="FILE",
                        help="real mail too: JSON Lines datasets (text or raw_b64), e.g. spamassassin.jsonl.gz "
                             "spamassassin-raw.jsonl.gz (confluent only)")
    parser.add_argument("--repeat", type=int, default=2, help="times each --data file is sent (new ids)")
    parser.add_argument("--limit", type=int, default=None, help="first documents of each --data file")
    parser.add_argument("--only-data", action="store_true", help="skip the generated stream")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    results = []
    print(f"load average {os.getloadavg()[0]:.1f}", flush=True)
    with EmbeddedBroker() as broker:
        if not args.only_data:
            train, score = generated(args.train, args.docs, args.seed)
            training_set, _ = generated(args.train_records, 0, args.seed + 1) if args.train_records else ([], [])
            words = np.mean([len(json.loads(v)["text"].split()) for v in score[:1000]])
            print(f"{len(train)} training and {len(score)} scoring records, {words:.0f} words per document", flush=True)
            for kind in args.clients:
                n = len(score) if kind == "confluent" else max(2000, len(score) // 5)
                run = measure(kind, broker, train, score[:n], args.seed)
                run["data"] = "generated"
                results.append(run)
                report(kind, run)
                if training_set:
                    trained = training_run(kind, broker.bootstrap_servers, training_set)
                    run.update({k: v for k, v in trained.items() if k != "client"})
                    print(f"{kind:>12}: trainer {trained['train_records_per_s']:8.0f} records/s from offset 0 "
                          f"({trained['train_records']} records, {trained['learned']} documents learned), "
                          f"CPU {trained['train_cpu_us_per_record']:.1f} us/record", flush=True)
        for name in args.data:
            train, score, raw = dataset_records(data_path(name), args.limit, args.repeat)
            size = np.mean([len(v) for v in score])
            extra = ("--preset", "spam") if raw else ()
            print(f"{os.path.basename(name)}: {len(score)} documents ({'whole messages' if raw else 'text'}, "
                  f"{size / 1024:.1f} KB per record), each a training and a scoring record"
                  + (", served with --preset spam" if raw else ", model uc_pd_jm_dp"), flush=True)
            run = measure("confluent", broker, train, score, args.seed, extra, latency=False)
            run["data"] = os.path.basename(name)
            results.append(run)
            report(os.path.basename(name).split(".")[0][:12], run)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"results": results, "docs": args.docs, "train": args.train}, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
