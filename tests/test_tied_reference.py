"""The tied-weights reference (tests/reference_tied.py) against the bench's online oracle.

``bench.topic_levers_online`` computes the tied-weights step (``online_step`` with AdaGrad's ``squares``, reg 0,
and ``Averaged``) from a plain model's posting cache (``bench.topic_levers.term_block``); the reference
computes it from scratch over its dense table. Streaming the same single-label documents through both (the
plain model learning each document after its block is read) they must agree on every step: which documents
step, and ``s`` and the averaged ``s`` of every term, to 1e-9 relative. This checks the reference before the
model's ``tw`` exists, and ties it to the numbers the bench measured.
"""
from __future__ import annotations

import types

import numpy as np
import pytest

from bench.topic_levers import term_block
from bench.topic_levers_online import Averaged, online_step
from sgm.model import MNB
from tests.reference_tied import TiedReference

LABELS = ["a", "b", "c", "d"]
VOCAB = [f"w{i}" for i in range(14)]
CONFIGS = [
    ("u_jm", {"beta": 0.4}, None),
    ("uc_pd_jm_dp_ps", {"beta": 0.3, "mu": 4.0, "delta": 0.6, "ups": 0.3, "theta": 0.7}, None),
    ("uc_pd_jm_dp_ps", {"beta": 0.3, "mu": 4.0, "delta": 0.6, "ups": 0.3, "theta": 0.7}, 20.0),
    ("c_dp_tXiX_fw", {"mu": 2.0, "phi": 0.5, "ups_idf": 3.0, "gamma": 1.5, "kappa": 1.0, "eps": 0.1}, None),
]


def stream(rng: np.random.Generator, n: int) -> list[tuple[dict, str, float]]:
    """Label-dependent random documents: each label prefers its own part of the vocabulary."""
    out = []
    for i in range(n):
        y = int(rng.integers(len(LABELS)))
        weights = np.ones(len(VOCAB))
        weights[3 * y : 3 * y + 5] += 4.0
        size = int(rng.integers(1, 7))
        terms = rng.choice(len(VOCAB), size=size, replace=False, p=weights / weights.sum())
        doc = {VOCAB[t]: float(rng.choice([1.0, 2.0, 3.0, 0.5])) for t in terms}
        out.append((doc, LABELS[y], float(i)))
    return out


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c[0] + ("_decay" if c[2] else ""))
def test_reference_steps_equal_the_bench_oracle(config, seed):
    spec, params, half_life = config
    eta = [2.0, 0.5][seed]
    plain = MNB(spec, half_life=half_life, **params)
    reference = TiedReference(plain.spec, dict(plain.params), half_life, "per_label", eta=eta, adagrad_eps=0.0)
    folds = types.SimpleNamespace(labels=LABELS)  # all term_block reads of its folds
    index: dict[str, int] = {}
    s, df, squares = np.ones(0), np.zeros(0), np.zeros(0)
    average = Averaged(s)
    steps = 0
    for k, (doc, label, ts) in enumerate(stream(np.random.default_rng(seed), 60)):
        y = LABELS.index(label)
        if k:
            block = term_block(folds, plain, [doc])
            if block["prior"][y] > -1e8 and block["terms"]:
                for name in block["terms"]:
                    if name not in index:
                        index[name] = len(index)
                        s, df, squares = np.append(s, 1.0), np.append(df, 0.0), np.append(squares, 0.0)
                        average.total, average.last = np.append(average.total, 0.0), np.append(average.last, 0.0)
                record = {"index": np.array([index[n] for n in block["terms"]], dtype=np.int64),
                          "xg": np.asarray(block["x"].toarray()[0] * block["g"]), "table": block["table"],
                          "prior": block["prior"], "y": y}
                average.before(s, record["index"])
                online_step(s, df, record, eta, 0.0, squares)
                average.after(s, record["index"])
                steps += 1
        reference.learn(doc, label, ts, f"d{k}")
        plain.learn_one(doc, label, ts=ts, id=f"d{k}")
        assert reference.t == steps == average.t
        mean = average.mean(s)
        for name, i in index.items():
            np.testing.assert_allclose(reference.factor(name), s[i], rtol=1e-9, atol=1e-12, err_msg=name)
            np.testing.assert_allclose(reference.averaged(name), mean[i], rtol=1e-9, atol=1e-12, err_msg=name)
    assert steps > 40
    moved = [n for n in index if abs(reference.factor(n) - 1.0) > 1e-3]
    assert len(moved) >= len(index) // 2  # the steps really moved s (else the comparison says little)
    # scoring: the reference's posterior with sbar equals the bench's block scored with r = g sbar
    query = stream(np.random.default_rng(seed + 10), 1)[0][0]
    block = term_block(folds, plain, [query])
    if block["terms"]:
        r = np.asarray(block["g"]) * np.array([reference.averaged(n) for n in block["terms"]])
        scores = block["prior"] + (np.asarray(block["x"].toarray()[0]) * r) @ block["table"]
        live = block["prior"] > -1e8
        expected = scores[live] - np.logaddexp.reduce(scores[live])
        got = reference.log_posterior(query)
        np.testing.assert_allclose([got[LABELS[i]] for i in np.flatnonzero(live)], expected, rtol=0, atol=1e-9)
