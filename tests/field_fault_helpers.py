"""Helpers of the field-fault suite (tests/test_field_faults*.py): configs, producing, waiting, reading back."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable

import confluent_kafka as ck

from sgm.consumers.config import ServiceConfig
from sgm.stream.records import TrainRecord, encode_train, parse_dead_letter, parse_output
from sgm.consumers.chaos.processes import json_log_lines as log_lines
from tests.service_helpers import read_topic

ROOT = Path(__file__).resolve().parents[1]


def field_config(bootstrap: str, name: str, state_dir: Path, **overrides) -> ServiceConfig:
    values = dict(bootstrap_servers=bootstrap, train_topic=f"{name}-train", score_topic=f"{name}-score",
                  output_topic=f"{name}-out", dlq_topic=f"{name}-dlq", group=f"{name}-group",
                  state_dir=str(state_dir), metrics_address="127.0.0.1:0", model="uc_pd_jm_dp", score_partitions=1,
                  poll_timeout=0.05, snapshot_every_seconds=10**6, snapshot_every_records=10**9)
    values.update(overrides)
    return ServiceConfig(**values)


def learn(i: int, label: str | None = None, ts: float | None = 1_700_000_000.0, prefix: str = "d") -> bytes:
    """A training record: labels alternate, each class has its own words plus shared ones."""
    label = label or ("spam" if i % 2 else "ham")
    words = f"{label}w{i % 7} {label}w{i % 5} {label}common shared{i % 3} word{i}"
    return encode_train(TrainRecord(id=f"{prefix}{i}", labels=(label,), text=words,
                                    ts=None if ts is None else ts + i))


def produce(bootstrap: str, topic: str, values: list[bytes], *, keys: list[bytes | None] | None = None,
            timestamps_ms: list[int | None] | None = None, partitions: list[int | None] | None = None,
            **conf) -> None:
    """Produce with librdkafka directly (a CreateTime of our choosing; ``conf`` e.g. a larger message.max.bytes)."""
    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    failures: list[str] = []

    def report(err, _msg) -> None:
        if err is not None:
            failures.append(str(err))

    for i, value in enumerate(values):
        kwargs: dict = {"on_delivery": report}
        if keys is not None and keys[i] is not None:
            kwargs["key"] = keys[i]
        if timestamps_ms is not None and timestamps_ms[i] is not None:
            kwargs["timestamp"] = timestamps_ms[i]
        if partitions is not None and partitions[i] is not None:
            kwargs["partition"] = partitions[i]
        while True:
            try:
                producer.produce(topic, value, **kwargs)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    left = producer.flush(60)
    assert not failures and left == 0, f"produce failed: {failures[:3]}, {left} undelivered"


def wait_until(predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def sample(service, name: str, labels: dict | None = None) -> float:
    value = service.metrics.registry.get_sample_value(name, labels or {})
    return 0.0 if value is None else value


def dead_letters(client, topic: str, count: int, timeout: float = 20.0) -> list:
    return [parse_dead_letter(r.value) for r in read_topic(client, topic, lambda r: len(r) >= count, timeout)]


def outputs(client, topic: str, count: int, timeout: float = 30.0) -> list:
    return [parse_output(r.value) for r in read_topic(client, topic, lambda r: len(r) >= count, timeout)]


def ready_status(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=2.0) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def serve(args: list[str], *, log: Path | None = None, preexec=None) -> subprocess.Popen:
    """``sgm serve ARGS`` as its own process (stderr to ``log`` or a pipe)."""
    stderr = open(log, "ab") if log is not None else subprocess.PIPE
    return subprocess.Popen([sys.executable, "-m", "sgm.consumers.cli", "serve", *args], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=stderr, preexec_fn=preexec)


def serve_args(cfg: ServiceConfig, *extra: str) -> list[str]:
    args = ["--bootstrap-servers", cfg.bootstrap_servers, "--train-topic", cfg.train_topic, "--score-topic",
            cfg.score_topic, "--output-topic", cfg.output_topic, "--dlq-topic", cfg.dlq_topic, "--group", cfg.group,
            "--state-dir", cfg.state_dir, "--model", cfg.model, "--metrics-address", "127.0.0.1:0",
            "--score-partitions", str(cfg.score_partitions), "--poll-timeout", "0.05"]
    return args + list(extra)


def metrics_port(path: Path, timeout: float = 60.0) -> int:
    """The metrics port a ``sgm serve`` logged in its configuration or 'service started' line."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in log_lines(path):
            if line.get("msg") == "metrics endpoint" or line.get("msg") == "service started":
                metrics = line.get("metrics")
                if metrics:
                    return int(metrics[1])
        time.sleep(0.1)
    raise AssertionError(f"no metrics port in {path}")


def scrape(port: int, name: str) -> float | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2.0) as response:
            text = response.read().decode()
    except OSError:
        return None
    found = re.search(rf"^{re.escape(name)}(?:{{[^}}]*}})? ([0-9.e+-]+)$", text, re.M)
    return float(found.group(1)) if found else None


def vm_hwm(pid: int) -> int:
    """Peak resident memory of a process, bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def vm_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def terminate(process: subprocess.Popen, timeout: float = 60.0) -> int:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)
        raise AssertionError("sgm serve did not stop on SIGTERM") from None


def kill_quietly(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.kill()
        process.wait(10)
    if process.stderr is not None:
        process.stderr.close()


def env_without_kafka() -> dict:
    return {k: v for k, v in os.environ.items() if not k.startswith("SGM_")}
