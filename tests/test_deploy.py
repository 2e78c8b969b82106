"""deploy/: the Grafana dashboard and alert rules name metrics the service exports; the compose
file, Dockerfile, Prometheus and Grafana provisioning agree with each other and with ``sgm``'s flags.

* Every PromQL expression of the dashboard and the alert rules is taken apart
  (a small lexer: selectors, label matchers, grouping labels, functions) and
  compared with what a running service exposes after a generated stream went
  through it: metric names (histogram ``_bucket``/``_sum``/``_count``, counter
  ``_total``), label names, known PromQL functions.
* The compose file is checked structurally with PyYAML (``docker compose
  config`` too, where a compose client exists: it needs no daemon): Apache
  Kafka in KRaft mode, trainer/classifier/feeder commands parsed by ``sgm``'s own
  argument parser, ports, volumes, depends_on, healthchecks; Prometheus targets
  and Grafana provisioning point at the right services, ports, paths and uids.
* ``promtool`` checks the Prometheus config and runs the alert unit tests.
* The compose feeder's command, run against the session's broker, produces the
  generated stream with one JSON log object per line.
"""
from __future__ import annotations

import base64
import json
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml
import prometheus_client

from sgm.consumers import config as service_config
from sgm.consumers.cli import build_parser
from sgm.stream.synthetic import SyntheticConfig, SyntheticStream
from sgm.stream.kafka import KafkaConfig, TopicPartition, open_client
from tests.service_helpers import start_service
from tests.test_metrics_endpoint import feed_test_then_train, make_config, scrape, stream_events, wait_until
from tests.test_prometheus import ensure_prometheus

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "docker-compose.yml"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "sgm-stream.json"
PROMETHEUS_YML = DEPLOY / "prometheus" / "prometheus.yml"
ALERTS = DEPLOY / "prometheus" / "alerts.yml"

#: Labels Prometheus attaches to every scraped series.
TARGET_LABELS = {"job", "instance"}
#: Series Prometheus makes itself (alert rules may use them; the dashboard does not need to).
SYNTHETIC_SERIES = {"up"}
#: prometheus_client's process collector, under the names every process dashboard expects.
PROCESS_METRICS = {"process_virtual_memory_bytes", "process_resident_memory_bytes", "process_start_time_seconds",
                   "process_cpu_seconds_total", "process_open_fds", "process_max_fds"}
PROMQL_FUNCTIONS = set("""
abs absent absent_over_time ceil changes clamp clamp_max clamp_min day_of_month day_of_week day_of_year days_in_month
delta deriv exp floor histogram_quantile histogram_count histogram_sum histogram_fraction holt_winters hour idelta
increase irate label_join label_replace ln log2 log10 minute month predict_linear rate resets round scalar sgn sort
sort_desc sqrt time timestamp vector year avg_over_time min_over_time max_over_time sum_over_time count_over_time
quantile_over_time stddev_over_time stdvar_over_time last_over_time present_over_time
sum min max avg group stddev stdvar count count_values bottomk topk quantile
""".split())
PROMQL_KEYWORDS = {"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan",
                   "by", "without", "on", "ignoring", "group_left", "group_right"}  # the last six: without a label list
GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")


# ---------------------------------------------------------------------------- PromQL
def parse_promql(expr: str) -> tuple[list[tuple[str, set[str]]], set[str], set[str]]:
    """``([(metric, matched label names)], grouping label names, functions called)`` of an expression.

    >>> found = parse_promql('histogram_quantile(0.9, sum by (le) (rate(x_bucket{job=~"$job"}[5m]))) > 1e3 and on (job) up')
    >>> found[0], sorted(found[1]), sorted(found[2])
    ([('x_bucket', {'job'}), ('up', set())], ['job', 'le'], ['histogram_quantile', 'rate', 'sum'])
    """
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', expr)  # label values may hold anything: empty them first
    text = re.sub(r"'(?:\\.|[^'\\])*'", "''", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)  # range durations, $__rate_interval
    grouping: set[str] = set()
    for _, names in GROUPING.findall(text):
        grouping |= {n.strip() for n in names.split(",") if n.strip()}
    text = GROUPING.sub(" ", text)
    selectors: list[tuple[str, set[str]]] = []
    functions: set[str] = set()
    # (?<![\w.]): not the exponent of a number such as 0.5e3
    for match in re.finditer(r"(?<![\w.])([A-Za-z_:][A-Za-z0-9_:]*)\s*(\{[^}]*\})?\s*(\()?", text):
        name, matchers, call = match.groups()
        if name.lower() in PROMQL_KEYWORDS:
            continue
        if call and not matchers:
            functions.add(name)
            continue
        labels = set(re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)", matchers or ""))
        selectors.append((name, labels))
    return selectors, grouping, functions


