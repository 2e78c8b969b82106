"""The pruned top-k (model/pruned_topk.py) against the dense pass and the dense brute-force reference.

Random models of every smoothing family, weighting, the fw affix, prior scaling, decay and
learn / unlearn / forget (the configurations of tests/test_mnb_exact.py, with more labels): the
pruned path returns the dense kernel's top-k labels (ties: lower class id first, as the dense path)
and posteriors within the certified bound ``RELATIVE_BOUND`` plus the rounding of the dense sum;
against tests/reference.py the posteriors agree to 1e-9 in log space.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sgm.model.mnb as mnb_module
import sgm.model.pruned_topk as pruned_module
from sgm.model import MNB
from sgm.model.pruned_topk import RELATIVE_BOUND, margin
from tests.reference import DenseReference, as_array
from tests.test_mnb_exact import VOCAB, configs, counts

LABELS = [f"l{i}" for i in range(10)]
#: Reordered sums of at most a few dozen terms (the normalizer): well above 1e-15, far below any real error.
ROUNDING = 1e-12
documents = st.dictionaries(st.sampled_from(VOCAB), counts, min_size=0, max_size=6)
label_sets = st.lists(st.sampled_from(LABELS), min_size=1, max_size=2, unique=True)
ops = st.one_of(
    st.tuples(st.just("learn"), documents, label_sets, st.one_of(st.none(), st.floats(0.0, 60.0)),
              st.sampled_from([f"d{i}" for i in range(12)] + [None])),
    st.tuples(st.just("forget"), st.sampled_from(["d1", "d2", "d3", "x"])),
    st.tuples(st.just("unlearn"), st.sampled_from(["d1", "d2", "d3"]), label_sets),
    st.tuples(st.just("score"), documents),
)


def paths(model, queries, k, threshold=None, budget_divisor=1, margin_nats=pruned_module.MARGIN_NATS,
          tolerance=None):
    """(pruned, dense) rankings of ``queries``: the pruned path forced (by default without its budget,
    which small models would always exceed), with the posterior ``tolerance``, then the dense pass forced."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pruned_module, "BUDGET_DIVISOR", budget_divisor)
        patch.setattr(pruned_module, "MARGIN_NATS", margin_nats)
        patch.setattr(mnb_module, "PRUNED_TOPK_MIN_CLASSES", 1)
        patch.setattr(mnb_module, "PRUNED_TOPK_CLASSES_PER_K", 1)
        assert model.uses_pruned_topk(k, threshold, tolerance) == (k < len(model.classes_))
        pruned = model.rank_many(queries, k, threshold, tolerance)
        pruned_topk = model.predict_topk_many(queries, k, tolerance)
        patch.setattr(mnb_module, "PRUNED_TOPK_MIN_CLASSES", 10**9)
        assert not model.uses_pruned_topk(k, threshold)
        dense = model.rank_many(queries, k, threshold)
        dense_topk = DenseAnswers(model.predict_topk_many(queries, k))
    classes, log_post = model.predict_log_proba_many(queries)
    dense_topk.log_posteriors = [{**dict(zip(classes, row)), **dict(zip(
        ["+".join(c) if isinstance(c, tuple) else c for c in classes], row))} for row in log_post.tolist()]
    return pruned, pruned_topk, dense, dense_topk


class DenseAnswers(list):
    """The dense pass's top-k lists, and per query every class's dense log posterior (``log_posteriors``)."""

    log_posteriors: list = []


def relative_bound(margin_nats: float) -> float:
    return math.exp(-margin_nats) / (1.0 - math.exp(-margin_nats))


def wide_model(config, items) -> MNB:
    """An MNB of ``config`` that learned ``items`` (document, label number) in order, one per second."""
    spec, params, half_life, _ = config
    model = MNB(spec, half_life=half_life, **params)
    for i, (doc, label) in enumerate(items):
        model.learn_one(doc, f"l{label}", ts=float(i), id=f"d{i}")
    return model


