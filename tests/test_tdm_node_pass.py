"""The node pass of TDM scoring (model/loops/mixture.py) equals the group path and the dense reference.

A document whose postings number at least ``TDM.node_pass_after`` times the nodes is scored by summing
``exp(log pi_i + Q log a_i + m_i)`` over every node of each label (no groups, no stop tests); the others
by the closed form over groups plus the matched nodes. Both must give the same posteriors: here the
node pass is forced on (``node_pass_after = 0``) or off (``inf``) and checked against the dense reference
(tests/reference_tdm.py) over random learn/unlearn/forget/decay/restore sequences, in lockstep against
the unpruned group path, and on a larger generated model where pruning leaves nodes out.
"""
from __future__ import annotations

import contextlib
import math

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sgm.model import TDM
from sgm.model.loops.mixture import COUNTERS
from tests.reference_tdm import DenseTDMReference, class_name
from tests.test_tdm_exact import apply_op, configs, documents, ops, replay, within
from tests.test_tdm_pruning import LOG_TOLERANCE, generated

PASSES = COUNTERS.index("node_passes")


@contextlib.contextmanager
def node_pass_after(ratio: float):
    """Every TDM built inside (restored copies too) uses the node pass at ``ratio`` postings per node."""
    default = TDM.node_pass_after
    TDM.node_pass_after = ratio
    try:
        yield
    finally:
        TDM.node_pass_after = default


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs(), st.lists(ops, min_size=1, max_size=25), st.lists(documents, min_size=1, max_size=4), st.booleans())
def test_node_pass_posteriors_equal_dense_reference(config, op_list, queries, node_pruning):
    """Every scored document by the node pass: unpruned every log posterior to 1e-9, pruned the same or the
    posterior within 2**-50 (tests/test_tdm_exact.py's check)."""
    with node_pass_after(0.0):
        model, _ = replay(config, op_list, queries, node_pruning=node_pruning)
    if model.state.docs:
        assert model.nodes.counters[PASSES] > 0


def same_posteriors(model: TDM, exact: TDM, queries) -> None:
    """tests/test_tdm_pruning.py's check, with the top label compared by name only: the two forms sum the same
    terms in another order, so a top posterior may differ in its last bit."""
    classes, log_post = model.predict_log_proba_many(queries)
    exact_classes, log_exact = exact.predict_log_proba_many(queries)
    assert classes == exact_classes
    for row, expected in zip(log_post, log_exact):
        within(row, expected, LOG_TOLERANCE, pruned=model.node_pruning)
        big = expected > np.log(1e-6)
        np.testing.assert_allclose(row[big], expected[big], rtol=0, atol=LOG_TOLERANCE)
        top, exact_top = int(np.argmax(row)), int(np.argmax(expected))
        assert top == exact_top or expected[exact_top] - expected[top] <= LOG_TOLERANCE  # a tie to round-off


def forced(model: TDM, ratio: float) -> TDM:
    model.node_pass_after = ratio  # per instance: a restored copy gets the class default, so set after each op
    return model


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs(), st.lists(ops, min_size=1, max_size=25), st.lists(documents, min_size=1, max_size=4))
def test_node_pass_scores_equal_group_path_in_lockstep(config, op_list, queries):
    """Node pass pruned and unpruned against the unpruned group path (the sums before pruning existed):
    the unpruned node pass to 1e-10 on every log posterior, the pruned one as pruning allows."""
    spec, params, options = config
    ratios = (0.0, 0.0, math.inf)
    models = [TDM(spec, **options, **params), TDM(spec, **options, **params, node_pruning=False),
              TDM(spec, **options, **params, node_pruning=False)]
    for op in op_list + [("score", q) for q in queries]:
        models = [forced(apply_op(model, op), ratio) for model, ratio in zip(models, ratios)]
        if op[0] == "score" and len(models[0]):
            same_posteriors(models[0], models[2], [op[1]])
            same_posteriors(models[1], models[2], [op[1]])
    assert models[2].nodes.counters[PASSES] == 0