def dashboard_expressions() -> list[tuple[str, str]]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [(panel["title"], target["expr"]) for panel in dashboard["panels"] for target in panel.get("targets", [])]


def alert_expressions() -> list[tuple[str, str]]:
    rules = yaml.safe_load(ALERTS.read_text())
    return [(rule["alert"], rule["expr"]) for group in rules["groups"] for rule in group["rules"]]


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict[str, set[str]]:
    """Sample name -> label names, as a service fed with the generated stream exposes them."""
    tmp_path = tmp_path_factory.mktemp("exported")
    name = f"deploy-{time.monotonic_ns()}"
    config = make_config(name, tmp_path, client="memory", bootstrap_servers=f"memory://{name}",
                         snapshot_every_records=200)
    client = open_client("memory", KafkaConfig(bootstrap_servers=f"memory://{name}"))
    events = stream_events(700, seed=8)
    running = start_service(config, client)
    try:
        feed_test_then_train(client, config, running.service, events)
        address = running.service.metrics_address
        wait_until(lambda: len(scrape(address).series("sgm_consumer_lag")) == 1 + config.score_partitions, 10,
                   "lag gauges", interval=0.2)
        found = scrape(address)
    finally:
        running.halt()
    out: dict[str, set[str]] = {}
    for sample_name, labels in found.samples:
        out.setdefault(sample_name, set()).update(k for k, _ in labels)
    # A labelled family without samples yet (sgm_transport_errors_total before any error) is exposed by
    # its HELP/TYPE lines only: take its label names from the metric objects themselves.
    for metric in vars(running.service.metrics).values():
        if isinstance(metric, (prometheus_client.Counter, prometheus_client.Gauge, prometheus_client.Histogram)):
            base = metric._name  # prometheus_client keeps the name without the _total suffix here
            names = {"counter": [f"{base}_total"], "gauge": [base],
                     "histogram": [f"{base}_bucket", f"{base}_sum", f"{base}_count"]}[metric._type]
            for sample_name in names:
                out.setdefault(sample_name, set()).update(metric._labelnames)
                if sample_name.endswith("_bucket"):
                    out[sample_name].add("le")
    assert {n for n in found.types if not n.startswith("sgm_")} <= PROCESS_METRICS  # the standard process_* names
    return out


def check_expression(where: str, expr: str, exported: dict[str, set[str]], allow_synthetic: bool) -> list[str]:
    problems = []
    selectors, grouping, functions = parse_promql(expr)
    if not selectors:
        problems.append(f"{where}: no metric in {expr!r}")
    for function in functions - PROMQL_FUNCTIONS:
        problems.append(f"{where}: unknown PromQL function {function!r}")
    known_labels = set(TARGET_LABELS)
    for metric, labels in selectors:
        if allow_synthetic and metric in SYNTHETIC_SERIES:
            continue
        if metric not in exported:
            problems.append(f"{where}: {metric!r} is not exported by the service")
            continue
        known_labels |= exported[metric]
        for label in labels - exported[metric] - TARGET_LABELS:
            problems.append(f"{where}: {metric!r} has no label {label!r}")
    for label in grouping - known_labels:
        problems.append(f"{where}: groups by {label!r}, which none of its metrics has")
    if "histogram_quantile" in functions:
        buckets = [m for m, _ in selectors if m.endswith("_bucket")]
        if not buckets or "le" not in grouping:
            problems.append(f"{where}: histogram_quantile needs a _bucket series aggregated by le")
    return problems


