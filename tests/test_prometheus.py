"""A real Prometheus scrapes a running service; PromQL over the scraped data gives the rates sent.

The service (memory transport, in a thread) is fed the generated stream at a
fixed pace while Prometheus (Debian's ``prometheus`` package, installed here by
:func:`ensure_prometheus` when missing and we are root) scrapes it every
second. Then, through the HTTP API (``/api/v1/query``):

* ``rate(sgm_documents_scored_total[10s])`` and the rate of rejected records
  equal the rates the service achieved in that window (its own counters,
  sampled by the test every 0.1 s), which follow the rates at which valid and
  malformed records were sent;
* the counters equal the totals sent;
* ``histogram_quantile`` over the scoring latency buckets gives a finite time;
* every query of the Grafana dashboard evaluates without error, and returns
  data unless the stream cannot produce it (listed below);
* the deploy alert rules load and evaluate with health "ok".
"""
from __future__ import annotations

import functools
import json
import math
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from sgm.stream.synthetic import SyntheticConfig, SyntheticStream
from sgm.stream.kafka import KafkaConfig, open_client
from tests.service_helpers import start_service
from tests.test_metrics_endpoint import make_config, scrape, wait_until

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "sgm-stream.json"
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
#: Records per second fed to the service, and the window of the rate queries.
RATE = 300.0
WINDOW_S = 10
FEED_SECONDS = 14.0
#: Dashboard queries (panel, legend) allowed to be empty here: none. Series with known label values
#: (Kafka errors by stage, snapshot failures) exist at zero before their first event.
MAY_BE_EMPTY: set[tuple[str, str]] = set()


@functools.lru_cache(maxsize=None)
def ensure_prometheus() -> tuple[str | None, str]:
    """``(path of the prometheus binary, "")``, installing Debian's package if needed; ``(None, why)`` if impossible."""
    found = shutil.which("prometheus")
    if found:
        return found, ""
    if os.geteuid() != 0:
        return None, "prometheus is not on PATH and installing it needs root (apt-get install -y prometheus)"
    if not shutil.which("apt-get"):
        return None, "prometheus is not on PATH and there is no apt-get to install it"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    # The package's postinst would start a system Prometheus on :9090; the tests run their own.
    # policy-rc.d exit 101 is Debian's documented way to say "do not start services".
    policy = Path("/usr/sbin/policy-rc.d")
    created_policy = not policy.exists()
    try:
        if created_policy:
            policy.write_text("#!/bin/sh\nexit 101\n")
            policy.chmod(0o755)
        command = ["apt-get", "install", "-y", "-q", "--no-install-recommends", "prometheus"]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:  # stale package lists: refresh once and retry
            subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, text=True, timeout=600)
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            return None, f"apt-get install prometheus failed: {(done.stderr or done.stdout)[-500:]}"
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"installing prometheus failed: {exc}"
    finally:
        if created_policy:
            policy.unlink(missing_ok=True)
    found = shutil.which("prometheus") or ("/usr/bin/prometheus" if Path("/usr/bin/prometheus").exists() else None)
    return (found, "") if found else (None, "apt-get installed prometheus but the binary is not on PATH")


