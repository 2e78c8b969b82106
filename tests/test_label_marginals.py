"""Label marginals of a powerset posterior and the thresholded output (model/label_marginals.py), in the model."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from sgm.model import MNB, build_model, model_config
from sgm.model.label_marginals import chosen_by_threshold, label_marginals, labels_at_threshold

LABELS = "abcde"


@st.composite
def powerset_posteriors(draw):
    sets = draw(st.lists(st.frozensets(st.sampled_from(LABELS), min_size=1, max_size=3), min_size=1, max_size=8,
                         unique=True))
    classes = [tuple(sorted(s)) for s in sets]
    n = draw(st.integers(1, 5))
    weights = np.array(draw(st.lists(st.floats(0.0, 1.0), min_size=n * len(classes), max_size=n * len(classes))))
    weights = weights.reshape(n, len(classes)) + 1e-9
    return classes, weights / weights.sum(axis=1, keepdims=True)


@settings(max_examples=200, deadline=None)
@given(powerset_posteriors())
def test_marginals_are_the_summed_posteriors_of_the_sets_holding_each_label(case):
    classes, post = case
    labels, marginals = label_marginals(classes, post)
    assert labels == sorted({label for c in classes for label in c})
    for i in range(len(post)):
        for k, label in enumerate(labels):  # brute force: the definition
            expected = sum(post[i, j] for j, c in enumerate(classes) if label in c)
            assert marginals[i, k] == pytest.approx(expected, abs=1e-12)
    # each row sums to the expected number of labels; every marginal is a probability
    sizes = np.array([len(c) for c in classes], dtype=float)
    np.testing.assert_allclose(marginals.sum(axis=1), post @ sizes, atol=1e-12)
    assert (marginals >= -1e-12).all() and (marginals <= 1 + 1e-12).all()


@settings(max_examples=200, deadline=None)
@given(powerset_posteriors(), st.floats(0.01, 1.0))
def test_threshold_output_is_the_labels_reaching_it_else_the_top_one(case, threshold):
    classes, post = case
    labels, marginals = label_marginals(classes, post)
    chosen = chosen_by_threshold(marginals, threshold)
    out = labels_at_threshold(labels, marginals, threshold)
    for row, keep, names in zip(marginals, chosen, out):
        assert keep.any()  # never an empty output
        above = {labels[k] for k in np.flatnonzero(row >= threshold)}
        assert set(names) == (above or {labels[int(np.argmax(row))]})
        assert set(names) == {labels[k] for k in np.flatnonzero(keep)}
        assert [row[labels.index(n)] for n in names] == sorted((row[labels.index(n)] for n in names), reverse=True)


def test_single_label_classes_give_the_posterior_itself():
    labels, marginals = label_marginals(["b", "a"], np.array([[0.3, 0.7]]))
    assert labels == ["a", "b"] and marginals.tolist() == [[0.7, 0.3]]


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="shape"):
        label_marginals([("a",)], np.array([[0.5, 0.5]]))


def two_topic_model(**options) -> MNB:
    m = MNB("u_jm", beta=0.5, multilabel="powerset", **options)
    m.learn_many(["goal match league", "goal match cup", "cash prize offer", "cash offer loan", "goal cash"],
                 [["sport"], ["sport"], ["spam"], ["spam"], ["spam", "sport"]])
    return m


def test_model_output_follows_the_label_threshold():
    plain, thresholded = two_topic_model(), two_topic_model(label_threshold=0.2)
    docs = ["goal match cash prize", "league cup", "loan offer"]
    classes, log_post = thresholded.predict_log_proba_many(docs)
    labels, marginals = label_marginals(classes, np.exp(log_post))
    expected = labels_at_threshold(labels, marginals, 0.2)
    assert thresholded.predict_labels_many(docs) == expected
    assert thresholded.rank_many(docs, k=2).labels == expected
    assert plain.predict_labels_many(docs) == [list(c) for c in plain.predict_many(docs)]  # the arg-max set
    assert plain.rank_many(docs, k=2).labels == [list(c) for c in plain.predict_many(docs)]
    # the service's --label-threshold (rank_many's threshold) means the same in powerset mode, over the model's
    assert plain.rank_many(docs, k=2, threshold=0.2).labels == expected
    assert thresholded.rank_many(docs, k=2, threshold=1.0).labels == labels_at_threshold(labels, marginals, 1.0)
    # a threshold of 1 keeps only the top marginal label of each document
    strict = two_topic_model(label_threshold=1.0)
    assert all(len(labels) == 1 for labels in strict.predict_labels_many(docs))


def test_the_threshold_can_output_a_label_set_never_learned():
    m = MNB("u_jm", beta=0.5, multilabel="powerset", label_threshold=0.3)
    m.learn_many(["goal match", "cash prize"], [["sport"], ["spam"]])
    assert m.predict_many(["goal cash"])[0] in {("sport",), ("spam",)}  # the arg-max: one learned set
    assert sorted(m.predict_labels_many(["goal cash"])[0]) == ["spam", "sport"]


def test_label_threshold_is_part_of_the_configuration_and_snapshot():
    m = two_topic_model(label_threshold=0.35)
    config = model_config(m)
    assert config["label_threshold"] == 0.35
    assert build_model(config).label_threshold == 0.35
    restored = MNB.from_bytes(m.to_bytes())
    assert restored.label_threshold == 0.35
    assert restored.predict_labels_many(["goal cash"]) == m.predict_labels_many(["goal cash"])
    assert "label_threshold" not in model_config(two_topic_model())  # unset: configurations as before


@pytest.mark.parametrize("options, message", [({"label_threshold": 0.0}, "in \\(0, 1\\]"),
                                              ({"label_threshold": 1.5}, "in \\(0, 1\\]"),
                                              ({"label_threshold": 0.5, "multilabel": "per_label"}, "powerset")])
def test_bad_label_thresholds_are_rejected(options, message):
    with pytest.raises(ValueError, match=message):
        MNB("u_jm", **{"multilabel": "powerset", **options})


def test_label_marginals_take_every_class_even_where_top_k_would_prune(monkeypatch):
    from sgm.model import mnb as mnb_module

    monkeypatch.setattr(mnb_module, "PRUNED_TOPK_MIN_CLASSES", 1)  # the pruned top-k path for these 3 classes
    monkeypatch.setattr(mnb_module, "PRUNED_TOPK_CLASSES_PER_K", 1)
    model, docs = two_topic_model(label_threshold=0.2), ["goal match cash prize", "league cup"]
    assert model.uses_pruned_topk(1)
    classes, log_post = model.predict_log_proba_many(docs)
    expected = labels_at_threshold(*label_marginals(classes, np.exp(log_post)), 0.2)
    assert model.rank_many(docs, k=1).labels == expected
    assert two_topic_model().rank_many(docs, k=1, threshold=0.2).labels == expected