def assert_same_ranking(pruned, pruned_topk, dense, dense_topk, margin_nats=pruned_module.MARGIN_NATS,
                        bound=None):
    """Same labels in the same order (ties broken alike); each posterior ``p'`` of the pruned path within
    ``p <= p' <= p / (1 - e^-margin)`` (or ``p (1 + bound)``) of the dense ``p``, up to the rounding of the sums.

    With the default margin the labels are the dense pass's to the last tie. With a smaller margin or a
    tolerance the pruned normalizer differs from the dense one, and subtracting it can merge two log
    posteriors one rounding apart into a tie (then broken by id) or keep them apart where the dense
    subtraction merged them: the label at each rank must then have the dense log posterior of the dense
    label at that rank to within 1e-12 (a tie to rounding: either order is the computation's answer)."""
    strict = bound is None and margin_nats == pruned_module.MARGIN_NATS
    bound = relative_bound(margin_nats) if bound is None else bound

    def same(got_names, want_names, d):
        if strict or got_names == want_names:
            return got_names == want_names
        full = dense_topk.log_posteriors[d]
        return len(got_names) == len(want_names) and all(
            abs(full[a] - full[b]) <= 1e-12 * (1.0 + abs(full[b])) for a, b in zip(got_names, want_names))

    for d, (got, want) in enumerate(zip(pruned.names, dense.names)):
        assert same(got, want, d), (got, want)
    for d, (got, want) in enumerate(zip(pruned.labels, dense.labels)):
        assert got == want or (len(want) <= 1 and same(got, want, d)), (got, want)
    pairs = [(p, q) for got, want in zip(pruned_topk, dense_topk) for (_, p), (_, q) in zip(got, want)]
    pairs += list(zip(pruned.probabilities.ravel().tolist(), dense.probabilities.ravel().tolist()))
    for d, (got, want) in enumerate(zip(pruned_topk, dense_topk)):
        assert same([c for c, _ in got], [c for c, _ in want], d)
    for p, q in pairs:
        assert q * (1 - ROUNDING) <= p <= q * (1 + bound + ROUNDING)


def replay(config, op_list):
    spec, params, half_life, multilabel = config
    model = MNB(spec, half_life=half_life, multilabel=multilabel, **params)
    reference = DenseReference(model.spec, dict(model.params), half_life, multilabel)
    for op in op_list:
        kind = op[0]
        if kind == "learn":
            _, doc, labels, ts, doc_id = op
            key = doc_id if doc_id is not None else model.anonymous_id(doc)
            model.learn_one(doc, labels, ts=ts, id=doc_id)
            reference.learn(doc, labels, ts, key)
        elif kind == "forget":
            model.forget(op[1])
            reference.forget(op[1])
        elif kind == "unlearn":
            record = reference.docs.get(op[1])
            if record is not None and set(record.classes) == set(reference.classes_of(op[2])):
                model.unlearn_one(None, op[2], id=op[1])
                reference.forget(op[1])
        elif model.state.docs and len(model.classes_) > 1:  # score between updates: stale postings and maxima
            assert_same_ranking(*paths(model, [op[1]], 1))
    return model, reference


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs(), st.lists(ops, min_size=1, max_size=30), st.lists(documents, min_size=1, max_size=4),
       st.integers(1, 6), st.sampled_from([None, 0.05, 0.3]), st.sampled_from([1, 1, 1, 3]))
