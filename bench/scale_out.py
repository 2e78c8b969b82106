"""Classifier scale-out: scored documents per second with N ``sgm serve --role classifier`` processes.

For each N (default 1, 2, 4) on a fresh embedded broker (Tansu):

1. the training topic (1 partition) holds ``--train-docs`` labelled documents
   of the synthetic stream; the scoring topic has ``--partitions`` partitions;
2. N classifier processes start in one consumer group, each with its own state
   directory: each applies the whole training log itself (as every replica
   does) and joins the group;
3. once every process has applied the training log and the group's
   assignment is complete (read from each process's ``sgm_consumer_lag``
   series, which exist only for the partitions it owns), ``--docs`` scoring
   records are produced as fast as the client can (a backlog);
4. a tail consumer on the output topic times the outputs. The rate is
   ``docs / (time of the last output - time the first record was sent)``;
   the steady rate between 10% and 90% of the outputs is reported as well.

CPU seconds of every process (classifiers, broker, this driver: producer and
tail) are read from ``/proc`` before and after, so the table shows where the
machine's cores went. Processes start and join outside the measured window.

Usage::

    .venv/bin/python bench/scale_out.py                      # N = 1, 2, 4; 60,000 docs
    .venv/bin/python bench/scale_out.py --replicas 1 2 --docs 20000 --json out.json
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sgm.consumers.chaos import die_with_parent  # noqa: E402  (children die with the benchmark)
from sgm.consumers.logs import metrics_port_in_log  # noqa: E402
from sgm.stream.broker import EmbeddedBroker  # noqa: E402
from sgm.stream.records import parse_output  # noqa: E402
from sgm.stream.synthetic import SyntheticConfig, SyntheticStream  # noqa: E402
from sgm.stream.kafka import KafkaConfig, TopicPartition, open_client  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (and its reaped children: none here)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


def machine_busy_seconds() -> float:
    """CPU seconds all cores spent busy so far (from /proc/stat): the whole machine, other users included."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / TICKS


def scrape(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2.0) as response:
            return response.read().decode()
    except OSError:
        return ""


def metrics_port(log_path: Path) -> int | None:
    return metrics_port_in_log(log_path.read_bytes().splitlines()) if log_path.exists() else None


def build_data(train_docs: int, score_docs: int, seed: int) -> tuple[list[tuple[bytes, bytes]], list[tuple[bytes, bytes]]]:
    """Training records of the first documents, then scoring records of later ones (no feedback needed)."""
    stream = SyntheticStream(SyntheticConfig(seed=seed, n_docs=train_docs + score_docs, profiles=("news", "spam"),
                                             malformed_rate=0.0, warmup_docs=train_docs, forget_rate=0.0,
                                             label_noise_rate=0.0, feedback_rate=0.0))
    train, score = [], []
    for event in stream.events():
        (train if event.kind == "train" else score).append((event.key, event.value))
    return train, score[:score_docs]


