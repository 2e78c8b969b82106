"""The /metrics endpoint of a running service fed by the generated stream.

A Service runs in a thread and is fed the synthetic stream test-then-train
(a chunk of records is sent only once every document of the earlier chunks
has its output, so each label arrives after its document was scored). The
endpoint is scraped over HTTP before, during and after, and every count is
compared with what was sent: documents learned, unlearned (by op), scored,
rejected and dead-lettered (by reason and source), histogram counts, feedback
outcomes and the prequential accuracy over its window, per-label predictions,
lag, training offsets, model size and snapshots.

Two runs: the in-process memory transport (fast, exact timing) and the real
Kafka-protocol broker of the session (``kafka_broker``).
"""
from __future__ import annotations

import logging
import threading
import math
import time
import urllib.request
from collections import Counter, deque
from dataclasses import dataclass, field

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sgm.consumers.config import ServiceConfig
from sgm.consumers.prometheus import ACCURACY_WINDOW, ServiceMetrics
from sgm.model import LearnGuardError, build_model
from sgm.stream.records import Op, Reason, parse_train
from sgm.stream.synthetic import SyntheticConfig, SyntheticStream
from sgm.stream.kafka import KafkaConfig, TopicPartition, open_client
from tests.service_helpers import outputs_by_id, read_topic, start_service

#: Families the issue names, and the rest of the documented set (docs/OBSERVABILITY.md).
REQUIRED_FAMILIES = {
    "sgm_documents_learned_total": "counter",
    "sgm_documents_unlearned_total": "counter",
    "sgm_documents_scored_total": "counter",
    "sgm_documents_dead_lettered_total": "counter",
    "sgm_records_rejected_total": "counter",
    "sgm_training_records_total": "counter",
    "sgm_score_latency_seconds": "histogram",
    "sgm_end_to_end_latency_seconds": "histogram",
    "sgm_batch_seconds": "histogram",
    "sgm_consumer_lag": "gauge",
    "sgm_training_offset": "gauge",
    "sgm_model_labels": "gauge",
    "sgm_model_terms": "gauge",
    "sgm_model_documents": "gauge",
    "sgm_model_postings": "gauge",
    "sgm_model_bytes": "gauge",
    "sgm_model_pruned_documents": "gauge",
    "sgm_model_expired_documents": "gauge",
    "sgm_stale_postings_recomputed_total": "counter",
    "sgm_snapshot_age_seconds": "gauge",
    "sgm_snapshot_pending_records": "gauge",
    "sgm_snapshot_bytes": "gauge",
    "sgm_snapshot_duration_seconds": "histogram",
    "sgm_snapshots_total": "counter",
    "sgm_snapshot_failures_total": "counter",
    "sgm_prequential_accuracy": "gauge",
    "sgm_feedback_total": "counter",
    "sgm_predictions_total": "counter",
    "sgm_up": "gauge",
    "process_resident_memory_bytes": "gauge",
}
#: Records per feeding round: fewer than a label's delay (50 documents = about 100 records),
#: so every label arrives in a later round than its document.
CHUNK = 60


# ---------------------------------------------------------------------------- scraping
class Scrape:
    """One scrape of a /metrics endpoint: family types and sample values."""

    def __init__(self, text: str) -> None:
        self.types: dict[str, str] = {}
        self.samples: dict[tuple[str, frozenset], float] = {}
        for family in text_string_to_metric_families(text):
            # The parser strips _total from counter family names; the exposed samples keep it.
            name = family.name + "_total" if family.type == "counter" else family.name
            self.types[name] = family.type
            for sample in family.samples:
                self.samples[(sample.name, frozenset(sample.labels.items()))] = sample.value

    def value(self, name: str, **labels: str) -> float:
        """The sample's value; 0.0 if the series does not exist (a counter never incremented)."""
        return self.samples.get((name, frozenset(labels.items())), 0.0)

    def series(self, name: str) -> dict[frozenset, float]:
        return {labels: v for (n, labels), v in self.samples.items() if n == name}

    def by(self, name: str, *keys: str) -> Counter:
        """Values of ``name`` summed by the label ``keys`` (zero series left out)."""
        out: Counter = Counter()
        for labels, v in self.series(name).items():
            if v:
                d = dict(labels)
                out[tuple(d[k] for k in keys) if len(keys) > 1 else d[keys[0]]] += v
        return out

    def sample_names(self) -> set[str]:
        return {n for n, _ in self.samples}


