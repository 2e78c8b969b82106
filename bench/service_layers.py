"""The same scoring work served by sgm's service, a Quix Streams app and a Faust agent, beside the relay ceiling.

    python3.11 -m venv .venv-peers && .venv-peers/bin/pip install -e '.[service-peers]'   # quixstreams, faust
    python -m bench.service_layers --peer-python .venv-peers/bin/python [--docs 20000]
        [--layers service quix faust] [--rounds 1] [--data spamassassin.jsonl.gz] [--json OUT]

The peers get an environment of their own (see ``INSTALL``): quixstreams pins confluent-kafka < 2.13, and
the service is run on the client it is deployed with.

One run, one embedded broker (Tansu), per data set:

1. a model (``uc_pd_jm_dp``, the settings of ``bench/service_bench.py``) is trained from a training
   topic by the service's own trainer (``--role trainer``, in this process) and snapshotted into a state
   directory; the ``--docs`` scoring records are produced once into one scoring topic (4 partitions);
2. the **expected** outputs: the same model ranks every scoring record in this process (the top label
   of each id);
3. each layer, in its own process, reads that same scoring topic from offset 0 in its own consumer
   group and writes one output per record to its own output topic:

   * **service**: ``sgm serve`` (``--role all``) restored from a copy of the state directory (its
     training offsets are at the end of the training topic, so it only scores);
   * **quix**: ``bench/service_peer_apps.py quix`` (``quixstreams``: ``StreamingDataFrame.apply`` ->
     ``to_topic``, one message at a time);
   * **faust**: ``bench/service_peer_apps.py faust`` (``faust-streaming``: an agent taking up to 2000
     events at a time);

   the peer apps load the same snapshot and make the outputs with the service's public calls;
4. the **relay** (``service_bench.relay_ceiling``: consume, produce one output-sized record per input,
   flush, commit; no parsing, no model) before and after the layers: their mean is the ceiling.

Per layer: docs/s from the first output seen to the last (the bench watches the output topic's end
offsets every 20 ms; start-up and group joins are not counted, they are reported apart as the seconds
from spawn to the first output), its ratio to the relay, CPU us per document of the layer's process and
of the broker over the same span, and the check of its outputs against the expected ones: missing
ids, duplicated ids, wrong top labels, outputs whose key is not their id. A layer is never given more
than ``--timeout`` seconds; one that loses records is reported with what it wrote.

``--data FILE`` adds real text mail (``../shared/data/spamassassin.jsonl.gz``: the model learns each
message once, ``--repeat`` copies with new ids are scored); a missing file is skipped with a line.
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

import numpy as np
import orjson

from sgm.consumers.config import ServiceConfig
from sgm.stream.broker import EmbeddedBroker, free_port
from sgm.stream.kafka import KafkaConfig, TopicPartition, open_client

from .service_bench import (MAX_POLL_RECORDS, MODEL, PARAMS, PARTITIONS, apply_training, data_path, dataset_records,
                            generated, produce, read_outputs, relay_ceiling, serve_process, stage_us_per_doc)

LAYERS = ("service", "quix", "faust")
#: The import each peer layer needs, and the package that provides it.
PEER_PACKAGES = {"quix": ("quixstreams", "quixstreams"), "faust": ("faust", "faust-streaming")}
#: The peers go into an environment of their own: quixstreams 3.28 requires confluent-kafka < 2.13, and the
#: service on librdkafka 2.12 segfaults when its training topic is recreated with more partitions
#: (tests/test_field_faults.py, test_2_..., 3 runs in a row; 2.16.1: 0 of 3). Each layer runs its own client.
INSTALL = ("python3.11 -m venv .venv-peers && .venv-peers/bin/pip install -e '.[service-peers]', "
           "then --peer-python .venv-peers/bin/python")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=20_000, help="scoring records of the generated stream (0: skip it)")
    parser.add_argument("--train", type=int, default=5000, help="training records of the generated stream")
    parser.add_argument("--layers", nargs="+", choices=LAYERS, default=list(LAYERS))
    parser.add_argument("--rounds", type=int, default=1, help="times each layer runs per data set (order rotated)")
    parser.add_argument("--data", nargs="*", default=[], metavar="FILE",
                        help="real text mail too, e.g. spamassassin.jsonl.gz (absent files are skipped)")
    parser.add_argument("--repeat", type=int, default=2, help="copies of each --data file scored (new ids)")
    parser.add_argument("--limit", type=int, default=None, help="first documents of each --data file")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds a layer may take at most")
    parser.add_argument("--peer-python", default=sys.executable,
                        help="the Python that runs the Quix and Faust apps: one of an environment with the "
                             "service-peers extra (default: this one)")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    return args


def missing_peers(layers: list[str], python: str | None = None) -> list[str]:
    """The packages of the peer layers asked for that are not importable (by ``python``, else here)."""
    def absent(module: str) -> bool:
        if python is None:
            return importlib.util.find_spec(module) is None
        probe = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
        return subprocess.run([python, "-c", probe], capture_output=True).returncode != 0

    return [package for layer in layers if layer in PEER_PACKAGES
            for module, package in [PEER_PACKAGES[layer]] if absent(module)]


def client_versions(python: str) -> str:
    """confluent-kafka's version here and in ``python`` (the peers' environment)."""
    import confluent_kafka

    probe = "import confluent_kafka; print(confluent_kafka.version())"
    theirs = subprocess.run([python, "-c", probe], capture_output=True, text=True).stdout.strip() or "?"
    return f"confluent-kafka {confluent_kafka.version()} for the service and the relay, {theirs} for the peer apps"


@dataclasses.dataclass
class Check:
    """How a layer's outputs compare with the expected top label of each scoring id."""

    expected: int
    outputs: int = 0
    missing: int = 0
    duplicated: int = 0  # outputs beyond the first for an id
    wrong_top: int = 0
    bad_key: int = 0
    unexpected: int = 0  # ids that were never sent
    examples: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.duplicated or self.wrong_top or self.bad_key or self.unexpected)

    def summary(self) -> str:
        if self.ok:
            return f"ok ({self.outputs} outputs, each id once, top labels as expected)"
        parts = [f"{name} {value}" for name, value in (("missing", self.missing), ("duplicated", self.duplicated),
                                                        ("wrong top label", self.wrong_top), ("key != id", self.bad_key),
                                                        ("unknown id", self.unexpected)) if value]
        return f"FAILED: {', '.join(parts)} ({self.outputs} outputs for {self.expected} records; e.g. {self.examples[:3]})"