def test_promql_lexer_finds_names_labels_and_functions():
    selectors, grouping, functions = parse_promql(
        'sum by (source, reason) (rate(sgm_documents_dead_lettered_total{job=~"$job", instance=~"a{b}"}[$__rate_interval]))'
        ' / on (job) group_left sum(sgm_up == 1) > 0.5e3')
    assert selectors == [("sgm_documents_dead_lettered_total", {"job", "instance"}), ("sgm_up", set())]
    assert grouping == {"source", "reason", "job"}
    assert functions == {"sum", "rate"}
    # and it notices what is wrong
    assert check_expression("t", "rate(sgm_nope_total[1m])", {"sgm_up": set()}, False) == [
        "t: 'sgm_nope_total' is not exported by the service"]
    assert check_expression("t", "sum by (color) (sgm_up{shade=\"x\"})", {"sgm_up": {"role"}}, False) == [
        "t: 'sgm_up' has no label 'shade'", "t: groups by 'color', which none of its metrics has"]
    assert check_expression("t", "histogram_quantile(0.5, sum(rate(h_bucket[1m])))", {"h_bucket": {"le"}}, False) == [
        "t: histogram_quantile needs a _bucket series aggregated by le"]


def test_every_dashboard_query_names_exported_metrics_and_labels(exported):
    expressions = dashboard_expressions()
    assert len(expressions) >= 20
    problems = [p for title, expr in expressions for p in check_expression(f"panel {title!r}", expr, exported, False)]
    assert not problems, "\n".join(problems)
    used = {m for _, expr in expressions for m, _ in parse_promql(expr)[0]}
    # the panels the issue asks for: throughput, latency percentiles, lag, DLQ rate, model size, accuracy
    for metric in ("sgm_documents_scored_total", "sgm_documents_learned_total", "sgm_end_to_end_latency_seconds_bucket",
                   "sgm_score_latency_seconds_bucket", "sgm_consumer_lag", "sgm_documents_dead_lettered_total",
                   "sgm_model_postings", "sgm_model_bytes", "sgm_model_labels", "sgm_model_terms",
                   "sgm_prequential_accuracy", "sgm_predictions_total", "sgm_snapshot_age_seconds"):
        assert metric in used, f"no panel shows {metric}"
    assert any("histogram_quantile(0.99" in expr for _, expr in expressions)


def test_every_alert_rule_names_exported_metrics_and_labels(exported):
    problems = [p for name, expr in alert_expressions() for p in check_expression(f"alert {name}", expr, exported, True)]
    assert not problems, "\n".join(problems)


def test_dashboard_json_is_a_provisionable_grafana_dashboard(exported):
    dashboard = json.loads(DASHBOARD.read_text())
    datasource = yaml.safe_load((DEPLOY / "grafana/provisioning/datasources/prometheus.yml").read_text())["datasources"][0]
    assert dashboard["uid"] and dashboard["title"] and isinstance(dashboard["schemaVersion"], int)
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        assert 0 <= grid["x"] and grid["x"] + grid["w"] <= 24 and grid["h"] > 0, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["type"] in ("timeseries", "stat"), panel["title"]
        assert panel["datasource"] == {"type": datasource["type"], "uid": "${datasource}"}, panel["title"]
        ref_ids = [t["refId"] for t in panel["targets"]]
        assert ref_ids and len(ref_ids) == len(set(ref_ids)), panel["title"]
        assert all(t["datasource"] == panel["datasource"] for t in panel["targets"]), panel["title"]
    # panels do not overlap
    cells = Counter((x, y) for p in dashboard["panels"] for x in range(p["gridPos"]["x"], p["gridPos"]["x"] + p["gridPos"]["w"])
                    for y in range(p["gridPos"]["y"], p["gridPos"]["y"] + p["gridPos"]["h"]))
    assert max(cells.values()) == 1, "overlapping panels"
    for variable in dashboard["templating"]["list"]:  # label_values(<selector>, <label>) of a metric we export
        if variable["type"] == "datasource":
            assert variable["query"] == datasource["type"]  # any Prometheus: the provisioned one is the default
            continue
        assert variable["datasource"] == {"type": datasource["type"], "uid": "${datasource}"}, variable["name"]
        selector, label = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", variable["query"]).groups()
        (metric, _), = parse_promql(selector)[0]
        assert metric in exported and label in TARGET_LABELS | exported[metric], variable["name"]
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    used_variables = {v for _, expr in dashboard_expressions() for v in re.findall(r"\$(\w+)", expr)} - {"__rate_interval"}
    assert used_variables <= variables


# ---------------------------------------------------------------------------- compose
def load_compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def compose_command(service: dict) -> list[str]:
    command = service.get("command", [])
    return shlex.split(command) if isinstance(command, str) else list(command)


def port_of(address: str) -> int:
    return int(address.rpartition(":")[2])