def scrape(address: tuple[str, int]) -> Scrape:
    host, port = address
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        return Scrape(response.read().decode("utf-8"))


def wait_until(condition, timeout: float, what: str, interval: float = 0.01) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


# ---------------------------------------------------------------------------- expectations
@dataclass
class Expected:
    """What a correct service reports after the whole stream, worked out independently."""

    training_records: int = 0
    learned: int = 0
    unlearned: Counter = field(default_factory=Counter)  # op -> count
    dead: Counter = field(default_factory=Counter)  # (reason, source) -> count
    rejected_ids: set = field(default_factory=set)  # ids a rejection log line must name
    scoring_ids: list = field(default_factory=list)
    model: object = None


def expected_outcome(config: ServiceConfig, events) -> Expected:
    """Replay the stream on a reference model, counting every outcome as the service should."""
    out = Expected(model=build_model(config.model_config()))
    model = out.model
    for event in events:
        if event.kind == "score":
            if event.valid:
                out.scoring_ids.append(event.id)
            else:
                out.dead[(event.expected_reason.value, "score")] += 1
                if event.expected_reason is not Reason.BAD_ID:  # a bad id is logged as cut/invalid text
                    out.rejected_ids.add(event.id)
            continue
        out.training_records += 1
        if not event.valid:
            out.dead[(event.expected_reason.value, "train")] += 1
            if event.expected_reason is not Reason.BAD_ID:
                out.rejected_ids.add(event.id)
            continue
        parsed = parse_train(event.value)
        doc = parsed.text if parsed.text is not None else parsed.terms
        if parsed.op is Op.LEARN:
            held = model.learned_classes(parsed.id)
            if held is not None and held != frozenset(model.check_labels(parsed.labels)):
                out.unlearned["relabel"] += 1  # learned again with other labels: the old ones are unlearned
            model.learn_one(doc, parsed.labels, ts=parsed.ts, id=parsed.id)
            out.learned += 1
        elif parsed.op is Op.FORGET:
            if model.forget(parsed.id):
                out.unlearned["forget"] += 1
            else:
                out.dead[("unknown_id", "train")] += 1
                out.rejected_ids.add(parsed.id)
        else:
            try:
                done = model.unlearn_one(doc, parsed.labels, ts=parsed.ts, id=parsed.id)
            except LearnGuardError:
                out.dead[("unlearn_mismatch", "train")] += 1
                out.rejected_ids.add(parsed.id)
            else:
                if done:
                    out.unlearned["unlearn"] += 1
                else:
                    out.dead[("unknown_id", "train")] += 1
                    out.rejected_ids.add(parsed.id)
    return out


def expected_feedback(events, outputs: dict[str, list], window: int) -> tuple[Counter, float]:
    """Feedback outcomes and windowed accuracy: the first label of each scored id, in log order."""
    predicted = {doc_id: outs[0].top_k[0][0] for doc_id, outs in outputs.items() if outs[0].top_k}
    outcomes: Counter = Counter()
    last: deque[bool] = deque(maxlen=window)
    for event in events:
        if event.kind != "train" or not event.valid or event.op is not Op.LEARN or event.id not in predicted:
            continue
        # the labels as sent (a noisy label is judged as sent: the service cannot know better yet)
        correct = predicted.pop(event.id) in parse_train(event.value).labels
        outcomes["correct" if correct else "wrong"] += 1
        last.append(correct)
    return outcomes, (sum(last) / len(last) if last else math.nan)