def test_node_pass_on_a_larger_model_prunes_and_keeps_the_scores():
    """1,200 generated documents (some forgotten, so removed nodes sit among the node ids): the node pass
    leaves nodes out and gives the group path's posteriors and the dense reference's."""
    train, queries = generated(1200, seed=5)
    spec = "tdm_uc_jm_dp_kpd_kdp"
    models = [forced(TDM(spec, half_life=150.0), 0.0), forced(TDM(spec, half_life=150.0, node_pruning=False), math.inf)]
    reference = DenseTDMReference.for_model(models[0])
    for model in models:
        for k, (doc, label) in enumerate(train):
            model.learn_one(doc, label, ts=float(k // 4), id=f"d{k}")
        for k in range(0, 1200, 7):
            model.forget(f"d{k}")
    for k, (doc, label) in enumerate(train):
        reference.learn(doc, label, float(k // 4), f"d{k}")
    for k in range(0, 1200, 7):
        reference.forget(f"d{k}")
    counters = models[0].nodes.counters
    counters[:] = 0
    same_posteriors(models[0], models[1], queries)
    by_name = dict(zip(COUNTERS, counters.tolist()))
    assert by_name["node_passes"] == len(queries)  # every query by the node pass
    assert by_name["groups_read"] == 0 and by_name["lookups"] == 0
    assert by_name["nodes_kept"] < by_name["node_passes"] * models[0].nodes.live_nodes  # negligible nodes left out
    classes, log_post = models[0].predict_log_proba_many(queries[:3])
    for query, row in zip(queries[:3], log_post):
        expected = reference.log_posterior(query)
        within(row, np.array([expected[c] for c in map(str, classes)]), 1e-9, pruned=True)
        assert classes[int(np.argmax(row))] == class_name(max(expected, key=expected.get), "per_label")


def test_the_rule_counts_postings_against_nodes():
    """The default rule: the node pass when the document's postings number at least ``node_pass_after``
    times the node ids, else the group path (which may leave a long list unread)."""
    docs = [{"a": 1.0, "b": 2.0, "c": 1.0, f"own{k}": 1.0} for k in range(10)]
    model = TDM("tdm_uc_jm_dp_kpd_kdp")
    model.learn_many(docs, [f"L{k % 2}" for k in range(10)], ids=[f"d{k}" for k in range(10)])
    counters = model.nodes.counters
    for query, postings in (({"a": 1.0, "b": 1.0}, 20), ({"a": 1.0, "own3": 1.0}, 11), ({"own1": 2.0}, 1)):
        counters[:] = 0
        model.predict_proba_one(query)
        assert counters[COUNTERS.index("postings")] == postings
        assert counters[PASSES] == (postings >= TDM.node_pass_after * 10)


def graded(n_docs: int = 300):
    """Two labels whose documents share one word and differ a little in length: for a query of that word
    repeated, ``Q log a_i`` spreads the nodes evenly over 50-75 nats, so some lie at every distance below each
    label's best (the band a looser pruning threshold would leave out)."""
    docs = [{"w": 1.0, f"x{k}": 5.0 + 0.05 * k} for k in range(n_docs)]
    return docs, [f"L{k % 2}" for k in range(n_docs)], [{"w": 150.0}, {"w": 100.0, "x7": 1.0}]


def test_node_pass_leaves_out_less_than_its_certificate():
    """What pruning leaves out of each label's mixture, against the unpruned node pass (the same sums in the
    same order): ``0 <= S_l - S~_l < 2**-52 max(S~_l, exp(J - lambda_l))`` (model/loops/mixture.py), up to
    a few units of round-off of ``S_l``. The posterior checks above cannot see this: it is below the
    round-off of a joint score."""
    train, queries = generated(1200, seed=7)
    docs, labels, graded_queries = graded()
    for documents_, labels_, queries_ in (([d for d, _ in train], [lab for _, lab in train], queries),
                                          (docs, labels, graded_queries)):
        model = forced(TDM("tdm_uc_jm_dp_kpd_kdp"), 0.0)
        model.learn_many(documents_, labels_, ids=[f"d{k}" for k in range(len(documents_))])
        for k in range(0, len(documents_), 11):
            model.forget(f"d{k}")
        counters = model.nodes.counters
        counters[:] = 0
        for query in queries_:
            batch = model._prepare([query])
            label_scores = model.labels.joint_log_scores(model.state, batch)
            model.node_pruning = True
            pruned = model._log_mixture(batch, label_scores)[0]
            model.node_pruning = False
            exact = model._log_mixture(batch, label_scores)[0]
            has_nodes = np.isfinite(exact)
            best = np.max((label_scores[0] + pruned)[has_nodes])
            budget = np.maximum(pruned, best - label_scores[0])[has_nodes]  # log max(S~_l, exp(J - lambda_l))
            left_out = np.exp(exact[has_nodes] - budget) - np.exp(pruned[has_nodes] - budget)  # (S_l - S~_l) / budget
            round_off = 8 * 2.0**-52 * np.exp(exact[has_nodes] - budget)
            assert np.all(left_out >= -round_off)
            assert np.all(left_out < 2.0**-52 + round_off), left_out
        by_name = dict(zip(COUNTERS, counters.tolist()))  # both runs counted: kept by the pruned one below all nodes
        assert by_name["node_passes"] == 2 * len(queries_) and by_name["nodes_kept"] < by_name["node_passes"] * len(model.nodes.node_doc)
