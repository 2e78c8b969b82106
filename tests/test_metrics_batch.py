"""Batch observation helpers give exactly what a loop of prometheus_client's observe() gives."""
from __future__ import annotations

import numpy as np
from prometheus_client import CollectorRegistry, Histogram

from sgm.consumers.prometheus import LATENCY_BUCKETS, observe_values


def _samples(histogram: Histogram) -> dict:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for m in histogram.collect() for s in m.samples
            if not s.name.endswith("_created")}


def test_observe_values_equals_observe_loop():
    rng = np.random.default_rng(0)
    values = np.concatenate([rng.exponential(0.05, 500), np.array(LATENCY_BUCKETS), [0.0, 100.0]])
    batch = Histogram("h", "h", buckets=LATENCY_BUCKETS, registry=CollectorRegistry())
    loop = Histogram("h", "h", buckets=LATENCY_BUCKETS, registry=CollectorRegistry())
    observe_values(batch, values)
    for value in values.tolist():
        loop.observe(value)
    got, expected = _samples(batch), _samples(loop)
    assert got.keys() == expected.keys()
    for key in expected:
        assert np.isclose(got[key], expected[key], rtol=1e-12), key