def check_outputs(outputs: list[tuple[bytes | None, bytes]], expected: dict[str, str]) -> Check:
    """Compare ``(key, value)`` output records with ``expected`` (id -> top label).

    >>> out = [(b"a", b'{"id":"a","top_k":[{"label":"x","p":0.9}]}'), (b"b", b'{"id":"b","top_k":[{"label":"y","p":1}]}')]
    >>> check_outputs(out, {"a": "x", "b": "y"}).ok
    True
    >>> check_outputs(out + out[:1], {"a": "x", "b": "z", "c": "x"}).summary()[:55]
    'FAILED: missing 1, duplicated 1, wrong top label 1 (4 o'
    """
    check = Check(expected=len(expected), outputs=len(outputs))
    seen: set[str] = set()
    for key, value in outputs:
        record = orjson.loads(value)
        doc_id = record["id"]
        if key is None or key.decode("utf-8", "replace") != doc_id:
            check.bad_key += 1
        if doc_id not in expected:
            check.unexpected += 1
            check.examples.append(f"{doc_id}: never sent")
            continue
        if doc_id in seen:
            check.duplicated += 1
            continue
        seen.add(doc_id)
        top = record["top_k"][0]["label"] if record.get("top_k") else None
        if top != expected[doc_id]:
            check.wrong_top += 1
            check.examples.append(f"{doc_id}: {top!r}, expected {expected[doc_id]!r}")
    check.missing = len(expected) - len(seen)
    return check


