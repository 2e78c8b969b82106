"""bench/error_weighting.py learns each document with weight 1 + beta (1 - p(true labels | d)), p from the model
just before the document, and ``beta = 0`` is the plain batch learn the results page measures."""
from __future__ import annotations

import numpy as np
import pytest

from bench.error_weighting import learn_error_weighted
from sgm.model import build_model
from sgm.stream.datasets import LabelledDoc

TEXTS = ["cheap pills now", "meeting at noon", "cheap meeting pills", "noon pills"]
LABELS = ["spam", "ham", "spam", "ham"]
TRAIN = [LabelledDoc(f"d{i}", t, (l,), float(i + 1), "train") for i, (t, l) in enumerate(zip(TEXTS, LABELS))]


def learned(beta: float, n: int = len(TEXTS)):
    model = build_model({"model": "u_jm", "params": {"beta": 0.3}})
    learn_error_weighted(beta)(model, TEXTS[:n], TRAIN[:n])
    return model


def test_beta_zero_is_the_plain_learn():
    plain = build_model({"model": "u_jm", "params": {"beta": 0.3}})
    plain.learn_many(TEXTS, [d.labels for d in TRAIN], ts=[d.ts for d in TRAIN], ids=[d.id for d in TRAIN])
    assert np.array_equal(learned(0.0).predict_log_proba_many(TEXTS)[1], plain.predict_log_proba_many(TEXTS)[1])


@pytest.mark.parametrize("beta", [0.5, 3.0])
def test_each_document_is_weighted_by_how_wrong_the_model_was_just_before(beta):
    model = learned(beta)
    weights = []
    for i, (text, doc) in enumerate(zip(TEXTS, TRAIN)):
        p_true = 0.0
        if i:  # the model of the documents before this one (learned the same way) scores it
            classes, log_post = learned(beta, i).predict_log_proba_many([text])
            post = np.exp(log_post[0] - log_post[0].max())
            known = doc.labels[0] in classes  # a label not learned yet has posterior 0
            p_true = (post / post.sum())[classes.index(doc.labels[0])] if known else 0.0
        record = model.state.docs[doc.id]
        weights.append(1 + beta * (1 - p_true))
        assert record.weights == pytest.approx(record.raw * weights[-1], rel=1e-12)
    assert len(set(weights)) > 1  # documents got different weights
    for doc in TRAIN:
        assert model.forget(doc.id)  # weighted counts leave exactly as stored
    assert model.state.total_docs.value == 0