# ---------------------------------------------------------------------------- the run
def feed_test_then_train(client, config: ServiceConfig, service, events, checkpoint=None, timeout: float = 30.0) -> None:
    """Send ``events`` in rounds of CHUNK records, each once the earlier rounds' documents are scored.

    ``checkpoint()`` is called once, halfway through.
    """
    producer = client.producer()
    registry = service.metrics.registry
    sent_scoring = 0
    half = len(events) // 2
    for start in range(0, len(events), CHUNK):
        for event in events[start : start + CHUNK]:
            producer.send(config.train_topic if event.kind == "train" else config.score_topic, event.value,
                          key=event.key)
            sent_scoring += event.kind == "score" and event.valid
        producer.flush()
        wait_until(lambda: (registry.get_sample_value("sgm_documents_scored_total") or 0) >= sent_scoring, timeout,
                   f"{sent_scoring} documents scored")
        if checkpoint is not None and start <= half < start + CHUNK:
            checkpoint()
    producer.close()


def run_and_check(client, config: ServiceConfig, events, caplog) -> None:
    expected = expected_outcome(config, events)
    train_end = expected.training_records
    caplog.set_level(logging.WARNING, logger="sgm.service")
    running = start_service(config, client)
    service = running.service
    try:
        address = service.metrics_address
        assert address is not None and address[0] == "127.0.0.1"

        before = scrape(address)
        for name, kind in REQUIRED_FAMILIES.items():
            assert before.types.get(name) == kind, f"{name}: {before.types.get(name)} instead of {kind}"
        assert all(n.startswith(("sgm_", "process_")) for n in before.types)
        assert before.value("sgm_up", role="all") == 1.0
        for name in ("sgm_documents_learned_total", "sgm_documents_scored_total", "sgm_training_records_total"):
            assert before.value(name) == 0.0
        assert math.isnan(before.value("sgm_prequential_accuracy"))  # no feedback yet: no accuracy

        middle: list[Scrape] = []
        feed_test_then_train(client, config, service, events, checkpoint=lambda: middle.append(scrape(address)))

        wait_until(lambda: service.train_offsets.get(0, 0) >= train_end, 30, "every training record applied")
        # Gauges refresh every 2 s on the service's own thread: wait for one that saw the whole stream.
        def caught_up() -> bool:
            now = scrape(address)
            lag = now.series("sgm_consumer_lag")
            return (now.value("sgm_training_offset", partition="0") == train_end
                    and now.value("sgm_model_documents") == len(expected.model)
                    and len(lag) == 1 + config.score_partitions and not any(lag.values()))

        wait_until(caught_up, 15, "the gauges to catch up (offsets, model size, zero lag)", interval=0.2)
        final = scrape(address)
        outputs = outputs_by_id(read_topic(client, config.output_topic, lambda r: len(r) >= len(expected.scoring_ids)))
    finally:
        running.halt()

    # -- counters equal what was sent
    assert final.value("sgm_training_records_total") == train_end
    assert final.value("sgm_documents_learned_total") == expected.learned
    assert final.by("sgm_documents_unlearned_total", "op") == expected.unlearned
    assert final.value("sgm_documents_scored_total") == len(expected.scoring_ids)
    assert final.by("sgm_documents_dead_lettered_total", "reason", "source") == expected.dead
    assert final.by("sgm_records_rejected_total", "reason", "source") == expected.dead  # role all: every one written
    assert sum(expected.dead.values()) > 0 and expected.unlearned["unlearn"] > 0  # the stream exercised them

    # -- histograms: one observation per scored document, cumulative buckets
    for name in ("sgm_score_latency_seconds", "sgm_end_to_end_latency_seconds"):
        assert final.value(f"{name}_count") == len(expected.scoring_ids), name
        assert final.value(f"{name}_sum") > 0.0, name
        buckets = sorted(((float(dict(labels)["le"]), v) for labels, v in final.series(f"{name}_bucket").items()))
        assert [v for _, v in buckets] == sorted(v for _, v in buckets) and buckets[-1] == (math.inf, len(expected.scoring_ids))
    stages = final.by("sgm_batch_seconds_count", "stage")
    assert set(stages) == {"parse", "score", "produce", "ack_commit"} and len(set(stages.values())) == 1

    # -- the counters moved while documents flowed
    (mid,) = middle
    for name in ("sgm_documents_learned_total", "sgm_documents_scored_total", "sgm_training_records_total",
                 "sgm_score_latency_seconds_count"):
        assert 0 < mid.value(name) < final.value(name), name

    # -- prequential accuracy: every scored id got its label later, in log order
    outcomes, accuracy = expected_feedback(events, outputs, ACCURACY_WINDOW)
    # Documents scored before the classifier had read any training record have no prediction to judge.
    predicted = [o[0] for o in outputs.values() if o[0].top_k]
    assert len(outputs) == len(expected.scoring_ids) and len(predicted) >= 0.95 * len(outputs)
    assert sum(outcomes.values()) == len(predicted)
    assert final.by("sgm_feedback_total", "outcome") == outcomes
    assert final.value("sgm_prequential_accuracy") == pytest.approx(accuracy, abs=1e-12)
    assert 0.5 < accuracy <= 1.0
    assert not math.isnan(mid.value("sgm_prequential_accuracy"))
    # -- per-label predictions: the top label of every output
    assert final.by("sgm_predictions_total", "label") == Counter(o.top_k[0][0] for o in predicted)

    # -- positions: nothing left behind, training offset = end of the training log
    lag = final.series("sgm_consumer_lag")
    assert lag and not any(lag.values()), lag
    assert {(d["source"], d["topic"], d["partition"]) for d in map(dict, lag)} == (
        {("train", config.train_topic, "0")}
        | {("score", config.score_topic, str(p)) for p in range(config.score_partitions)})
    assert final.value("sgm_training_offset", partition="0") == train_end

    # -- model size equals the reference model's
    stats = expected.model.stats()
    assert final.value("sgm_model_documents") == stats["documents"]
    assert final.value("sgm_model_labels") == stats["classes"]
    assert final.value("sgm_model_terms") == stats["vocabulary"]
    assert final.value("sgm_model_postings") == stats["entries"]
    assert final.value("sgm_model_bytes") > final.value("sgm_model_postings")
    assert final.value("sgm_stale_postings_recomputed_total") > 0  # scoring after updates recomputes lists

    # -- snapshots (every 500 records here)
    written = final.value("sgm_snapshots_total")
    assert written >= train_end // 500 - 1
    assert final.value("sgm_snapshot_duration_seconds_count") == written
    assert final.value("sgm_snapshot_bytes") > 0
    assert 0 <= final.value("sgm_snapshot_age_seconds") < 30
    assert final.value("sgm_snapshot_pending_records") < 500
    assert final.value("sgm_snapshot_failures_total") == 0

    # -- every rejection was logged with the record's id and position
    rejections = [r for r in caplog.records if r.getMessage() in ("training record rejected", "scoring record rejected")]
    assert len(rejections) == sum(expected.dead.values())
    assert all(getattr(r, "id", None) and getattr(r, "offset", None) is not None for r in rejections)
    assert expected.rejected_ids <= {r.id for r in rejections}