def train_snapshot(client, bootstrap: str, train: list[bytes], state_dir: str, name: str) -> ServiceConfig:
    """Train the model from a topic with the service's own trainer and snapshot it into ``state_dir``."""
    cfg = ServiceConfig(bootstrap_servers=bootstrap, client="confluent", role="trainer", train_topic=f"{name}-train",
                        score_topic=f"{name}-score", output_topic=f"{name}-out-service", dlq_topic=f"{name}-dlq",
                        group=f"{name}-g", state_dir=state_dir, metrics_address="", model=MODEL, param=PARAMS,
                        max_poll_records=MAX_POLL_RECORDS, snapshot_every_records=10**12,
                        snapshot_every_seconds=10**9, score_partitions=PARTITIONS)
    apply_training(client, cfg, train)  # closing the trainer writes the snapshot
    return cfg


def expected_tops(state_dir: str, score: list[bytes]) -> tuple[dict[str, str], float]:
    """Each scoring id's top label as the snapshot's model ranks its text in this process (``rank_many`` on
    batches of 2000; none of the layers' code), and the documents per second of that pass."""
    from sgm.consumers.userdata.snapshots import load_saved_model

    model = load_saved_model(state_dir).model
    model.rank_many(["warm up"], 1)  # the kernels compile on first use: not part of the timed pass
    tops = {}
    started = time.perf_counter()
    for i in range(0, len(score), MAX_POLL_RECORDS):
        rows = [orjson.loads(value) for value in score[i : i + MAX_POLL_RECORDS]]
        names, _, _ = model.rank_many([row["text"] for row in rows], ServiceConfig().top_k)  # as the service asks
        tops.update((row["id"], top[0] if len(top) else None) for row, top in zip(rows, names))
    return tops, len(score) / (time.perf_counter() - started)


def scorer_cpu_us(state_dir: str, score: list[bytes], n: int = 2000) -> dict[str, float]:
    """CPU us per document of the peer apps' scorer (parse, rank, encode; no Kafka) on the first ``n`` records,
    a batch of up to 2000 per call (as the service and the Faust agent call it) and one record per call (as
    the Quix app must: ``StreamingDataFrame.apply`` gets one message)."""
    from .service_peer_apps import Scorer

    scorer, values = Scorer(state_dir), score[:n]
    scorer.score_batch(values[:1], [None])  # compiled and warm
    started = time.process_time()
    scorer.score_batch(values, [None] * len(values))
    batched = time.process_time() - started
    started = time.process_time()
    for value in values:
        scorer.score_batch([value], [None])
    return {"batched": batched / len(values) * 1e6, "one_at_a_time": (time.process_time() - started) / len(values) * 1e6}


def written(client, topic: str) -> int:
    consumer = client.consumer(None)
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer.assign(tps)
    total = sum(consumer.end_offsets(tps).values())
    consumer.close()
    return total


def spawn(layer: str, cfg: ServiceConfig, output_topic: str, group: str, work_dir: str,
          peer_python: str = sys.executable) -> tuple[subprocess.Popen, str]:
    """The layer's process, reading ``cfg.score_topic`` in ``group`` and writing ``output_topic``, and its
    metrics address (the service's; "" for the peer apps)."""
    log_path = os.path.join(work_dir, f"{layer}-{group}.log")
    if layer == "service":
        state_dir = os.path.join(work_dir, f"state-{group}")
        shutil.copytree(cfg.state_dir, state_dir)
        serve_cfg = dataclasses.replace(cfg, role="all", state_dir=state_dir, group=group, output_topic=output_topic,
                                        metrics_address=f"127.0.0.1:{free_port()}")
        return serve_process(serve_cfg, log_path), serve_cfg.metrics_address
    args = [peer_python, "-m", "bench.service_peer_apps", layer, "--bootstrap-servers", cfg.bootstrap_servers,
            "--score-topic", cfg.score_topic, "--output-topic", output_topic, "--group", group,
            "--state-dir", cfg.state_dir, "--batch", str(MAX_POLL_RECORDS)]
    return subprocess.Popen(args, cwd=REPO, stdout=subprocess.DEVNULL, stderr=open(log_path, "ab")), ""


