"""Cold start: seconds from ``sgm serve``'s start to its first scored document, empty vs warm kernel cache.

    python -m bench.cold_start [--runs 3] [--python OTHER/bin/python ...] [--json OUT]

One embedded broker (Tansu). Each run creates fresh topics holding ``--train``
generated training records and ``--score`` scoring records, starts ``sgm serve
--role all`` as its own process (as deployed), and times from just before the
process starts to the broker timestamp of the first output record scored by a
model that has learned (non-empty ``top_k``; set by the service's producer on
this machine). Outputs of an empty model, scored before the first training batch
(no kernel runs for them), are ``first_output`` among the phases. Every ``--python`` interpreter (default:
this one; give another installation's, e.g. main's, to compare) runs in two modes,
alternated A/B within each round so the machine's drift hits both:

* ``empty``: a new, empty ``NUMBA_CACHE_DIR``: a fresh install, every kernel compiled;
* ``warm``: a ``NUMBA_CACHE_DIR`` that an earlier start (``sgm warm`` when the
  installation has it, else one ``sgm serve`` run) filled: a second start, or a
  container built with ``RUN sgm warm`` (deploy/Dockerfile).

The service's log lines give the phases, in seconds from the start: ``configured``
(Python and the package imported, the configuration read), ``compiling`` and
``kernels`` (the first "compiling" line and "kernels compiled": an empty cache, this
branch only), ``started`` ("service started": model restored, kernels ready,
group joined) and the first output. The
load average is printed with each run: on a shared 2-core machine take the
medians and the ratios, not single runs.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import numpy as np
import orjson

from sgm.stream.broker import EmbeddedBroker
from sgm.stream.kafka import KafkaConfig, TopicPartition, open_client

from .service_bench import PARTITIONS, generated, produce

MODEL = ["--model", "uc_pd_jm_dp", "--param", "beta=0.3", "--param", "mu=50", "--param", "delta=0.5",
         "--param", "ups=0.2"]


def has_warm(python: str) -> bool:
    """Whether that installation has ``sgm warm`` (main before this change does not)."""
    probe = subprocess.run([python, "-c", "import sgm.consumers.commands.warm"], capture_output=True)
    return probe.returncode == 0


def fill_cache(python: str, cache: str, bootstrap: str, train: list[bytes], score: list[bytes]) -> float:
    """Fill ``cache`` the way that installation can: ``sgm warm`` (default model), else one serve run."""
    started = time.perf_counter()
    if has_warm(python):
        subprocess.run([python, "-m", "sgm.consumers.cli", "warm", *MODEL], env={**os.environ, "NUMBA_CACHE_DIR": cache},
                       check=True, stdout=subprocess.DEVNULL)
    else:
        one_start(python, cache, bootstrap, train, score)
    return time.perf_counter() - started


def one_start(python: str, cache: str, bootstrap: str, train: list[bytes], score: list[bytes]) -> dict:
    """Start ``sgm serve`` on fresh topics; seconds to the phases and to the first output record."""
    client = open_client("confluent", KafkaConfig(bootstrap_servers=bootstrap))
    name = f"cold-{uuid.uuid4().hex[:8]}"
    topics = {"train": f"{name}-train", "score": f"{name}-score", "output": f"{name}-out", "dlq": f"{name}-dlq"}
    with client.admin() as admin:
        admin.create_topics([(topics["train"], 1, 1), (topics["score"], PARTITIONS, 1),
                             (topics["output"], PARTITIONS, 1), (topics["dlq"], 1, 1)])
    produce(client, topics["train"], train)
    produce(client, topics["score"], score)
    consumer = client.consumer(None)
    tps = [TopicPartition(topics["output"], p) for p in range(PARTITIONS)]
    consumer.assign(tps)
    state = tempfile.mkdtemp(prefix="sgm-cold-")
    args = [python, "-m", "sgm.consumers.cli", "serve", "--bootstrap-servers", bootstrap, "--client", "confluent",
            "--train-topic", topics["train"], "--score-topic", topics["score"], "--output-topic", topics["output"],
            "--dlq-topic", topics["dlq"], "--group", f"{name}-g", "--state-dir", state, *MODEL,
            "--metrics-address", "", "--log-format", "json", "--log-level", "INFO"]
    env = {**os.environ, "NUMBA_CACHE_DIR": cache, "PYTHONDONTWRITEBYTECODE": "1"}
    phases: dict[str, float] = {}
    load = os.getloadavg()[0]
    started_wall = time.time()
    process = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def read_log() -> None:
        for line in process.stderr:
            seen = time.time() - started_wall
            try:
                message = json.loads(line).get("msg", "")
            except ValueError:
                continue
            for key, text in (("configured", "configuration"), ("compiling", "compiling the scoring kernels"),
                              ("kernels", "kernels compiled"), ("started", "service started")):
                if message.startswith(text) and key not in phases:
                    phases[key] = seen

    reader = threading.Thread(target=read_log, daemon=True)
    reader.start()
    first = scored = None
    deadline = time.monotonic() + 300
    try:
        while scored is None and time.monotonic() < deadline:
            for record in consumer.poll(100, 0.05):
                stamp = record.timestamp_ms / 1000.0
                first = stamp if first is None else min(first, stamp)
                if orjson.loads(record.value)["top_k"]:  # scored by a model that has learned something
                    scored = stamp if scored is None else min(scored, stamp)
    finally:
        process.terminate()
        process.wait(60)
        reader.join(5)
        consumer.close()
        shutil.rmtree(state, ignore_errors=True)
    return {"first_scored_s": (scored - started_wall) if scored else float("nan"),
            "first_output_s": (first - started_wall) if first else float("nan"), "load": load,
            **{f"{k}_s": v for k, v in phases.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="rounds (each: every interpreter, empty then warm)")
    parser.add_argument("--python", nargs="+", default=[sys.executable], help="interpreters of installations to compare")
    parser.add_argument("--train", type=int, default=500, help="training records waiting before the start")
    parser.add_argument("--score", type=int, default=200, help="scoring records waiting before the start")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    train, score = generated(args.train, args.score, seed=5)
    results: list[dict] = []
    scratch = tempfile.mkdtemp(prefix="sgm-numba-")
    try:
        with EmbeddedBroker() as broker:
            warm_dirs = {}
            for python in args.python:
                warm_dirs[python] = os.path.join(scratch, f"warm-{len(warm_dirs)}")
                seconds = fill_cache(python, warm_dirs[python], broker.bootstrap_servers, train, score)
                print(f"{python}: warm cache filled in {seconds:.1f} s "
                      f"({'sgm warm' if has_warm(python) else 'one sgm serve run'})", flush=True)
            for round_ in range(args.runs):
                for python in args.python:
                    for mode in ("empty", "warm"):
                        cache = warm_dirs[python] if mode == "warm" else os.path.join(scratch, uuid.uuid4().hex)
                        run = {"python": python, "mode": mode, "round": round_,
                               **one_start(python, cache, broker.bootstrap_servers, train, score)}
                        results.append(run)
                        phases = ", ".join(f"{k[:-2]} {v:.1f} s" for k, v in run.items()
                                           if k.endswith("_s") and k != "first_scored_s")
                        print(f"  round {round_} {mode:>5} {python}: first scored document after "
                              f"{run['first_scored_s']:.1f} s ({phases}; load {run['load']:.1f})", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print("\nmedians (seconds from process start to the first scored document):")
    for python in args.python:
        medians = {mode: float(np.median([r["first_scored_s"] for r in results
                                          if r["python"] == python and r["mode"] == mode])) for mode in ("empty", "warm")}
        print(f"  {python}: empty cache {medians['empty']:.1f} s, warm cache {medians['warm']:.1f} s", flush=True)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"results": results, "train": args.train, "score": args.score}, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