def make_config(name: str, tmp_path, **overrides) -> ServiceConfig:
    values = dict(
        train_topic=f"{name}-train", score_topic=f"{name}-score", output_topic=f"{name}-out", dlq_topic=f"{name}-dlq",
        group=f"{name}-group", state_dir=str(tmp_path / "state"), metrics_address="127.0.0.1:0", role="all",
        model="uc_pd_jm_dp", param={"beta": 0.3, "mu": 20.0, "delta": 0.5, "ups": 0.2}, half_life=3600.0,
        score_partitions=3, snapshot_every_records=500, max_poll_records=200,
    )
    values.update(overrides)
    return ServiceConfig(**values)


def stream_events(n_docs: int, seed: int) -> list:
    return list(SyntheticStream(SyntheticConfig(seed=seed, n_docs=n_docs, profiles=("news", "spam"),
                                                malformed_rate=0.03, forget_rate=0.01, label_noise_rate=0.03)).events())


def test_endpoint_counts_match_the_stream_memory_transport(tmp_path, caplog):
    name = f"metrics-mem-{time.monotonic_ns()}"
    config = make_config(name, tmp_path, client="memory", bootstrap_servers=f"memory://{name}")
    client = open_client("memory", KafkaConfig(bootstrap_servers=f"memory://{name}"))
    run_and_check(client, config, stream_events(1500, seed=21), caplog)


