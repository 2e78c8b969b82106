"""Prometheus metrics of one process (names start with ``sgm_``; see docs/OBSERVABILITY.md).

Each :class:`ServiceMetrics` owns a registry, so several services (tests, the
demo) can live in one Python process. The Grafana dashboard and the alert
rules in ``deploy/`` depend on these names.
"""
from __future__ import annotations

import threading
from collections import deque

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

#: Latency buckets (seconds): 0.5 ms .. 30 s.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
#: Beyond this many distinct labels, per-label prediction counts go to "_other" (bounded cardinality).
MAX_LABEL_SERIES = 500


class ServiceMetrics:
    """All metric families of a trainer/classifier process."""

    def __init__(self, role: str, window: int = 1000) -> None:
        self.registry = registry = CollectorRegistry()
        self.role = role
        self.learned = Counter("sgm_documents_learned_total", "Training documents learned", registry=registry)
        self.unlearned = Counter("sgm_documents_unlearned_total", "Training documents unlearned (unlearn and forget)",
                                 ["op"], registry=registry)
        self.training_records = Counter("sgm_training_records_total", "Training records read", registry=registry)
        self.scored = Counter("sgm_documents_scored_total", "Documents scored", registry=registry)
        self.dead_lettered = Counter("sgm_documents_dead_lettered_total", "Records rejected (to the dead-letter topic)",
                                     ["reason", "topic"], registry=registry)
        self.score_latency = Histogram("sgm_score_latency_seconds", "Model scoring time per document (batch time / size)",
                                       buckets=LATENCY_BUCKETS, registry=registry)
        self.end_to_end_latency = Histogram("sgm_end_to_end_latency_seconds",
                                            "From the scoring record's timestamp to its output being written",
                                            buckets=LATENCY_BUCKETS, registry=registry)
        self.batch_seconds = Histogram("sgm_batch_seconds", "Wall time of one scoring batch (poll excluded)",
                                       ["stage"], buckets=LATENCY_BUCKETS, registry=registry)
        self.consumer_lag = Gauge("sgm_consumer_lag", "Records behind the log end", ["topic", "partition"],
                                  registry=registry)
        self.training_offset = Gauge("sgm_training_offset", "Next training offset the model will apply",
                                     ["partition"], registry=registry)
        self.model_labels = Gauge("sgm_model_labels", "Classes in the model", registry=registry)
        self.model_terms = Gauge("sgm_model_terms", "Terms with counts in the model", registry=registry)
        self.model_documents = Gauge("sgm_model_documents", "Live documents in the model", registry=registry)
        self.model_postings = Gauge("sgm_model_postings", "Postings (class, term entries) in the model", registry=registry)
        self.model_bytes = Gauge("sgm_model_bytes", "Approximate bytes of the model's arrays and tables", registry=registry)
        self.stale_recomputed = Gauge("sgm_stale_postings_recomputed", "Posting lists recomputed lazily since start",
                                      registry=registry)
        self.pruned = Gauge("sgm_model_pruned_documents", "Documents dropped by the memory bound since start",
                            registry=registry)
        self.snapshot_age = Gauge("sgm_snapshot_age_seconds", "Seconds since the last snapshot was written",
                                  registry=registry)
        self.snapshot_bytes = Gauge("sgm_snapshot_bytes", "Size of the last snapshot", registry=registry)
        self.snapshot_seconds = Histogram("sgm_snapshot_duration_seconds", "Time to serialize and write a snapshot",
                                          buckets=LATENCY_BUCKETS, registry=registry)
        self.snapshots = Counter("sgm_snapshots_total", "Snapshots written", registry=registry)
        self.snapshot_failures = Counter("sgm_snapshot_failures_total", "Snapshot writes that failed (retried later)",
                                         registry=registry)
        self.prequential_accuracy = Gauge("sgm_prequential_accuracy",
                                          "Accuracy of earlier predictions, checked as their labels arrive "
                                          "(rolling window)", registry=registry)
        self.feedback = Counter("sgm_feedback_total", "Training records for ids this process had scored",
                                ["outcome"], registry=registry)
        self.predictions = Counter("sgm_predictions_total", "Top predicted label of scored documents", ["label"],
                                   registry=registry)
        self.up = Gauge("sgm_up", "1 while the service loop runs", ["role"], registry=registry)
        self._window: deque[bool] = deque(maxlen=window)
        self._labels_seen: set[str] = set()
        self._lock = threading.Lock()
        self._server = None

    def serve(self, address: str) -> tuple[str, int] | None:
        """Expose ``/metrics`` on ``HOST:PORT`` (port 0 = any free port); returns the bound address."""
        if not address:
            return None
        host, _, port = address.rpartition(":")
        server, _thread = start_http_server(int(port), addr=host or "127.0.0.1", registry=self.registry)
        self._server = server
        return server.server_address[0], server.server_address[1]

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def record_feedback(self, correct: bool) -> None:
        with self._lock:
            self._window.append(correct)
            self.prequential_accuracy.set(sum(self._window) / len(self._window))
        self.feedback.labels("correct" if correct else "wrong").inc()

    def record_prediction(self, label: str) -> None:
        if label not in self._labels_seen:
            if len(self._labels_seen) >= MAX_LABEL_SERIES:
                label = "_other"
            else:
                self._labels_seen.add(label)
        self.predictions.labels(label).inc()