def test_pruned_topk_equals_dense_pass_and_reference(config, op_list, queries, k, threshold, budget_divisor):
    model, reference = replay(config, op_list)
    if not model.state.docs or k >= len(model.classes_):
        return
    pruned, pruned_topk, dense, dense_topk = paths(model, queries, k, threshold, budget_divisor)
    assert_same_ranking(pruned, pruned_topk, dense, dense_topk)
    assert RELATIVE_BOUND == relative_bound(pruned_module.MARGIN_NATS)
    classes = model.classes_
    for query, got in zip(queries, pruned_topk):
        expected = as_array(reference.log_posterior(query), classes, reference.multilabel)
        kth = np.sort(expected)[::-1][len(got) - 1]
        for name, p in got:
            assert math.log(p) == pytest.approx(expected[classes.index(name)], abs=1e-9)
            assert expected[classes.index(name)] >= kth - 1e-9  # the k best (up to ties at the cut)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs(), st.lists(ops, min_size=1, max_size=30), st.lists(documents, min_size=1, max_size=4),
       st.integers(1, 4), st.sampled_from([0.5, 3.0, 10.0]))
def test_small_margins_prune_within_their_bound(config, op_list, queries, k, margin_nats):
    """With margins small enough for these small models to leave classes out, the labels stay exact and
    each posterior stays within the bound of the margin: the certificate itself is what is checked."""
    model, _ = replay(config, op_list)
    if not model.state.docs or k >= len(model.classes_):
        return
    assert_same_ranking(*paths(model, queries, k, None, 1, margin_nats), margin_nats)


WIDE_VOCAB = [f"v{i}" for i in range(40)]
wide_documents = st.dictionaries(st.sampled_from(WIDE_VOCAB), counts, min_size=1, max_size=8)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs(), st.lists(st.tuples(wide_documents, st.integers(0, 39)), min_size=20, max_size=120),
       st.lists(wide_documents, min_size=1, max_size=4), st.integers(1, 5), st.sampled_from([0.5, 2.0, 5.0]))
def test_many_labels_small_margins_prune_within_their_bound(config, items, queries, k, margin_nats):
    """Up to 40 labels over 40 words: documents meet some labels and not others, so classes are left
    out by their bounds; the labels stay exact and each posterior within the margin's bound."""
    model = wide_model(config, items)
    if k >= len(model.classes_):
        return
    assert_same_ranking(*paths(model, queries, k, None, 1, margin_nats), margin_nats)


def many_classes_model(spec: str, n: int, **params) -> MNB:
    """``n`` classes: each has its own word and shares "common" (a word in every list)."""
    model = MNB(spec, **params)
    model.learn_many([{"common": 1.0, f"own{i}": 1.0 + i % 3, f"pair{i // 2}": 1.0} for i in range(n)],
                     [f"c{i}" for i in range(n)])
    return model


@pytest.mark.parametrize("spec, params", [("u_jm", {"beta": 0.5}),
                                          ("uc_pd_jm_dp", {"beta": 0.3, "mu": 5.0, "delta": 0.5, "ups": 0.2})])
def test_many_classes_take_the_pruned_path_and_skip_lists(spec, params):
    n = max(mnb_module.PRUNED_TOPK_MIN_CLASSES, 1024)
    model = many_classes_model(spec, n, **params)
    assert model.uses_pruned_topk(5) and not model.uses_pruned_topk(n // 4)
    # six classes far ahead (the k-th best too), "common" in every list: its bound keeps the rest out
    query = {f"own{i}": 10.0 for i in (7, 11, 300, 301, 500, 900)} | {"common": 1.0, "pair3": 1.0}
    got = model.predict_topk(query, 5)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mnb_module, "PRUNED_TOPK_MIN_CLASSES", 10**9)
        want = model.predict_topk(query, 5)
    assert [c for c, _ in got] == [c for c, _ in want]
    counts = model._pruner.counts
    assert counts["documents"] == 1 and counts["dense"] == 0
    assert counts["candidates"] < n / 4  # most classes were ruled out by their bounds, not scored
    assert counts["lists_read"] < counts["lists"]  # the list of "common" (every class) was not walked