@pytest.mark.kafka
def test_endpoint_counts_match_the_stream_real_broker(kafka_broker, unique_name, tmp_path, caplog):
    config = make_config(unique_name, tmp_path, client="confluent", bootstrap_servers=kafka_broker.bootstrap_servers)
    client = open_client("confluent", kafka_broker.config())
    run_and_check(client, config, stream_events(500, seed=4), caplog)


# ---------------------------------------------------------------------------- units
def test_accuracy_window_slides_and_starts_as_nan():
    metrics = ServiceMetrics("classifier", window=3)
    assert math.isnan(metrics.registry.get_sample_value("sgm_prequential_accuracy"))
    for correct in (True, False, True, True, True):
        metrics.record_feedback(correct)
    # window of 3: the last three were right; the totals keep everything
    assert metrics.registry.get_sample_value("sgm_prequential_accuracy") == 1.0
    assert metrics.registry.get_sample_value("sgm_feedback_total", {"outcome": "wrong"}) == 1.0
    metrics.record_feedback(False)
    assert metrics.registry.get_sample_value("sgm_prequential_accuracy") == pytest.approx(2 / 3)


def test_lag_series_of_partitions_no_longer_read_disappear():
    metrics = ServiceMetrics("classifier")
    metrics.set_lag("score", "sgm-score", {0: 5, 1: 7})
    metrics.set_lag("train", "sgm-train", {0: 3})
    metrics.set_lag("score", "sgm-score", {1: 2})  # partition 0 moved to another replica
    get = metrics.registry.get_sample_value
    assert get("sgm_consumer_lag", {"source": "score", "topic": "sgm-score", "partition": "0"}) is None
    assert get("sgm_consumer_lag", {"source": "score", "topic": "sgm-score", "partition": "1"}) == 2
    assert get("sgm_consumer_lag", {"source": "train", "topic": "sgm-train", "partition": "0"}) == 3


def test_stale_postings_counter_survives_a_model_restart():
    metrics = ServiceMetrics("all")
    stats = {"classes": 2, "vocabulary": 10, "documents": 3, "entries": 12}
    metrics.refresh_model({**stats, "stale_postings_recomputed": 40}, 1000)
    metrics.refresh_model({**stats, "stale_postings_recomputed": 55}, 1000)
    metrics.refresh_model({**stats, "stale_postings_recomputed": 4}, 1000)  # a new model object counts from 0
    assert metrics.registry.get_sample_value("sgm_stale_postings_recomputed_total") == 59


def test_prediction_labels_are_bounded(monkeypatch):
    monkeypatch.setattr("sgm.consumers.prometheus.MAX_LABEL_SERIES", 3)
    metrics = ServiceMetrics("classifier")
    for label in ("a", "b", "c", "d", "e", "a"):
        metrics.record_prediction(label)
    series = {s.labels["label"]: s.value for f in metrics.registry.collect() if f.name == "sgm_predictions"
              for s in f.samples if s.name == "sgm_predictions_total"}
    assert series == {"a": 2, "b": 1, "c": 1, "_other": 2}