def run_layer(layer: str, client, cfg: ServiceConfig, broker_pid: int, expected: dict[str, str], work_dir: str,
              timeout: float, peer_python: str = sys.executable) -> dict:
    """One layer over the whole scoring topic: rate, CPU per document, start-up and the output check."""
    group = f"{layer}-{uuid.uuid4().hex[:6]}"
    output_topic = f"{cfg.score_topic}-out-{group}"
    with client.admin() as admin:
        admin.create_topics([(output_topic, PARTITIONS, 1)])
    spawned = time.perf_counter()
    process, metrics_address = spawn(layer, cfg, output_topic, group, work_dir, peer_python)
    cpu: dict = {}
    stages: dict = {}
    try:
        read_outputs(client, output_topic, len(expected), timeout, pids=(process.pid, broker_pid), cpu=cpu)
        exited = process.poll()
        if metrics_address and exited is None:
            stages = stage_us_per_doc(metrics_address)  # the service's own wall time per stage and document
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
    total = written(client, output_topic)
    records = read_outputs(client, output_topic, total, 60) if total else []
    check = check_outputs([(r.key, r.value) for r in records], expected)
    out = {"layer": layer, "check": check.__dict__, "ok": check.ok, "summary": check.summary(),
           "exited_early": exited, "stage_us_per_doc": stages}
    if "start" in cpu and "end" in cpu and cpu["end"][0] > cpu["start"][0]:
        docs = cpu["end"][0] - cpu["start"][0]
        out["docs_per_s"] = docs / max(cpu["end_at"] - cpu["start_at"], 1e-9)
        out["cpu_us"] = (cpu["end"][1][0] - cpu["start"][1][0]) / docs * 1e6
        out["broker_cpu_us"] = (cpu["end"][1][1] - cpu["start"][1][1]) / docs * 1e6
        out["startup_s"] = cpu["start_at"] - spawned
    if check.outputs == 0 or exited is not None:
        with open(os.path.join(work_dir, f"{layer}-{group}.log"), "rb") as handle:
            tail = handle.read()[-600:].decode("utf-8", "replace").strip().splitlines()
        out["log_tail"] = tail[-3:]
    return out


def measure(broker, name: str, train: list[bytes], score: list[bytes], args: argparse.Namespace) -> dict:
    """Train, expect, then the relay and every layer on the same scoring topic (see the module docstring)."""
    client = open_client("confluent", KafkaConfig(bootstrap_servers=broker.bootstrap_servers))
    with tempfile.TemporaryDirectory() as work_dir:
        cfg = train_snapshot(client, broker.bootstrap_servers, train, os.path.join(work_dir, "state"),
                             f"layers-{uuid.uuid4().hex[:6]}")
        expected, in_process = expected_tops(cfg.state_dir, score)
        scorer_cpu = scorer_cpu_us(cfg.state_dir, score)
        with client.admin() as admin:
            admin.create_topics([(cfg.score_topic, PARTITIONS, 1)])
        produce(client, cfg.score_topic, score)
        print(f"{name}: {len(train)} training records, {len(score)} scoring records; in-process scoring "
              f"{in_process:.0f} docs/s (the expected outputs); the peer apps' scorer, CPU us/doc: "
              f"{scorer_cpu['batched']:.1f} batched, {scorer_cpu['one_at_a_time']:.1f} one record per call; "
              f"load {os.getloadavg()[0]:.1f}", flush=True)
        relays = [relay_ceiling(client, score, MAX_POLL_RECORDS, broker.pid)]
        runs = []
        for round_ in range(args.rounds):
            order = args.layers[round_ % len(args.layers):] + args.layers[: round_ % len(args.layers)]
            for layer in order:
                run = run_layer(layer, client, cfg, broker.pid, expected, work_dir, args.timeout, args.peer_python)
                run.update(round=round_ + 1, load=os.getloadavg()[0])
                runs.append(run)
                print(line(run), flush=True)
        relays.append(relay_ceiling(client, score, MAX_POLL_RECORDS, broker.pid))
    relay = {key: float(np.mean([r[key] for r in relays])) for key in relays[0]}
    relay["relay_runs_per_s"] = [r["relay_per_s"] for r in relays]
    for run in runs:
        run["fraction_of_relay"] = run.get("docs_per_s", 0.0) / relay["relay_per_s"] if relay["relay_per_s"] else float("nan")
        # The rate ratio if CPU were the only limit (layer or relay, plus the broker): far steadier than the
        # rates on a shared machine (service_bench's "CPU-bound" ratio).
        if "cpu_us" in run:
            run["cpu_bound_fraction_of_relay"] = ((relay["relay_cpu_us"] + relay["relay_broker_cpu_us"])
                                                  / (run["cpu_us"] + run["broker_cpu_us"]))
    return {"data": name, "docs": len(score), "train": len(train), "in_process_docs_per_s": in_process,
            "scorer_cpu_us": scorer_cpu,
            "relay": relay, "runs": runs}