def test_a_document_meeting_too_many_classes_takes_the_dense_pass():
    n = max(mnb_module.PRUNED_TOPK_MIN_CLASSES, 1024)
    model = many_classes_model("u_jm", n, beta=0.5)
    query = {"common": 1.0, "own3": 1.0}  # "common" is in every list: more than the budget
    got = model.predict_topk(query, 5)
    assert model._pruner.counts["dense"] == 1 and model._pruner.counts["lists_read"] <= 1
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mnb_module, "PRUNED_TOPK_MIN_CLASSES", 10**9)
        assert got == model.predict_topk(query, 5)


def test_certified_bound_is_below_double_rounding():
    assert RELATIVE_BOUND < 2.0**-52
    assert margin(1) == 40.0 and math.isclose(margin(100_000), math.log(100_000) + 40.0)


@pytest.mark.parametrize("k", [1, 3, 7, 10])
def test_ties_break_by_class_id_like_the_dense_path(k):
    """Equal scores rank by class id (first learned first), among matched and unmatched classes alike."""
    model = MNB("u_jm", beta=0.5)
    for i in range(12):  # c0..c4 share "a", c5..c9 share "b": every class ties with its group
        model.learn_one({"a" if i < 5 else "b" if i < 10 else "z": 1.0}, f"c{i}", id=f"d{i}")
    for query in ({"a": 1.0}, {"b": 1.0}, {"zzz": 1.0}, {"a": 1.0, "b": 1.0}):
        assert_same_ranking(*paths(model, [query], k))


def test_ties_reached_out_of_id_order():
    """More tied classes than k, reached in descending id order (through different terms): the k lowest ids win."""
    model = MNB("u_jm", beta=0.5)
    docs = [{"p": 1.0, "s": 1.0}, {"y": 1.0, "r": 1.0}, {"t": 1.0, "u": 1.0}, {"x": 1.0, "q": 1.0},
            {"v": 1.0, "n": 1.0}, {"w": 1.0, "o": 1.0}]
    for i, doc in enumerate(docs):
        model.learn_one(doc, f"c{i}", id=f"d{i}")
    pruned, pruned_topk, dense, dense_topk = paths(model, [{"w": 1.0, "x": 1.0, "y": 1.0}], 2)
    assert pruned.names == [["c1", "c3"]]
    assert_same_ranking(pruned, pruned_topk, dense, dense_topk)


@pytest.mark.parametrize("theta", [0.0, 1e-300, 1.0])
def test_classes_without_postings_tie_by_id_whatever_their_priors(theta):
    """With theta = 0 every prior term is 0: the classes a document does not meet tie, and the dense pass
    ranks them by id, not by their document counts (the prior-ordered index's order)."""
    model = MNB("u_jm_ps", beta=0.5, theta=theta)
    for i in range(12):
        for j in range(1 + (11 - i) % 4):  # sizes that do not follow the ids
            model.learn_one({f"w{i}": 1.0}, f"c{i}", id=f"d{i}-{j}")
    for query in ({"w3": 1.0}, {"zzz": 1.0}, {"w3": 1.0, "w7": 1.0}):
        for k in (1, 3, 5):
            assert_same_ranking(*paths(model, [query], k))


def test_flat_priors_over_many_classes_take_the_compiled_pass():
    """theta = 0 over 600 classes: the walk down the prior order gives up for the compiled pass, same answer."""
    model = MNB("u_jm_ps", beta=0.5, theta=0.0)
    model.learn_many([{f"w{i}": 1.0} for i in range(600) for _ in range(1 + i % 3)],
                     [f"c{i}" for i in range(600) for _ in range(1 + i % 3)])
    for query in ({"w3": 1.0}, {"zzz": 1.0}):
        assert_same_ranking(*paths(model, [query], 5))


# -- a stated posterior tolerance (the service's posterior_tolerance): labels exact, posteriors within tau

TOLERANCES = [0.3, 0.05, 1e-3, 1e-6]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs(), st.lists(st.tuples(wide_documents, st.integers(0, 39)), min_size=20, max_size=120),
       st.lists(wide_documents, min_size=1, max_size=4), st.integers(1, 5), st.sampled_from(TOLERANCES),
       st.sampled_from([None, 0.4]))