def run_once(n: int, args, train, score, work: Path) -> dict:
    broker = EmbeddedBroker(log_path=work / f"tansu-{n}.log")
    broker.start()
    processes: list[subprocess.Popen] = []
    logs: list[Path] = []
    try:
        client = open_client("confluent", KafkaConfig(bootstrap_servers=broker.bootstrap_servers, client_id="scale-out"))
        topics = {"train": "so-train", "score": "so-score", "output": "so-out", "dlq": "so-dlq"}
        with client.admin() as admin:
            admin.create_topics([(topics["train"], 1, 1), (topics["score"], args.partitions, 1),
                                 (topics["output"], args.partitions, 1), (topics["dlq"], 1, 1)])
        producer = client.producer()
        for key, value in train:
            producer.send(topics["train"], value, key=key)
        producer.flush()
        for i in range(n):
            state = work / f"n{n}-classifier-{i}"
            shutil.rmtree(state, ignore_errors=True)
            log_path = work / f"n{n}-classifier-{i}.log"
            logs.append(log_path)
            cmd = [sys.executable, "-m", "sgm.consumers.cli", "serve", "--role", "classifier",
                   "--bootstrap-servers", broker.bootstrap_servers, "--train-topic", topics["train"],
                   "--score-topic", topics["score"], "--output-topic", topics["output"], "--dlq-topic", topics["dlq"],
                   "--group", "so-classifiers", "--state-dir", str(state), "--create-topics", "false",
                   "--max-poll-records", str(args.max_poll_records), "--half-life", "3600",
                   "--snapshot-every-seconds", "3600", "--snapshot-every-records", "100000000",
                   "--metrics-address", "127.0.0.1:0", "--log-level", "INFO"]
            processes.append(subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=open(log_path, "wb"),
                                              preexec_fn=die_with_parent))
        # Ready = every process applied the training log and the group owns every partition exactly once.
        deadline = time.monotonic() + 120
        ready = False
        owners: dict[int, list[int]] = {}
        while time.monotonic() < deadline and not ready:
            time.sleep(0.5)
            owners = {}
            trained = 0
            for i, log_path in enumerate(logs):
                port = metrics_port(log_path)
                text = scrape(port) if port else ""
                offset = re.search(r'^sgm_training_offset\{partition="0"\} ([0-9.e+]+)$', text, re.M)
                if offset and float(offset.group(1)) >= len(train):
                    trained += 1
                for labels in re.findall(r"^sgm_consumer_lag\{([^}]*)\}", text, re.M):
                    if 'source="score"' in labels:
                        owners.setdefault(int(re.search(r'partition="(\d+)"', labels).group(1)), []).append(i)
            ready = (trained == n and sorted(owners) == list(range(args.partitions))
                     and all(len(v) == 1 for v in owners.values()) and len({v[0] for v in owners.values()}) == min(n, args.partitions))
        if not ready:
            raise RuntimeError(f"N={n}: processes not ready (owners {owners}); see {work}")
        tail = client.consumer(None, **{"fetch.wait.max.ms": 10})
        tail.assign([TopicPartition(topics["output"], p) for p in range(args.partitions)])
        pids = {f"classifier-{i}": p.pid for i, p in enumerate(processes)}
        pids["broker"] = broker.pid
        cpu_before = {name: cpu_seconds(pid) for name, pid in pids.items()}
        driver_before = time.process_time()
        machine_before = machine_busy_seconds()
        load_before = os.getloadavg()[0]
        started = time.monotonic()
        for key, value in score:
            producer.send(topics["score"], value, key=key)
        producer.flush()
        produced = time.monotonic()
        seen: set[str] = set()
        stamps: list[float] = []
        deadline = time.monotonic() + args.timeout
        while len(seen) < len(score) and time.monotonic() < deadline:
            for record in tail.poll(10_000, 0.2):
                doc_id = parse_output(record.value).id
                if doc_id not in seen:
                    seen.add(doc_id)
                    stamps.append(time.monotonic())
        finished = time.monotonic()
        cpu = {name: round(cpu_seconds(pid) - cpu_before[name], 2) for name, pid in pids.items()}
        cpu["driver (producer + tail)"] = round(time.process_time() - driver_before, 2)
        machine = machine_busy_seconds() - machine_before
        cpu["other processes on the machine"] = round(max(machine - sum(cpu.values()), 0.0), 2)
        tail.close()
        if len(seen) < len(score):
            raise RuntimeError(f"N={n}: only {len(seen)}/{len(score)} answered within {args.timeout} s")
        wall = stamps[-1] - started
        lo, hi = stamps[len(stamps) // 10], stamps[(len(stamps) * 9) // 10]
        steady = (len(stamps) * 0.8) / max(hi - lo, 1e-9)
        per_process = {}
        stages: dict[str, list[float]] = {}
        for i, log_path in enumerate(logs):
            text = scrape(metrics_port(log_path))
            scored = re.search(r"^sgm_documents_scored_total ([0-9.e+]+)$", text, re.M)
            per_process[f"classifier-{i}"] = int(float(scored.group(1))) if scored else None
            for stage, total in re.findall(r'^sgm_batch_seconds_sum\{stage="(\w+)"\} ([0-9.e+-]+)$', text, re.M):
                count = re.search(rf'^sgm_batch_seconds_count\{{stage="{stage}"\}} ([0-9.e+]+)$', text, re.M)
                stages.setdefault(stage, [0.0, 0.0])
                stages[stage][0] += float(total)
                stages[stage][1] += float(count.group(1)) if count else 0.0
        return {"replicas": n, "docs": len(score), "seconds": round(wall, 2), "docs_per_s": round(len(score) / wall, 1),
                "steady_docs_per_s": round(steady, 1), "produce_seconds": round(produced - started, 2),
                "cpu_seconds": cpu, "cpu_busy_cores": round(sum(cpu.values()) / max(finished - started, 1e-9), 2),
                "our_busy_cores": round((sum(cpu.values()) - cpu["other processes on the machine"])
                                        / max(finished - started, 1e-9), 2),
                "scored_per_process": per_process,
                "batch_ms_by_stage": {k: round(1000 * v[0] / max(v[1], 1), 1) for k, v in stages.items()},
                "partitions_per_process":
                    {f"classifier-{i}": sorted(p for p, o in owners.items() if o[0] == i) for i in range(n)},
                "load_average_1m_before": round(load_before, 2)}
    finally:
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
        broker.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 2, 4], help="values of N (default 1 2 4)")
    parser.add_argument("--docs", type=int, default=60_000, help="scoring records per run (default 60000)")
    parser.add_argument("--train-docs", type=int, default=5_000, help="training documents (default 5000)")
    parser.add_argument("--partitions", type=int, default=8, help="scoring/output partitions (default 8)")
    parser.add_argument("--max-poll-records", type=int, default=1000, help="batch size of the classifiers")
    parser.add_argument("--repeat", type=int, default=1, help="runs per N; the median is reported")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--seed", type=int, default=4)
    parser.add_argument("--json", dest="json_path", default=None)
    args = parser.parse_args(argv)
    train, score = build_data(args.train_docs, args.docs, args.seed)
    work = Path(tempfile.mkdtemp(prefix="sgm-scale-out-"))
    print(f"scale-out: {len(train)} training records, {len(score)} scoring records, {args.partitions} partitions, "
          f"{os.cpu_count()} cores; work dir {work}", flush=True)
    runs: dict[int, list[dict]] = {n: [] for n in args.replicas}
    for r in range(args.repeat):  # rounds of N = 1, 2, 4, ...: a busy spell of the machine hits every N alike
        for n in args.replicas:
            run = run_once(n, args, train, score, work)
            runs[n].append(run)
            print(f"  round {r + 1} N={n}: {run['docs_per_s']:8.0f} docs/s end to end, {run['steady_docs_per_s']:8.0f} "
                  f"steady; CPU s {run['cpu_seconds']}; busy cores {run['cpu_busy_cores']}; "
                  f"mean ms per batch by stage {run['batch_ms_by_stage']}", flush=True)
    results = []
    for n in args.replicas:
        best = sorted(runs[n], key=lambda x: x["docs_per_s"])[len(runs[n]) // 2]
        best["runs_docs_per_s"] = [x["docs_per_s"] for x in runs[n]]
        best["runs_other_cpu_s"] = [x["cpu_seconds"]["other processes on the machine"] for x in runs[n]]
        results.append(best)
    base = results[0]["docs_per_s"]
    print("\n| N | docs/s (end to end) | steady docs/s | speed-up | all runs docs/s | CPU us/doc classifiers | "
          "broker | driver | CPU s other users | cores busy (ours / machine) |")
    print("|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    for r in results:
        cpu = r["cpu_seconds"]
        cls = sum(v for k, v in cpu.items() if k.startswith("classifier"))
        per_doc = lambda seconds: seconds / r["docs"] * 1e6  # noqa: E731
        print(f"| {r['replicas']} | {r['docs_per_s']:,.0f} | {r['steady_docs_per_s']:,.0f} | {r['docs_per_s'] / base:.2f}x | "
              f"{', '.join(f'{x:,.0f}' for x in r['runs_docs_per_s'])} | {per_doc(cls):.0f} | {per_doc(cpu['broker']):.0f} | "
              f"{per_doc(cpu['driver (producer + tail)']):.0f} | {cpu['other processes on the machine']:.1f} | "
              f"{r['our_busy_cores']:.2f} / {r['cpu_busy_cores']:.2f} |")
    if args.json_path:
        Path(args.json_path).write_text(json.dumps({"machine": {"cores": os.cpu_count(), "python": platform.python_version()},
                                                    "args": vars(args), "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