#: Keys of the compose specification this file may use (a typo would be silently ignored by YAML).
COMPOSE_TOP_KEYS = {"name", "services", "volumes", "networks", "configs", "secrets"}
COMPOSE_SERVICE_KEYS = {
    "build", "image", "restart", "depends_on", "healthcheck", "command", "entrypoint", "environment", "env_file",
    "volumes", "ports", "expose", "hostname", "container_name", "networks", "user", "working_dir", "labels",
    "logging", "deploy", "stop_signal", "stop_grace_period", "ulimits", "tmpfs", "read_only", "init", "profiles",
    "extra_hosts", "mem_limit", "cpus",
}  # fmt: skip
COMPOSE_HEALTHCHECK_KEYS = {"test", "interval", "timeout", "retries", "start_period", "start_interval", "disable"}


def test_compose_uses_only_compose_spec_keys():
    compose = load_compose()
    assert set(k for k in compose if not k.startswith("x-")) <= COMPOSE_TOP_KEYS
    for name, service in compose["services"].items():
        assert set(service) <= COMPOSE_SERVICE_KEYS, f"{name}: {set(service) - COMPOSE_SERVICE_KEYS}"
        assert service.get("restart", "no") in ("no", "always", "on-failure", "unless-stopped"), name
        assert set(service.get("healthcheck", {})) <= COMPOSE_HEALTHCHECK_KEYS, name
        if isinstance(service.get("depends_on"), dict):
            for dependency, how in service["depends_on"].items():
                assert how["condition"] in ("service_started", "service_healthy", "service_completed_successfully")
        if "build" in service:
            assert set(service["build"]) <= {"context", "dockerfile", "args", "target"}, name


def test_compose_runs_sgm_under_an_init_so_the_crash_watcher_outlives_it():
    # PID 1's death kills the whole container at once: the watcher could never say how `sgm serve` died
    for name in ("trainer", "classifier"):
        assert load_compose()["services"][name].get("init") is True, name