def line(run: dict) -> str:
    rate = (f"{run['docs_per_s']:8.0f} docs/s, CPU us/doc {run['cpu_us']:6.1f} + broker {run['broker_cpu_us']:5.1f}, "
            f"first output after {run['startup_s']:4.1f} s" if "docs_per_s" in run
            else "no rate (the outputs came between two samples: use more --docs)" if run["check"]["outputs"]
            else "no rate (no outputs)")
    return (f"  round {run['round']} {run['layer']:>8}: {rate} | {run['summary']}"
            + (f" | exited early ({run['exited_early']}): {run.get('log_tail')}" if run["exited_early"] is not None else "")
            + (f" | log: {run['log_tail']}" if "log_tail" in run and run["exited_early"] is None else "")
            + ("\n" + " " * 20 + "stages, wall us/doc: " + ", ".join(f"{k} {v:.1f}" for k, v in run["stage_us_per_doc"].items())
               if run.get("stage_us_per_doc") else ""))


def table(result: dict) -> str:
    """A Markdown table of one data set: the relay, then each layer's runs."""
    relay = result["relay"]
    rows = [f"| {result['data']} ({result['docs']} docs) | docs/s | of relay | CPU us/doc (process + broker) | "
            "CPU-bound of relay | start-up s | outputs |",
            "|---|---|---|---|---|---|---|",
            f"| relay (no work; before/after {'/'.join(f'{r:.0f}' for r in relay['relay_runs_per_s'])}) | "
            f"{relay['relay_per_s']:.0f} | 100% | {relay['relay_cpu_us']:.1f} + {relay['relay_broker_cpu_us']:.1f} | 100% | - | - |"]
    for run in result["runs"]:
        if "docs_per_s" in run:
            rows.append(f"| {run['layer']} (round {run['round']}, load {run['load']:.1f}) | {run['docs_per_s']:.0f} | "
                        f"{run['fraction_of_relay'] * 100:.1f}% | {run['cpu_us']:.1f} + {run['broker_cpu_us']:.1f} | "
                        f"{run['cpu_bound_fraction_of_relay'] * 100:.1f}% | "
                        f"{run['startup_s']:.1f} | {'ok' if run['ok'] else run['summary']} |")
        else:
            rows.append(f"| {run['layer']} (round {run['round']}) | - | - | - | - | - | {run['summary']} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    absent = missing_peers(args.layers, None if args.peer_python == sys.executable else args.peer_python)
    if absent:
        print(f"service_layers: {', '.join(absent)} not installed for {args.peer_python}; install the peers with "
              f"`{INSTALL}` (or choose --layers service)", file=sys.stderr)
        return 2
    results = []
    clients = client_versions(args.peer_python)
    print(f"load average {os.getloadavg()[0]:.1f}; {clients}", flush=True)
    with EmbeddedBroker() as broker:
        if args.docs:
            train, score = generated(args.train, args.docs, args.seed)
            results.append(measure(broker, "generated", train, score, args))
        for name in args.data:
            path = data_path(name)
            if not os.path.exists(path):
                print(f"{name}: not found ({path}); skipped", flush=True)
                continue
            train, score, raw = dataset_records(path, args.limit, args.repeat)
            if raw:
                print(f"{name}: whole messages need the spam preset's decisions, which the peer apps do not make; "
                      "skipped (use the text file)", flush=True)
                continue
            results.append(measure(broker, os.path.basename(name).split(".")[0], train[: len(train) // args.repeat],
                                   score, args))
    for result in results:
        print("\n" + table(result), flush=True)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"results": results, "args": vars(args), "clients": clients}, handle, indent=2)
    return 0 if all(run["ok"] for result in results for run in result["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