@pytest.fixture(scope="module")
def prometheus_binary() -> str:
    path, why = ensure_prometheus()
    if path is None:
        pytest.skip(why)
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Prometheus:
    """A Prometheus server in a temporary directory, scraping ``targets`` every second."""

    def __init__(self, binary: str, workdir: Path, targets: list[str]) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        shutil.copy(ALERTS, workdir / "alerts.yml")
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "rule_files": ["alerts.yml"],
            "scrape_configs": [{"job_name": "sgm-test", "static_configs": [{"targets": targets}]}],
        }
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(workdir / "prometheus.log", "wb")
        self.process = subprocess.Popen(
            [binary, f"--config.file={workdir / 'prometheus.yml'}", f"--storage.tsdb.path={workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=workdir)
        self.workdir = workdir

    def ready(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"prometheus exited: {(self.workdir / 'prometheus.log').read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as response:
                return response.status == 200
        except OSError:
            return False

    def api(self, path: str, **params) -> dict:
        url = f"{self.url}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                body = json.loads(response.read())
        except urllib.error.HTTPError as exc:  # 400/422: a bad query; the body says why
            body = json.loads(exc.read())
        return body

    def query(self, expr: str, at: float | None = None) -> list:
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        body = self.api("query", **params)
        assert body["status"] == "success", f"{expr}: {body.get('error')}"
        return body["data"]["result"]

    def scalar(self, expr: str, at: float | None = None) -> float:
        result = self.query(expr, at)
        assert len(result) == 1, f"{expr}: {result}"
        return float(result[0]["value"][1])

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)
        self.log.close()


def dashboard_queries() -> list[tuple[str, str, str]]:
    """``(panel title, legend, PromQL)`` of every target of the Grafana dashboard."""
    out = []
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        for target in panel.get("targets", []):
            out.append((panel["title"], target.get("legendFormat", ""), target["expr"]))
    return out


def grafana_to_promql(expr: str, rate_interval: str) -> str:
    """Substitute what Grafana would: $__rate_interval and the All value of the template variables."""
    return (expr.replace("$__rate_interval", rate_interval).replace("$job", ".*").replace("$instance", ".*"))


def test_prometheus_scrapes_the_service_and_promql_gives_the_rates_sent(prometheus_binary, tmp_path):
    name = f"prom-{time.monotonic_ns()}"
    config = make_config(name, tmp_path, client="memory", bootstrap_servers=f"memory://{name}",
                         snapshot_every_records=1000)
    client = open_client("memory", KafkaConfig(bootstrap_servers=f"memory://{name}"))
    events = list(SyntheticStream(SyntheticConfig(seed=9, n_docs=2200, profiles=("news", "spam"),
                                                  malformed_rate=0.03, label_noise_rate=0.03,
                                                  forget_rate=0.01)).events())
    running = start_service(config, client)
    service = running.service
    host, port = service.metrics_address
    prometheus = Prometheus(prometheus_binary, tmp_path / "prometheus", [f"{host}:{port}"])
    sent: list[tuple[float, object]] = []  # (wall time, event)
    try:
        wait_until(prometheus.ready, 30, "prometheus to be ready", interval=0.2)
        wait_until(lambda: prometheus.query('up{job="sgm-test"} == 1'), 20, "the first scrape", interval=0.2)

        # The service's own counters over time: what Prometheus should see, whatever the machine's load.
        registry = service.metrics.registry
        samples: list[tuple[float, float, float]] = []  # (time, scored, rejected)
        sampling = threading.Event()

        def sample() -> None:
            while not sampling.is_set():
                rejected = sum(m.value for f in registry.collect() if f.name == "sgm_records_rejected"
                               for m in f.samples if m.name == "sgm_records_rejected_total")
                samples.append((time.time(), registry.get_sample_value("sgm_documents_scored_total"), rejected))
                time.sleep(0.1)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        # Feed at RATE records/s, paced against the start so the rate holds whatever a send costs.
        producer = client.producer()
        start = time.time()
        for n, event in enumerate(events):
            due = start + n / RATE
            if due - start > FEED_SECONDS:
                break
            delay = due - time.time()
            if delay > 0:
                time.sleep(delay)
            producer.send(config.train_topic if event.kind == "train" else config.score_topic, event.value,
                          key=event.key)
            producer.flush()
            sent.append((time.time(), event))
        end = time.time()
        producer.close()

        valid_scoring = sum(e.kind == "score" and e.valid for _, e in sent)
        malformed = sum(not e.valid for _, e in sent)
        wait_until(lambda: scrape((host, port)).value("sgm_documents_scored_total") == valid_scoring, 20,
                   "every document scored")
        # Let Prometheus scrape the final values and a few more points after the end.
        time.sleep(3.0)
        sampling.set()
        sampler.join(5)

        # -- rates in a window inside the feeding period, at a fixed evaluation time
        at = end - 1.0
        in_window = [e for t, e in sent if at - WINDOW_S < t <= at]
        sent_scored = sum(e.kind == "score" and e.valid for e in in_window) / WINDOW_S
        sent_rejected = sum(not e.valid for e in in_window) / WINDOW_S

        def counted(t: float) -> tuple[float, float]:
            return max((s for s in samples if s[0] <= t), default=(t, 0.0, 0.0))[1:]

        (scored_then, rejected_then), (scored_now, rejected_now) = counted(at - WINDOW_S), counted(at)
        expected_scored = (scored_now - scored_then) / WINDOW_S
        expected_rejected = (rejected_now - rejected_then) / WINDOW_S
        scored_rate = prometheus.scalar(f"sum(rate(sgm_documents_scored_total[{WINDOW_S}s]))", at)
        rejected_rate = prometheus.scalar(f"sum(rate(sgm_records_rejected_total[{WINDOW_S}s]))", at)
        dead_rate = prometheus.scalar(f"sum(rate(sgm_documents_dead_lettered_total[{WINDOW_S}s]))", at)
        learned_rate = prometheus.scalar(f"sum(rate(sgm_documents_learned_total[{WINDOW_S}s]))", at)
        print(f"\nPromQL at t_end-1s over [{WINDOW_S}s]: scored {scored_rate:.1f}/s (service counted "
              f"{expected_scored:.1f}/s, sent {sent_scored:.1f}/s), rejected {rejected_rate:.2f}/s (service counted "
              f"{expected_rejected:.2f}/s, sent {sent_rejected:.2f}/s), dead-lettered {dead_rate:.2f}/s, "
              f"learned {learned_rate:.1f}/s")
        assert sent_scored > 50
        assert scored_rate == pytest.approx(expected_scored, rel=0.15)
        assert rejected_rate == pytest.approx(expected_rejected, rel=0.25, abs=1.5)
        # the service kept up with the feed (loosely: a loaded machine delays batches, it does not lose them)
        assert expected_scored == pytest.approx(sent_scored, rel=0.5)
        assert dead_rate == rejected_rate  # role all: every rejection is dead-lettered here
        assert learned_rate > 0

        # -- totals: the last scrape holds every record sent
        now = time.time()
        total_scored = prometheus.scalar("sgm_documents_scored_total", now)
        total_rejected = prometheus.scalar("sum(sgm_records_rejected_total)", now)
        print(f"PromQL totals: scored {total_scored:.0f} (sent {valid_scoring}), rejected {total_rejected:.0f} "
              f"(sent {malformed} malformed + corrections of unknown ids)")
        assert total_scored == valid_scoring
        assert total_rejected >= malformed
        assert prometheus.scalar('sum(sgm_documents_dead_lettered_total{source="score"})', now) == sum(
            e.kind == "score" and not e.valid for _, e in sent)

        # -- a latency percentile from the histogram buckets
        p99 = prometheus.scalar(
            f"histogram_quantile(0.99, sum by (le) (rate(sgm_score_latency_seconds_bucket[{WINDOW_S}s])))", at)
        e2e = prometheus.scalar(
            f"histogram_quantile(0.5, sum by (le) (rate(sgm_end_to_end_latency_seconds_bucket[{WINDOW_S}s])))", at)
        print(f"PromQL p99 scoring time per document {p99 * 1e6:.0f} us, p50 end-to-end latency {e2e * 1e3:.1f} ms")
        assert math.isfinite(p99) and 0 < p99 < 1.0
        assert math.isfinite(e2e) and 0 < e2e < 5.0

        # -- every dashboard query is valid PromQL over this data, and shows something
        empty = []
        for title, legend, expr in dashboard_queries():
            result = prometheus.query(grafana_to_promql(expr, f"{WINDOW_S}s"), at=now)
            if not result and (title, legend) not in MAY_BE_EMPTY:
                empty.append(f"{title} / {legend}: {expr}")
        assert not empty, "dashboard queries without data:\n" + "\n".join(empty)

        # -- the alert rules load and evaluate cleanly on real series
        wait_until(lambda: all(r.get("lastEvaluation", "").startswith("2") and not r["lastEvaluation"].startswith("0001")
                               for g in prometheus.api("rules")["data"]["groups"] for r in g["rules"]), 10,
                   "one evaluation of every rule", interval=0.5)
        rules = [r for g in prometheus.api("rules")["data"]["groups"] for r in g["rules"]]
        declared = [r["alert"] for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]]
        assert sorted(r["name"] for r in rules) == sorted(declared)
        bad = [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"]
        assert not bad, bad
        firing = [r["name"] for r in rules if r["state"] == "firing"]
        assert not firing, f"alerts firing on a healthy service: {firing}"
    finally:
        prometheus.stop()
        running.halt()