def test_tolerance_keeps_labels_exact_and_posteriors_within_it(config, items, queries, k, tolerance, threshold):
    """Up to 40 labels over 40 words, the public ``tolerance`` argument: the top-k labels (and the labels
    above a threshold) are the dense pass's, and every emitted posterior ``p'`` satisfies
    ``p <= p' <= p (1 + tau)`` against the dense ``p`` (up to the rounding of the sums)."""
    model = wide_model(config, items)
    if k >= len(model.classes_):
        return
    assert_same_ranking(*paths(model, queries, k, threshold, 1, tolerance=tolerance), bound=tolerance)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs(), st.lists(ops, min_size=1, max_size=30), st.lists(documents, min_size=1, max_size=4),
       st.integers(1, 4), st.sampled_from(TOLERANCES))
def test_tolerance_under_updates_against_the_reference(config, op_list, queries, k, tolerance):
    """learn / unlearn / forget / decay, then the tolerance path: labels exact, posteriors within tau of the
    dense pass and of tests/reference.py (relative tau plus 1e-9 in log space)."""
    model, reference = replay(config, op_list)
    if not model.state.docs or k >= len(model.classes_):
        return
    pruned, pruned_topk, dense, dense_topk = paths(model, queries, k, None, 1, tolerance=tolerance)
    assert_same_ranking(pruned, pruned_topk, dense, dense_topk, bound=tolerance)
    classes = model.classes_
    for query, got in zip(queries, pruned_topk):
        expected = as_array(reference.log_posterior(query), classes, reference.multilabel)
        for name, p in got:
            gap = math.log(p) - expected[classes.index(name)]
            assert -1e-9 <= gap <= math.log1p(tolerance) + 1e-9


def test_tolerance_maps_to_the_margin_that_certifies_it():
    """``margin = log N + log(1 + 1/tau)``: the left-out mass ``N e^-margin Z`` is ``Z tau / (1 + tau)``, so
    ``p' / p - 1 <= tau`` exactly (a looser margin fails here); ``None`` is today's ``log N + 40``."""
    for tau in (0.5, 0.05, 1e-3, 1e-6, 1e-12):
        assert math.isclose(pruned_module.relative_bound(tau), tau, rel_tol=1e-9)
        assert math.isclose(margin(100_000, tau), math.log(100_000) + math.log1p(1 / tau), rel_tol=1e-12)
        assert margin(100_000, tau) < margin(100_000, tau / 2)
    assert pruned_module.relative_bound(None) == RELATIVE_BOUND
    assert margin(100_000, None) == margin(100_000)
    assert math.isclose(pruned_module.tolerance_nats(RELATIVE_BOUND), pruned_module.MARGIN_NATS, rel_tol=1e-12)


@pytest.mark.parametrize("bad", [0.0, -1e-3, 1.0, 2.0, float("nan"), float("inf"), True, "0.1"])
def test_a_bad_tolerance_is_refused_on_every_path(bad):
    model = many_classes_model("u_jm", 16, beta=0.5)
    for call in (lambda: model.rank_many([{"own1": 1.0}], 3, None, bad),
                 lambda: model.predict_topk_many([{"own1": 1.0}], 3, bad)):
        with pytest.raises(ValueError, match="posterior tolerance"):
            call()


def test_the_default_tolerance_is_the_exact_path():
    """``tolerance=None`` is today's certified path: the same answers, bit for bit, as not passing one."""
    n = max(mnb_module.PRUNED_TOPK_MIN_CLASSES, 1024)
    model = many_classes_model("uc_pd_jm_dp", n, beta=0.3, mu=5.0, delta=0.5, ups=0.2)
    queries = [{f"own{i}": 10.0 for i in (7, 11, 300, 301, 500, 900)} | {"common": 1.0}, {"own3": 2.0}]
    assert model.predict_topk_many(queries, 5) == model.predict_topk_many(queries, 5, None)
    a, b = model.rank_many(queries, 5), model.rank_many(queries, 5, None, None)
    assert a.names == b.names and a.labels == b.labels and np.array_equal(a.probabilities, b.probabilities)