def test_metrics_address_forms():
    metrics = ServiceMetrics("all")
    try:
        assert metrics.serve("") is None
        host, port = metrics.serve("127.0.0.1:0")
        assert host == "127.0.0.1" and port > 0
        assert "sgm_up" in scrape((host, port)).types
    finally:
        metrics.close()
    with pytest.raises(ValueError):
        ServiceMetrics("all").serve("localhost")


def test_restart_reports_the_restored_snapshot_age_and_offsets(tmp_path):
    """After a restart the snapshot age counts from the restored snapshot, not from the process start."""
    name = f"metrics-restart-{time.monotonic_ns()}"
    config = make_config(name, tmp_path, client="memory", bootstrap_servers=f"memory://{name}")
    client = open_client("memory", KafkaConfig(bootstrap_servers=f"memory://{name}"))
    events = [e for e in stream_events(300, seed=2) if e.kind == "train"]
    running = start_service(config, client)
    try:
        producer = client.producer()
        for event in events:
            producer.send(config.train_topic, event.value, key=event.key)
        producer.close()
        wait_until(lambda: running.service.train_offsets.get(0, 0) == len(events), 20, "training applied")
    finally:
        running.halt()  # a graceful stop writes the snapshot
    stopped = time.time()
    time.sleep(2.5)
    running = start_service(config, client)
    try:
        address = running.service.metrics_address
        wait_until(lambda: scrape(address).value("sgm_training_offset", partition="0") == len(events), 10,
                   "the restored offsets", interval=0.2)
        after = scrape(address)
    finally:
        running.halt()
    assert after.value("sgm_snapshot_pending_records") == 0
    assert after.value("sgm_training_records_total") == 0  # nothing replayed: the snapshot held it all
    assert time.time() - stopped + 1.0 > after.value("sgm_snapshot_age_seconds") >= 2.5
    assert after.value("sgm_model_documents") > 0