def test_compose_kafka_is_a_single_apache_kafka_node_in_kraft_mode():
    kafka = load_compose()["services"]["kafka"]
    assert kafka["image"].startswith("apache/kafka:") and kafka["image"] != "apache/kafka:latest"
    env = {k: str(v) for k, v in kafka["environment"].items()}
    assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    assert not any("ZOOKEEPER" in k for k in env)
    voters = env["KAFKA_CONTROLLER_QUORUM_VOTERS"].split(",")
    assert len(voters) == 1 and voters[0].startswith(f"{env['KAFKA_NODE_ID']}@")
    assert len(base64.urlsafe_b64decode(env["CLUSTER_ID"] + "==")) == 16  # a KRaft cluster id is a base64 UUID
    listeners = dict(item.split("://") for item in env["KAFKA_LISTENERS"].split(","))
    protocols = dict(item.split(":") for item in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
    assert set(listeners) == set(protocols)
    assert env["KAFKA_CONTROLLER_LISTENER_NAMES"] in listeners
    assert voters[0].split("@")[1] == f"kafka{listeners[env['KAFKA_CONTROLLER_LISTENER_NAMES']]}"
    advertised = dict(item.split("://") for item in env["KAFKA_ADVERTISED_LISTENERS"].split(","))
    assert env["KAFKA_CONTROLLER_LISTENER_NAMES"] not in advertised
    for name, address in advertised.items():
        assert f":{port_of(address)}" == listeners[name]
    for key in ("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"):
        assert env[key] == "1"  # one node: internal topics cannot have more replicas
    assert kafka["healthcheck"]["test"]
    # the address the sgm services use is the listener advertised inside the compose network
    internal = advertised[env["KAFKA_INTER_BROKER_LISTENER_NAME"]]
    for name in ("trainer", "classifier", "feeder"):
        args = build_parser().parse_args(["serve" if name != "feeder" else "feed", *compose_command(load_compose()["services"][name])])
        assert args.bootstrap_servers == internal, name


def test_compose_topics_match_what_the_services_use():
    services = load_compose()["services"]
    command = services["kafka-setup"]["command"]
    script = command if isinstance(command, str) else "\n".join(command)
    created = {topic: int(n) for topic, n in re.findall(r"--create --if-not-exists --topic (\S+) --partitions (\d+)", script)}
    retention = dict(re.findall(r"--topic (\S+) .*--config retention\.ms=(-?\d+)", script))
    config = service_config.from_args(build_parser().parse_args(["serve", *compose_command(services["trainer"])]), environ={})
    assert created == {config.train_topic: config.train_partitions, config.score_topic: config.score_partitions,
                       config.output_topic: config.score_partitions, config.dlq_topic: 1}
    assert retention[config.train_topic] == "-1"  # the models are rebuilt from the whole training log
    for name in ("trainer", "classifier"):
        assert services[name]["depends_on"]["kafka-setup"]["condition"] == "service_completed_successfully"


def test_compose_services_run_real_sgm_commands():
    services = load_compose()["services"]
    assert {"kafka", "trainer", "classifier", "feeder", "prometheus", "grafana"} <= set(services)
    dockerfile = parse_dockerfile(DEPLOY / "Dockerfile")
    scraped_ports = {config["dns_sd_configs"][0]["names"][0]: config["dns_sd_configs"][0]["port"]
                     for config in yaml.safe_load(PROMETHEUS_YML.read_text())["scrape_configs"] if "dns_sd_configs" in config}
    for name, role in (("trainer", "trainer"), ("classifier", "classifier")):
        service = services[name]
        assert (COMPOSE.parent / service["build"]["context"] / service["build"]["dockerfile"]).resolve() == (DEPLOY / "Dockerfile")
        assert "entrypoint" not in service and dockerfile["ENTRYPOINT"] == ["sgm", "serve"]
        args = build_parser().parse_args(["serve", *compose_command(service)])  # unknown flags exit here
        config = service_config.from_args(args, environ={})
        assert config.role == role
        host, _, port = config.metrics_address.rpartition(":")
        assert host == "0.0.0.0", f"{name}: metrics must listen on the container network"
        assert scraped_ports[name] == int(port), f"Prometheus scrapes {name} on another port"
        assert "ports" not in service, f"{name}: replicas must not bind host ports (scaling)"
    feeder = services["feeder"]
    assert feeder["entrypoint"] == ["sgm", "feed"]
    build_parser().parse_args(["feed", *compose_command(feeder)])
    # the trainer keeps its snapshots on a named volume, at the state directory it is given
    trainer_config = service_config.from_args(build_parser().parse_args(["serve", *compose_command(services["trainer"])]), environ={})
    assert any(v.split(":")[1] == trainer_config.state_dir for v in services["trainer"]["volumes"])


def test_compose_references_resolve():
    compose = load_compose()
    services, volumes = compose["services"], set(compose.get("volumes") or {})
    for name, service in services.items():
        assert service.get("image") or service.get("build"), name
        if "image" in service and "build" not in service:
            assert ":" in service["image"] and not service["image"].endswith(":latest"), f"{name}: pin the image"
        depends = service.get("depends_on") or {}
        for dependency in depends:
            assert dependency in services and dependency != name, f"{name} depends on {dependency}"
            if isinstance(depends, dict) and depends[dependency].get("condition") == "service_healthy":
                check = services[dependency].get("healthcheck") or {}
                assert check.get("test") and not check.get("disable"), f"{name} waits for {dependency}'s health"
        for port in service.get("ports", []):
            assert re.fullmatch(r"127\.0\.0\.1:\d+:\d+", str(port)), f"{name}: {port} (bind to loopback)"
        for volume in service.get("volumes", []):
            source, target = volume.split(":")[:2]
            assert target.startswith("/")
            if source.startswith("."):
                assert (COMPOSE.parent / source).exists(), f"{name}: {source} does not exist"
            else:
                assert source in volumes, f"{name}: volume {source} is not declared"
    # Prometheus gets its config and rules; Grafana its provisioning and the dashboard at the provider's path
    mounts = {name: {v.split(":")[1]: (COMPOSE.parent / v.split(":")[0]).resolve() for v in s.get("volumes", [])
                     if v.startswith(".")} for name, s in services.items()}
    prometheus_args = dict(a.split("=", 1) for a in services["prometheus"]["command"] if "=" in a)
    config_dir = mounts["prometheus"][str(Path(prometheus_args["--config.file"]).parent)]
    assert (config_dir / Path(prometheus_args["--config.file"]).name).resolve() == PROMETHEUS_YML
    provider = yaml.safe_load((DEPLOY / "grafana/provisioning/dashboards/sgm.yml").read_text())["providers"][0]
    assert mounts["grafana"][provider["options"]["path"]] == DASHBOARD.parent
    assert mounts["grafana"]["/etc/grafana/provisioning"] == (DEPLOY / "grafana/provisioning")
    home = services["grafana"]["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home == f"{provider['options']['path']}/{DASHBOARD.name}"
    datasource = yaml.safe_load((DEPLOY / "grafana/provisioning/datasources/prometheus.yml").read_text())["datasources"][0]
    assert datasource["url"] == "http://prometheus:9090" and "prometheus" in services


def test_prometheus_config_scrapes_the_compose_services():
    config = yaml.safe_load(PROMETHEUS_YML.read_text())
    services = load_compose()["services"]
    jobs = {c["job_name"]: c for c in config["scrape_configs"]}
    for job, service in (("sgm-trainer", "trainer"), ("sgm-classifier", "classifier")):
        (sd,) = jobs[job]["dns_sd_configs"]
        assert sd["names"] == [service] and sd["type"] == "A" and service in services
    for rule_file in config["rule_files"]:
        assert (PROMETHEUS_YML.parent / rule_file).exists()
    # the alert rules match jobs that exist
    for name, expr in alert_expressions():
        for job in re.findall(r'job=~?"([^"]+)"', expr):
            assert any(re.fullmatch(job, j) for j in jobs), f"{name}: no job matches {job!r}"


def parse_dockerfile(path: Path) -> dict:
    """Instruction -> argument (JSON arrays decoded; COPY and RUN collected as lists)."""
    text = re.sub(r"\\\n", " ", path.read_text())
    out: dict = {"COPY": [], "RUN": [], "ENV": []}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instruction, _, argument = line.partition(" ")
        instruction = instruction.upper()
        value = json.loads(argument) if argument.startswith("[") else argument.strip()
        if instruction in ("COPY", "RUN", "ENV"):
            out[instruction].append(value)
        else:
            out[instruction] = value
    return out


def test_dockerfile_installs_the_package_and_runs_sgm_serve_unprivileged():
    dockerfile = parse_dockerfile(DEPLOY / "Dockerfile")
    assert dockerfile["FROM"] == "python:3.11-slim"
    assert dockerfile["ENTRYPOINT"] == ["sgm", "serve"]
    assert dockerfile["USER"] not in ("root", "0", "")
    assert any(re.search(r"\buseradd\b.*\b" + re.escape(dockerfile["USER"]) + r"\b", run) for run in dockerfile["RUN"])
    assert any(re.search(r"pip install \.", run) for run in dockerfile["RUN"])
    copied = [part for copy in dockerfile["COPY"] for part in copy.split()[:-1]]
    for source in copied:
        assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
    assert {"pyproject.toml", "model", "stream", "consumers"} <= set(copied)
    # the packages pyproject installs are the ones copied
    includes = set(__import__("tomllib").loads((ROOT / "pyproject.toml").read_text())
                   ["tool"]["setuptools"]["package-dir"].values())
    assert includes <= set(copied)
    # the Dockerfile-specific ignore file lets the copied paths through
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().split()
    assert ignore[ignore.index("*") if "*" in ignore else 0] == "*"
    assert {f"!{p}" if (ROOT / p).is_file() else f"!{p}/" for p in copied} <= set(ignore)
    assert "9464" in dockerfile["EXPOSE"]


def test_dockerfile_warms_the_kernel_cache_for_the_user_that_serves():
    """A container starts warm: the numba cache is a fixed directory, filled by `sgm warm` at build time
    as the serving user (after the package is installed: numba checks the source files' stamps)."""
    text = re.sub(r"\\\n", " ", (DEPLOY / "Dockerfile").read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    cache = re.search(r"\bNUMBA_CACHE_DIR=(\S+)", text).group(1)
    assert cache.startswith("/") and "tmp" not in cache
    warm = next(i for i, line in enumerate(lines) if re.fullmatch(r"RUN sgm warm\b.*", line))
    install = next(i for i, line in enumerate(lines) if re.search(r"pip install \.", line))
    user = max(i for i, line in enumerate(lines) if line.startswith("USER "))
    assert install < user < warm, "sgm warm runs after the install, as the serving user"
    assert any("chown" in line and "$NUMBA_CACHE_DIR" in line for line in lines[:user])
    assert "NUMBA_CPU_NAME" in text  # a cache keyed by the build machine's CPU model would miss elsewhere


def test_docker_compose_config_when_a_compose_client_exists():
    """``docker compose config`` validates the file against the compose schema (no daemon needed)."""
    for command in (["docker", "compose"], ["docker-compose"]):
        if shutil.which(command[0]) and subprocess.run([*command, "version"], capture_output=True).returncode == 0:
            break
    else:
        pytest.skip("no docker compose client here (the docker CLI has no compose plugin); the structural checks "
                    "above stand in")
    done = subprocess.run([*command, "-f", str(COMPOSE), "config", "--quiet"], capture_output=True, text=True, cwd=DEPLOY)
    assert done.returncode == 0, done.stderr


# ---------------------------------------------------------------------------- promtool
@pytest.fixture(scope="module")
def promtool() -> str:
    prometheus, why = ensure_prometheus()
    if prometheus is None:
        pytest.skip(why)
    found = shutil.which("promtool") or str(Path(prometheus).with_name("promtool"))
    if not Path(found).exists():
        pytest.skip("promtool is not installed alongside prometheus")
    return found


def test_promtool_accepts_the_config_and_the_rules(promtool):
    for args in (["check", "config", PROMETHEUS_YML.name], ["check", "rules", ALERTS.name]):
        done = subprocess.run([promtool, *args], capture_output=True, text=True, cwd=PROMETHEUS_YML.parent)
        assert done.returncode == 0, done.stdout + done.stderr


def test_alert_rules_fire_as_their_unit_tests_expect(promtool):
    done = subprocess.run([promtool, "test", "rules", "alerts_test.yml"], capture_output=True, text=True,
                          cwd=ALERTS.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    tested = set(re.findall(r"alertname: (\w+)", (ALERTS.parent / "alerts_test.yml").read_text()))
    assert len(tested) >= 5


# ---------------------------------------------------------------------------- the feeder
@pytest.mark.kafka
def test_compose_feeder_command_produces_the_stream(kafka_broker, unique_name):
    feeder = load_compose()["services"]["feeder"]
    args = [a for a in compose_command(feeder) if not a.startswith(("--bootstrap-servers", "--rate"))]
    topics = {"train": f"{unique_name}-train", "score": f"{unique_name}-score"}
    args += [f"--bootstrap-servers={kafka_broker.bootstrap_servers}", "--rate=0", "--docs=300", "--seed=3",
             "--id-prefix=feedtest", f"--train-topic={topics['train']}", f"--score-topic={topics['score']}",
             f"--output-topic={unique_name}-out", f"--dlq-topic={unique_name}-dlq", "--log-format=json"]
    done = subprocess.run([sys.executable, "-m", "sgm.consumers.cli", "feed", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.strip()]  # one JSON object per line
    assert lines and all({"ts", "level", "logger", "msg"} <= set(line) for line in lines)
    summary = lines[-1]
    assert summary["msg"] == "done"
    parsed = build_parser().parse_args(["feed", *args])
    expected = Counter(e.kind for e in SyntheticStream(SyntheticConfig(
        seed=3, n_docs=300, profiles=("news", "spam"), malformed_rate=parsed.malformed_rate, id_prefix="feedtest",
    )).events())
    assert summary["sent"] == dict(expected)
    client = open_client("confluent", kafka_broker.config())
    consumer = client.consumer(None)
    ends = consumer.end_offsets([TopicPartition(topic, p) for topic in topics.values()
                                 for p in consumer.partitions_for(topic)])
    consumer.close()
    for kind, topic in topics.items():
        assert sum(end for tp, end in ends.items() if tp.topic == topic) == expected[kind]


def test_observability_doc_covers_every_metric_panel_and_alert(exported):
    doc = (ROOT / "docs" / "OBSERVABILITY.md").read_text()
    # a histogram is documented by its name; _created samples are prometheus_client's creation times
    families = {re.sub(r"_(bucket|sum|count)$", "", name) for name in exported if not name.endswith("_created")}
    missing = sorted(f for f in families if f"`{f}`" not in doc)
    assert not missing, f"metrics not documented: {missing}"
    titles = [panel["title"] for panel in json.loads(DASHBOARD.read_text())["panels"] if panel["type"] != "row"]
    assert not [t for t in titles if t not in doc], "panels not documented"
    assert not [name for name, _ in alert_expressions() if f"`{name}`" not in doc], "alerts not documented"