@pytest.mark.parametrize("spec, params", [("u_jm", {"beta": 0.5}),
                                          ("uc_pd_jm_dp", {"beta": 0.3, "mu": 5.0, "delta": 0.5, "ups": 0.2})])
@pytest.mark.parametrize("nats_beyond", [3.0, 6.0])
def test_tolerance_bound_is_tight_where_every_other_label_sits_at_the_margin(spec, params, nats_beyond):
    """One label far ahead and N - 1 tied labels ``g`` nats behind, all in the list of the document's word:
    their whole mass is what the margin can leave out. With ``tau`` whose margin lies 0.1 nats beyond
    ``g`` they are kept (posteriors exact); with ``tau`` whose margin lies 0.1 nats short of ``g`` they are
    left out and the top posterior's error is ``(N - 1) e^-g``: within ``tau`` and above half of it. A
    margin looser by 0.2 nats leaves them out in the first case, above ``tau``: this test fails."""
    n = 50
    model = MNB(spec, **params)
    model.learn_many([{"w": 6.0, "x": 1.0}] + [{"w": 1.0, f"o{i}": 6.0} for i in range(1, n)],
                     [f"c{i}" for i in range(n)])
    unit = model.predict_log_proba_many([{"w": 1.0}])[1][0]
    assert np.allclose(unit[1:], unit[1])  # the N - 1 labels tie
    weight = (math.log(n) + nats_beyond) / (unit[0] - unit[1])
    query = [{"w": weight}]
    log_post = model.predict_log_proba_many(query)[1][0]
    gap = log_post[0] - log_post[1]
    for shift, pruned_expected in ((0.1, False), (-0.1, True)):
        nats = gap - math.log(n) + shift  # margin = log N + nats = gap + shift
        tau = 1.0 / math.expm1(nats)  # log(1 + 1/tau) = nats
        pruned, pruned_topk, dense, dense_topk = paths(model, query, 1, tolerance=tau)
        assert_same_ranking(pruned, pruned_topk, dense, dense_topk, bound=tau)
        error = pruned_topk[0][0][1] / dense_topk[0][0][1] - 1
        if pruned_expected:
            assert tau / 2 < error <= tau * (1 + ROUNDING)
            assert math.isclose(error, (n - 1) * math.exp(-gap), rel_tol=1e-6)
            # a label threshold between p and p' = p (1 + error): the output labels are still the dense pass's
            threshold = dense_topk[0][0][1] * (1 + error / 2)
            got, _, want, _ = paths(model, query, 1, threshold, tolerance=tau)
            assert got.labels == want.labels == [[]]
        else:
            assert abs(error) < ROUNDING


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs(), st.lists(st.tuples(wide_documents, st.integers(0, 39)), min_size=20, max_size=120),
       st.lists(wide_documents, min_size=1, max_size=4), st.integers(1, 5), st.sampled_from([None, 1e-3, 0.3]),
       st.sampled_from([1, 3, 8]))
def test_blocks_of_labels_without_postings_skip_only_what_cannot_reach(config, items, queries, k, tolerance,
                                                                       block_size):
    """Small blocks (``BLOCK_SIZE`` 1, 3, 8 over up to 40 labels) so that the per-block bound of the labels
    without postings decides often: the labels and posteriors are still the dense pass's (within tau)."""
    model = wide_model(config, items)
    if k >= len(model.classes_):
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pruned_module, "BLOCK_SIZE", block_size)
        model._pruner = None  # block maxima cached per epoch and size
        got = paths(model, queries, k, None, 1, tolerance=tolerance)
    assert_same_ranking(*got, bound=pruned_module.relative_bound(tolerance))
