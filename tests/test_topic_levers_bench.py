"""bench/topic_levers.py: the levers change what they say they change, and nothing at their neutral setting."""
from __future__ import annotations

import numpy as np
import pytest

from bench.topic_levers import fit_class_scale, learned_side_weighted, with_bigram_weight
from sgm.model import build_model
from sgm.model.term_class_weights import term_class_weights

DOCS = [{"cheap": 2, "pills": 1, "cheap pills": 1}, {"meeting": 1, "noon": 1, "meeting noon": 1},
        {"cheap": 1, "meeting": 1, "cheap meeting": 1}]
LABELS = [("spam",), ("ham",), ("spam",)]


def fw_model():
    model = build_model({"model": "uc_pd_jm_dp_fw", "params": {"gamma": 2.0, "kappa": 0.1, "eps": 0.05}})
    model.learn_many(DOCS, LABELS, ids=["a", "b", "c"])
    return model


def test_bigram_weight_scales_bigrams_only():
    assert with_bigram_weight(DOCS, 1.0) == DOCS
    out = with_bigram_weight(DOCS, 3.0)
    for before, after in zip(DOCS, out):
        assert list(after) == list(before)
        for term, count in before.items():
            assert after[term] == (3.0 * count if " " in term else count)


def test_learned_side_weights_are_the_models_fw_weights():
    model = fw_model()
    assert with_bigram_weight(learned_side_weighted(model, DOCS, 0.0), 1.0) == [
        {t: float(c) for t, c in d.items()} for d in DOCS]
    out = learned_side_weighted(model, DOCS, 2.0)
    g = term_class_weights(model.state, np.array([model.state.terms.ids["meeting"], model.state.terms.ids["pills"]]),
                           2.0, 0.1, 0.05)
    assert out[1]["meeting"] == pytest.approx(g[0] ** 2)
    assert out[0]["pills"] == pytest.approx(g[1] ** 2)
    assert out[1]["meeting"] < out[0]["pills"]  # "meeting" is in both labels, "pills" in one


def test_class_scale_is_the_identity_under_a_strong_pull_and_fits_a_needed_bias():
    rng = np.random.default_rng(0)
    log_post = np.log(rng.dirichlet(np.ones(3), size=300))
    truth = log_post.argmax(1)
    a, b = fit_class_scale(log_post, truth, reg=1e9)
    assert np.allclose(a, 1.0, atol=1e-4) and np.allclose(b, 0.0, atol=1e-4)
    shifted = np.where(truth == 2, 0, truth)  # label 2's documents all belong to label 0: a bias moves them
    a, b = fit_class_scale(log_post, shifted, reg=1e-3)
    assert ((log_post * a + b).argmax(1) == shifted).mean() > (log_post.argmax(1) == shifted).mean() + 0.2
