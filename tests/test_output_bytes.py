"""The output records' bytes stay what they were: one encoder, checked against recorded bytes.

``tests/data/output_records_golden.json`` holds the bytes that the two encoders of
the base commit (``encode_output`` per record, ``encode_outputs`` per batch, which
agreed byte for byte) wrote for the varied inputs :func:`cases` builds (seeded:
unicode and control characters, quotes, empty and long ids, k = 0..5, posteriors
at 0, 1, the clamped rounding slack, subnormals, -0.0, nested model mappings,
missing and odd event times). Both entry points must still write exactly them.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np

from sgm.stream.records import OutputRecord, encode_output, encode_outputs

GOLDEN = Path(__file__).parent / "data" / "output_records_golden.json"

IDS = ["q1", "", "é-ü-ß", "quote\"back\\slash", "tab\tnew\nline", "emoji-\U0001F600", "x" * 300, "\u2028sep", "nul\x00"]
LABELS = ["spam", "ham", "crude", "ünïcödé", "a\"b", "label with spaces", "日本", "", "x" * 40]
PS = [0.0, 1.0, 0.5, 0.1, 1 / 3, 2 / 3, 1e-300, 5e-324, 0.9999999999999999, 1 + 1e-12, -1e-12, -0.0,
      0.123456789012345678, 1e-5, 0.75]
MODELS = [{}, {"v": 1}, {"kind": "mnb", "version": 3}, {"kind": "tdm", "spec": "uc_pd_jm_dp", "documents": 1234,
          "train_offsets": {"0": 17, "1": 5}}, {"nested": {"a": [1, 2, {"b": "é"}]}, "f": 0.25, "neg": -7}]
SCORED = [0.0, 1.0, 1700000000.25, 1714564800.123, 5.0, 1e-7, 123456789.123456789]
LATENCY = [0.0, 1.5, 3, 0.001, 12345.678, 1e-9]
TS = [None, 0.0, 9, 2.0, 1700000000, 1714564800.5, -5.5, 1e15]


def cases(seed=14, n=300):
    """Batches of rows: (ids, top_labels, top_p rows, labels, model, scored_at, latencies, ts)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        rows = rng.choice([1, 1, 1, 2, 3, 7])
        k = rng.choice([0, 1, 1, 2, 3, 5])
        ids = [rng.choice(IDS) + ("" if rng.random() < 0.5 else str(rng.randrange(10**6))) for _ in range(rows)]
        top_labels = [[rng.choice(LABELS) for _ in range(k)] for _ in range(rows)]
        top_p = [[rng.choice(PS) if rng.random() < 0.6 else rng.random() for _ in range(k)] for _ in range(rows)]
        labels = []
        for names in top_labels:
            pick = rng.random()
            labels.append(names[:1] if pick < 0.6 else (names[:2] if pick < 0.8 else []))
        model = rng.choice(MODELS)
        scored_at = rng.choice(SCORED) if rng.random() < 0.7 else rng.uniform(0, 2e9)
        latencies = [rng.choice(LATENCY) if rng.random() < 0.7 else rng.uniform(0, 1e4) for _ in range(rows)]
        ts = [rng.choice(TS) if rng.random() < 0.7 else rng.uniform(-1e9, 1e10) for _ in range(rows)]
        out.append((ids, top_labels, top_p, labels, model, scored_at, latencies, ts))
    return out


def _batches():
    golden = json.loads(GOLDEN.read_text())
    built = cases()
    assert len(golden) == len(built) == 300
    return zip(built, golden)


def test_batch_encoder_writes_the_recorded_bytes():
    for (ids, top_labels, top_p, labels, model, scored_at, latencies, ts), expected in _batches():
        matrix = np.array(top_p, dtype=np.float64).reshape(len(ids), len(top_labels[0]))
        got = encode_outputs(ids, top_labels, matrix, labels, model=model, scored_at=scored_at,
                             latency_ms=latencies, ts=ts)
        assert [value.decode("utf-8") for value in got] == expected


def test_single_record_encoder_writes_the_recorded_bytes():
    for (ids, top_labels, top_p, labels, model, scored_at, latencies, ts), expected in _batches():
        for i, names, ps, chosen, latency, t, want in zip(ids, top_labels, top_p, labels, latencies, ts, expected):
            record = OutputRecord(id=i, top_k=tuple(zip(names, ps)), labels=tuple(chosen), model=model,
                                  scored_at=scored_at, latency_ms=latency, ts=t)
            assert encode_output(record).decode("utf-8") == want