def test_endpoint_answers_while_the_broker_is_unreachable_at_start(tmp_path):
    """A process retrying Kafka at start is scraped (sgm_up 0, start errors counted), then comes up."""
    from sgm.consumers.service import Service
    from sgm.stream.kafka import KafkaTransportError, MemoryClient

    reachable = threading.Event()

    class UnreachableUntilAllowed(MemoryClient):
        def admin(self, timeout=None):  # noqa: ANN001
            if not reachable.is_set():
                raise KafkaTransportError("broker unreachable (simulated)")
            return super().admin(timeout)

    name = f"metrics-outage-{time.monotonic_ns()}"
    config = make_config(name, tmp_path, client="memory", bootstrap_servers=f"memory://{name}")
    service = Service(config, client=UnreachableUntilAllowed(KafkaConfig(bootstrap_servers=f"memory://{name}")))
    stop = threading.Event()
    thread = threading.Thread(target=service.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_until(lambda: service.metrics_address is not None, 10, "the metrics endpoint")
        wait_until(lambda: scrape(service.metrics_address).value("sgm_transport_errors_total", stage="start") >= 2, 10,
                   "start errors counted while the broker is down")
        assert scrape(service.metrics_address).value("sgm_up", role="all") == 0.0
        assert not service.started.is_set()
        reachable.set()
        assert service.started.wait(20), "the service never connected"
        assert scrape(service.metrics_address).value("sgm_up", role="all") == 1.0
    finally:
        stop.set()
        thread.join(30)
    assert not thread.is_alive()


def test_observe_many_equals_repeated_observe():
    from prometheus_client import CollectorRegistry, Histogram

    from sgm.consumers.prometheus import SCORE_BUCKETS, observe_many

    fast, slow = CollectorRegistry(), CollectorRegistry()
    fast_h = Histogram("h_seconds", "h", buckets=SCORE_BUCKETS, registry=fast)
    slow_h = Histogram("h_seconds", "h", buckets=SCORE_BUCKETS, registry=slow)
    # between bounds, below the first, on a bound, beyond the last (+Inf only), and again
    for value, times in ((0.0003, 7), (1e-6, 3), (0.001, 2), (5.0, 4), (0.0003, 1)):
        observe_many(fast_h, value, times)
        for _ in range(times):
            slow_h.observe(value)
    samples = lambda registry: sorted((s.name, tuple(sorted(s.labels.items())), round(s.value, 12))  # noqa: E731
                                      for f in registry.collect() for s in f.samples if not s.name.endswith("_created"))
    assert samples(fast) == samples(slow)
    assert fast.get_sample_value("h_seconds_count") == 17


def test_failed_delivery_is_logged_with_ids_and_not_counted_twice(tmp_path, caplog):
    """A batch whose outputs are not acknowledged is rescored: its error names the ids, counts stay exact."""
    from sgm.stream.kafka import DeliveryError, DeliveryFailure

    name = f"metrics-delivery-{time.monotonic_ns()}"
    config = make_config(name, tmp_path, client="memory", bootstrap_servers=f"memory://{name}")
    client = open_client("memory", KafkaConfig(bootstrap_servers=f"memory://{name}"))
    events = stream_events(300, seed=6)
    expected = expected_outcome(config, events)
    caplog.set_level(logging.ERROR, logger="sgm.service")
    running = start_service(config, client)
    service = running.service

    class FirstOutputFlushFails:
        """The service's producer, except that the first flush with outputs in it reports them undelivered."""

        def __init__(self, producer) -> None:
            self.producer, self.pending, self.failed = producer, [], False

        def send(self, topic, value, key=None, headers=None, partition=None):
            self.producer.send(topic, value, key=key, headers=headers, partition=partition)
            if topic == config.output_topic:
                self.pending.append(DeliveryFailure(topic, None, key, value, "timed out (simulated)"))

        def flush(self, timeout: float = 30.0) -> None:
            pending, self.pending = self.pending, []
            self.producer.flush(timeout)
            if pending and not self.failed:
                self.failed = True
                raise DeliveryError(pending)

        def close(self, timeout: float = 30.0) -> None:
            self.producer.close(timeout)

    service.producer = FirstOutputFlushFails(service.producer)
    try:
        feed_test_then_train(client, config, service, events)
        wait_until(lambda: service.train_offsets.get(0, 0) >= expected.training_records, 20, "training applied")
        # the last batch counted its documents scored, not yet its predictions and dead letters: let it end
        running.wait_for_step()
        final = scrape(service.metrics_address)
        records = read_topic(client, config.output_topic, lambda r: len({x.key for x in r}) >= len(expected.scoring_ids))
    finally:
        running.halt()
    last_output = {}
    for output in (o for outs in outputs_by_id(records).values() for o in outs):
        last_output[output.id] = output  # a rescored document's acknowledged output is its last one
    (failure,) = [r for r in caplog.records if r.getMessage() == "output delivery failed; rescoring the batch"]
    assert failure.ids and set(failure.ids) <= set(expected.scoring_ids) and failure.undelivered >= len(failure.ids)
    # the failed batch was scored again: every count once, none twice
    assert final.value("sgm_documents_scored_total") == len(expected.scoring_ids)
    assert final.value("sgm_score_latency_seconds_count") == len(expected.scoring_ids)
    assert len(records) > len(last_output) == len(expected.scoring_ids)  # the failed batch's outputs exist twice
    assert final.by("sgm_predictions_total", "label") == Counter(o.top_k[0][0] for o in last_output.values() if o.top_k)
    assert final.by("sgm_documents_dead_lettered_total", "reason", "source") == expected.dead
    assert final.value("sgm_transport_errors_total", stage="score_flush") == 1
