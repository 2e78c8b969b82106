"""The dashboard and metrics fit the tools people already run.

* The Grafana dashboard imports into any Grafana: its datasource is a variable (``${datasource}``, any
  Prometheus), never a fixed uid.
* Process metrics have their standard names (``process_resident_memory_bytes``...), as every process
  dashboard expects.
* Every series a dashboard panel or alert rule queries exists from the moment a service starts, before
  the event it counts has happened (known label values start at zero), so a panel shows 0, not "No data".
  The one exception is the per-label prediction count: its label values are the model's labels.
"""
from __future__ import annotations

import json
import time

from sgm.stream.kafka import KafkaConfig, open_client
from sgm.stream.records import ApplyReason, Reason
from tests.service_helpers import start_service
from tests.test_deploy import DASHBOARD, alert_expressions, dashboard_expressions, parse_promql
from tests.test_metrics_endpoint import make_config, scrape, wait_until

#: Series whose label values come from the data, so they cannot exist before it.
FROM_THE_DATA = {"sgm_predictions_total"}
#: Series Prometheus itself makes.
PROMETHEUS_MADE = {"up"}


def test_dashboard_names_no_datasource_uid():
    text = DASHBOARD.read_text()
    dashboard = json.loads(text)
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    uids = set()

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("datasource"), dict):
                uids.add(node["datasource"].get("uid"))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(dashboard)
    assert uids == {"${datasource}"}
    assert "sgm-prometheus" not in text and "sgm_process_" not in text
    assert any("process_resident_memory_bytes" in expr for _, expr in dashboard_expressions())


def test_every_queried_series_exists_from_the_start(tmp_path):
    name = f"fresh-{time.monotonic_ns()}"
    config = make_config(name, tmp_path, client="memory", bootstrap_servers=f"memory://{name}")
    client = open_client("memory", KafkaConfig(bootstrap_servers=f"memory://{name}"))
    running = start_service(config, client)  # nothing is ever sent: no record, no error, no feedback
    try:
        address = running.service.metrics_address
        wait_until(lambda: scrape(address).series("sgm_consumer_lag"), 10, "the first gauge refresh", interval=0.2)
        found = scrape(address)
    finally:
        running.halt()
    names = found.sample_names()
    queried = {metric for _, expr in dashboard_expressions() + alert_expressions() for metric, _ in parse_promql(expr)[0]}
    missing = sorted(queried - names - FROM_THE_DATA - PROMETHEUS_MADE)
    assert not missing, f"queried but absent before the first event: {missing}"
    assert found.value("sgm_documents_learned_total") == 0 and "process_cpu_seconds_total" in names
    for op in ("unlearn", "forget", "relabel"):
        assert ("sgm_documents_unlearned_total", frozenset({("op", op)})) in found.samples
    for outcome in ("correct", "wrong"):
        assert ("sgm_feedback_total", frozenset({("outcome", outcome)})) in found.samples
    stages = {dict(labels)["stage"] for labels in found.series("sgm_transport_errors_total")}
    assert stages == {"start", "train_poll", "train_check", "score_poll", "score_flush", "score_commit",
                      "score_rewind", "train_dlq"}
    reasons = {dict(labels)["reason"] for labels in found.series("sgm_documents_dead_lettered_total")}
    assert reasons == {r.value for r in Reason} | {r.value for r in ApplyReason}  # future_timestamp, unfetchable, ...
    policies = {dict(labels)["policy"] for labels in found.series("sgm_training_log_resets_total")}
    assert policies == {"rebuild", "stop"}
    outcomes = {dict(labels)["outcome"] for labels in found.series("sgm_partition_stalls_total")}
    assert outcomes == {"skipped", "fetchable"}
    assert all(value == 0 for labels, value in found.series("sgm_transport_errors_total").items())
