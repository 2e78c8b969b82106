"""Each measure of model.metrics against a case computed by hand, and against
scikit-learn where it defines the same measure."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sgm.consumers.evaluation import measures as metrics


# ---------------------------------------------------------------- accuracy
def test_accuracy_single_label_by_hand():
    # 3 of 5 right
    assert metrics.accuracy(["a", "b", "c", "a", "b"], ["a", "b", "a", "a", "c"]) == pytest.approx(3 / 5)


def test_accuracy_multilabel_is_exact_set_match():
    truth = [("x", "y"), ("x",), ("y",), ()]
    predicted = [("y", "x"), ("x", "y"), ("y",), ()]
    # doc 1 exact (order does not matter), doc 2 extra label = wrong, doc 3 right, doc 4 empty = empty
    assert metrics.accuracy(truth, predicted) == pytest.approx(3 / 4)


def test_accuracy_length_mismatch_and_empty():
    with pytest.raises(ValueError):
        metrics.accuracy(["a"], ["a", "b"])
    assert metrics.accuracy([], []) is None


# ---------------------------------------------------------------- F1
def test_micro_f1_multilabel_by_hand():
    truth = [{"a", "b"}, {"a"}, {"c"}]
    predicted = [{"a"}, {"a", "c"}, {"b"}]
    # TP: a (doc1), a (doc2) = 2; FP: c (doc2), b (doc3) = 2; FN: b (doc1), c (doc3) = 2
    # F1 = 2*2 / (2*2 + 2 + 2) = 0.5
    assert metrics.micro_f1(truth, predicted) == pytest.approx(0.5)


def test_macro_f1_multilabel_by_hand():
    truth = [{"a", "b"}, {"a"}, {"c"}]
    predicted = [{"a"}, {"a", "c"}, {"b"}]
    # a: TP 2 FP 0 FN 0 -> 1.0; b: TP 0 FP 1 FN 1 -> 0; c: TP 0 FP 1 FN 1 -> 0
    assert metrics.macro_f1(truth, predicted) == pytest.approx(1 / 3)
    # an extra label that never occurs counts as F1 = 0
    assert metrics.macro_f1(truth, predicted, labels=["a", "b", "c", "d"]) == pytest.approx(1 / 4)


def test_micro_f1_equals_accuracy_for_single_label():
    truth = ["a", "b", "b", "c", "a", "c"]
    predicted = ["a", "b", "c", "c", "b", "c"]
    assert metrics.micro_f1(truth, predicted) == pytest.approx(metrics.accuracy(truth, predicted))


def test_f1_against_sklearn_single_and_multilabel():
    from sklearn.metrics import f1_score
    from sklearn.preprocessing import MultiLabelBinarizer

    rng = np.random.default_rng(3)
    labels = ["a", "b", "c", "d"]
    truth = [rng.choice(labels) for _ in range(200)]
    predicted = [t if rng.random() < 0.6 else rng.choice(labels) for t in truth]
    assert metrics.micro_f1(truth, predicted) == pytest.approx(f1_score(truth, predicted, average="micro"))
    assert metrics.macro_f1(truth, predicted) == pytest.approx(f1_score(truth, predicted, average="macro"))

    truth_sets = [set(rng.choice(labels, size=rng.integers(1, 3), replace=False)) for _ in range(150)]
    predicted_sets = [set(rng.choice(labels, size=rng.integers(0, 3), replace=False)) for _ in range(150)]
    binarizer = MultiLabelBinarizer(classes=labels)
    y_true, y_pred = binarizer.fit_transform(truth_sets), binarizer.transform(predicted_sets)
    assert metrics.micro_f1(truth_sets, predicted_sets) == pytest.approx(f1_score(y_true, y_pred, average="micro"))
    assert metrics.macro_f1(truth_sets, predicted_sets) == pytest.approx(
        f1_score(y_true, y_pred, average="macro", zero_division=0))


# ---------------------------------------------------------------- log loss
def test_log_loss_by_hand_and_clipping():
    probabilities = np.array([[0.7, 0.2, 0.1], [0.25, 0.5, 0.25], [0.0, 1.0, 0.0]])
    expected = -(math.log(0.7) + math.log(0.25) + math.log(1e-15)) / 3  # third: p = 0 clipped to 1e-15
    assert metrics.log_loss(["a", "c", "a"], ["a", "b", "c"], probabilities) == pytest.approx(expected)
    # a true class the model does not know costs -log(eps)
    assert metrics.log_loss(["z"], ["a"], np.array([[1.0]])) == pytest.approx(-math.log(1e-15))
    assert metrics.log_loss([], ["a"], np.zeros((0, 1))) is None


def test_log_loss_against_sklearn():
    from sklearn.metrics import log_loss as sk_log_loss

    rng = np.random.default_rng(0)
    probabilities = rng.dirichlet([1.0, 1.0, 1.0], size=100)
    truth = rng.integers(0, 3, size=100)
    classes = ["x", "y", "z"]
    ours = metrics.log_loss([classes[i] for i in truth], classes, probabilities)
    assert ours == pytest.approx(sk_log_loss(truth, probabilities, labels=[0, 1, 2]), rel=1e-9)


# ---------------------------------------------------------------- ROC
def test_roc_auc_by_hand_with_ties():
    # positives 0.9, 0.6, 0.4; negatives 0.6, 0.3
    # pairs (pos > neg): 0.9>0.6 1, 0.9>0.3 1, 0.6=0.6 0.5, 0.6>0.3 1, 0.4<0.6 0, 0.4>0.3 1 -> 4.5 / 6
    auc = metrics.roc_auc([1, 1, 1, 0, 0], [0.9, 0.6, 0.4, 0.6, 0.3])
    assert auc == pytest.approx(0.75)
    assert metrics.one_minus_roca_pct(auc) == pytest.approx(25.0)
    assert metrics.roc_auc([0, 0], [0.1, 0.2]) is None
    assert metrics.one_minus_roca_pct(None) is None


def test_roc_auc_and_curve_against_sklearn():
    from sklearn.metrics import roc_auc_score, roc_curve

    rng = np.random.default_rng(5)
    positive = rng.random(300) < 0.3
    scores = np.round(rng.random(300) + 0.5 * positive, 2)  # rounding makes ties
    assert metrics.roc_auc(positive, scores) == pytest.approx(roc_auc_score(positive, scores))
    fpr, tpr = metrics.roc_curve(positive, scores)
    sk_fpr, sk_tpr, _ = roc_curve(positive, scores, drop_intermediate=False)
    np.testing.assert_allclose(fpr, sk_fpr)
    np.testing.assert_allclose(tpr, sk_tpr)
    assert np.trapezoid(tpr, fpr) == pytest.approx(metrics.roc_auc(positive, scores))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 5)), min_size=2, max_size=40))
def test_roc_auc_is_the_pairwise_probability(pairs):
    positive = [p for p, _ in pairs]
    scores = [float(s) for _, s in pairs]
    pos = [s for p, s in pairs if p]
    neg = [s for p, s in pairs if not p]
    if not pos or not neg:
        assert metrics.roc_auc(positive, scores) is None
        return
    pairwise = sum((a > b) + 0.5 * (a == b) for a in pos for b in neg) / (len(pos) * len(neg))
    assert metrics.roc_auc(positive, scores) == pytest.approx(pairwise)


# ---------------------------------------------------------------- windows, RER
def test_windowed_accuracy_by_hand():
    windows = metrics.windowed_accuracy([True, False, True, True, True, False, False], 3)
    assert [(w["start"], w["end"], w["accuracy"]) for w in windows] == [
        (0, 3, pytest.approx(2 / 3)), (3, 6, pytest.approx(2 / 3)), (6, 7, 0.0)]
    with pytest.raises(ValueError):
        metrics.windowed_accuracy([True], 0)


def test_time_window_accuracy_by_hand():
    day = 86400.0
    correct = [1, 1, 0, 0, 1]
    ts = [0.0, 0.5 * day, 1.2 * day, 3.1 * day, 3.9 * day]
    windows = metrics.time_window_accuracy(correct, ts, day)
    assert [(w["ts_start"] / day, w["docs"], w["accuracy"]) for w in windows] == [(0, 2, 1.0), (1, 1, 0.0), (3, 2, 0.5)]
    with pytest.raises(ValueError):
        metrics.time_window_accuracy([1, 1], [2.0, 1.0], day)


def test_relative_error_reduction():
    # thesis example: 7.5 % RER turns 0.90 into 0.9075
    assert metrics.relative_error_reduction(0.9075, 0.90) == pytest.approx(0.075)
    assert metrics.relative_error_reduction(0.95, 0.96) == pytest.approx(-0.25)
