"""Node pruning in TDM scoring (model/loops/mixture.py) leaves out only what is below round-off.

The pruned kernel (the default) against the same kernel summing everything (``node_pruning=False``)
on the same random models, replayed in lockstep (learn, batches, unlearn, forget, decay, snapshots;
TF-IDF, fw and prior-scaled variants): every posterior within ``2**-50``, every log posterior within
1e-10 where the posterior is above 1e-6, and the same top label (unless the exact top two tie to
round-off). The posterior against the dense reference is in tests/test_tdm_exact.py (both modes). A
larger generated model shows that pruning does skip groups, postings and nodes, and stays as exact.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sgm.model import TDM
from tests.reference_tdm import DenseTDMReference, class_name
from tests.test_tdm_exact import PRUNING_TOLERANCE, apply_op, configs, documents, ops, within

LOG_TOLERANCE = 1e-10  # between two summation orders of the same sums: round-off only


def same_scores(pruned: TDM, exact: TDM, queries) -> None:
    classes, log_pruned = pruned.predict_log_proba_many(queries)
    exact_classes, log_exact = exact.predict_log_proba_many(queries)
    assert classes == exact_classes
    for row, expected in zip(log_pruned, log_exact):
        within(row, expected, LOG_TOLERANCE, pruned=True)
        big = expected > np.log(1e-6)
        np.testing.assert_allclose(row[big], expected[big], rtol=0, atol=LOG_TOLERANCE)
        top, exact_top = int(np.argmax(row)), int(np.argmax(expected))
        assert top == exact_top or expected[exact_top] - expected[top] <= LOG_TOLERANCE  # a tie to round-off
    assert [r[0] for r in pruned.predict_topk_many(queries, 1)] == [r[0] for r in exact.predict_topk_many(queries, 1)] \
        or np.all(np.abs(np.max(log_exact, axis=1) - np.sort(log_exact, axis=1)[:, -2]) <= LOG_TOLERANCE)


def postings_ascending(model: TDM) -> None:
    """The kernel's binary search needs each term's cached postings in ascending node order."""
    nodes = model.nodes
    for term in np.flatnonzero(nodes.cache_len).tolist():
        assert np.all(np.diff(nodes.cached_postings(term)[0]) > 0)
    for term in np.flatnonzero(nodes.post_fill).tolist():
        assert np.all(np.diff(nodes.term_postings(term)[0]) > 0)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs(), st.lists(ops, min_size=1, max_size=25), st.lists(documents, min_size=1, max_size=4))
def test_pruned_scores_equal_unpruned_scores(config, op_list, queries):
    spec, params, options = config
    models = [TDM(spec, **options, **params), TDM(spec, **options, **params, node_pruning=False)]
    for op in op_list:
        kind = op[0]
        models = [apply_op(model, op) for model in models]
        if kind == "score" and len(models[0]):
            same_scores(models[0], models[1], [op[1]])
    assert models[0].node_pruning and not models[1].node_pruning  # the option survives snapshots
    assert len(models[0]) == len(models[1])
    if len(models[0]):
        same_scores(models[0], models[1], queries)
        postings_ascending(models[0])


def generated(n_docs: int, seed: int, vocabulary: int = 400, labels: int = 5):
    """Documents with Zipf words, per-label topic words and a few words of their own (names, numbers);
    half of the queries are new documents, half repeat a training document (a near-duplicate: one node
    dominates its label, and the common words' long lists cannot change the result)."""
    rng = np.random.default_rng(seed)
    common = np.arange(1, vocabulary + 1) ** -1.1
    common /= common.sum()
    topics = [rng.choice(vocabulary, 40, replace=False) for _ in range(labels)]

    def draw(label: int, own: int) -> dict:
        words = np.concatenate([rng.choice(vocabulary, 30, p=common), topics[label][rng.integers(0, 40, 30)]])
        ids, counts = np.unique(words, return_counts=True)
        doc = {f"w{i}": float(c) for i, c in zip(ids.tolist(), counts.tolist())}
        doc.update({f"own{own}_{k}": 1.0 for k in range(6)})
        return doc

    train = [(draw(k % labels, k), f"L{k % labels}") for k in range(n_docs)]
    queries = [draw(k % labels, -1 - k) for k in range(6)] + [train[k][0] for k in range(1, n_docs, n_docs // 6)][:6]
    return train, queries


@pytest.mark.parametrize("spec, params, skips", [
    ("tdm_uc_jm_dp_kpd_kdp", {}, True),
    ("tdm_u_jm_kjm", {}, True),
    # TF-IDF weights sum to |w|_1 of a few units: no node or group is 37 nats below another, nothing is skipped
    ("tdm_uc_pd_jm_dp_kjm_kdp_tXiX_fw_ps", {"phi": 0.5, "ups_idf": 2.0, "theta": 0.7, "gamma": 1.5, "kappa": 1.0,
                                            "eps": 0.2}, False),
])
def test_pruning_skips_work_on_a_larger_model_and_keeps_the_scores(spec, params, skips):
    train, queries = generated(1200, seed=3)
    models = [TDM(spec, half_life=150.0, **params), TDM(spec, half_life=150.0, node_pruning=False, **params)]
    reference = DenseTDMReference.for_model(models[0])
    for model in models:
        for k, (doc, label) in enumerate(train):
            model.learn_one(doc, label, ts=float(k // 4), id=f"d{k}")
        for k in range(0, 1200, 9):  # forgetting leaves dead postings behind
            model.forget(f"d{k}")
    for k, (doc, label) in enumerate(train):
        reference.learn(doc, label, float(k // 4), f"d{k}")  # learn-time TF-IDF saw the forgotten ones too
    for k in range(0, 1200, 9):
        reference.forget(f"d{k}")
    counters = models[0].nodes.counters
    counters[:] = 0
    same_scores(models[0], models[1], queries)
    postings, read, lookups, groups, groups_read, met, kept = counters.tolist()[:7]
    if skips:
        assert kept < met  # negligible nodes left out
    if skips and "kpd" in spec:
        assert groups_read < groups  # many groups of unequal a_i: the negligible ones left out
    classes, log_post = models[0].predict_log_proba_many(queries[:2])
    for query, row in zip(queries[:2], log_post):
        expected = reference.log_posterior(query)
        within(row, np.array([expected[c] for c in map(str, classes)]), 1e-9, pruned=True)
        assert classes[int(np.argmax(row))] == class_name(max(expected, key=expected.get), "per_label")
    postings_ascending(models[0])


@pytest.mark.parametrize("spec", ["tdm_uc_jm_dp_kpd_kdp", "tdm_u_jm_kjm"])
def test_a_long_common_list_is_left_unread_when_no_unseen_node_can_matter(spec):
    """Documents of their own words plus one word all share: scoring a copy of one of them reads the own
    words' short lists, decides that no node not met can matter, and completes the one that does by
    binary search instead of reading the long list."""
    docs = [{**{f"own{k}_{j}": 3.0 for j in range(20)}, "common": 1.0 + k % 3} for k in range(2000)]
    models = [TDM(spec), TDM(spec, node_pruning=False)]
    for model in models:
        model.learn_many(docs, [f"L{k % 3}" for k in range(2000)], ids=[f"d{k}" for k in range(2000)])
    counters = models[0].nodes.counters
    counters[:] = 0
    classes, log_post = models[0].predict_log_proba_many([docs[7]])
    postings, read, lookups = counters.tolist()[:3]
    assert postings == 20 + 2000 and read == 20 and lookups == 1
    same_scores(models[0], models[1], [docs[7], docs[8], {"common": 2.0}])
    assert classes[int(np.argmax(log_post[0]))] == "L1"


def test_pruning_tolerance_is_below_round_off_of_a_posterior():
    assert PRUNING_TOLERANCE == 2.0**-50 < 1e-15
