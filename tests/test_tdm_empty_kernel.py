"""A kernel that keeps nothing (``kdelta=1`` or ``kbeta=1`` on its first step): every posting weight is +0.0.

:meth:`model.tdm.TDM._kernel_keeps_nothing` then skips the posting-weight computation and marks the zeros
without copying the postings' nodes (:meth:`model.document_nodes.DocumentNodes.store_zero_weights`;
docs/RESULTS.md's tuned spamassassin TDM has ``kdelta=1.0``). Checked here: the scores are bit-for-bit
those of the full computation over random learn/forget/unlearn/decay/restore sequences, and the scoring loop
took the same paths (its counters: the node pass is chosen from the postings' count, which the mark keeps);
they equal the dense reference (tests/reference_tdm.py); the shortcut is actually taken; the guard refuses
kernels that keep something and label chains whose kept part could be negative; and where the scoring loop
does read the zero-weight nodes (a document that also holds a weighted term) it reads what the copy held.
"""
from __future__ import annotations

import contextlib

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from sgm.model import TDM
from sgm.model.document_nodes import DocumentNodes
from sgm.model.loops.node_postings import release_unfit, store_cached_zeros
from tests.test_tdm_exact import apply_op, configs, documents, make_model, ops, replay


@st.composite
def empty_kernel_configs(draw):
    """tests/test_tdm_exact.py's configurations with the kernel's first step set to take everything."""
    spec, params, options = draw(configs())
    kernel = [affix for affix in spec.split("_") if affix in ("kjm", "kpd")]
    assume(kernel)
    params = dict(params)
    # the chain's order: kpd before kjm (model.smoothing), so kpd is first whenever present
    if "kpd" in kernel:
        params["kdelta"] = 1.0
    else:
        params["kbeta"] = 1.0
    return spec, params, options


@contextlib.contextmanager
def counting_shortcut(enabled: bool = True):
    """Count the calls of the guard that said yes; with ``enabled=False`` it always says no (the full path)."""
    original = TDM._kernel_keeps_nothing
    taken = [0]

    def guard(self, *args):
        if not enabled:
            return False
        answer = original(self, *args)
        taken[0] += answer
        return answer

    TDM._kernel_keeps_nothing = guard
    try:
        yield taken
    finally:
        TDM._kernel_keeps_nothing = original


def scored(config, op_list, queries, node_pruning):
    """Every score op's and the final queries' log posteriors, bits included, over one replay."""
    model = make_model(config, node_pruning=node_pruning)
    rows = []
    for op in op_list:
        if op[0] == "score":
            if len(model):
                rows.append(model.predict_log_proba_many([op[1]]))
            continue
        model = apply_op(model, op)
    if len(model):
        rows.append(model.predict_log_proba_many(queries))
    return [(classes, np.asarray(log_post).view(np.int64).tolist()) for classes, log_post in rows], model


def paths(model: TDM) -> list[int]:
    """The scoring loop's counters (model.loops.mixture.COUNTERS: postings, node passes, ...) and the weights
    computed, since the model was built or restored."""
    return model.nodes.counters.tolist() + [model.nodes.weights_recomputed]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(empty_kernel_configs(), st.lists(ops, min_size=1, max_size=25), st.lists(documents, min_size=1, max_size=4),
       st.booleans())
def test_empty_kernel_scores_are_the_full_computations_bit_for_bit(config, op_list, queries, node_pruning):
    """(That the shortcut is taken where it should be: the guard test below; here a query may share no term
    with the model, or find its weights fresh, and then no weights are computed at all.)"""
    with counting_shortcut():
        fast, fast_model = scored(config, op_list, queries, node_pruning)
    with counting_shortcut(enabled=False):
        full, full_model = scored(config, op_list, queries, node_pruning)
    assert fast == full
    assert paths(fast_model) == paths(full_model)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(empty_kernel_configs(), st.lists(ops, min_size=1, max_size=25), st.lists(documents, min_size=1, max_size=4),
       st.booleans())
def test_empty_kernel_posteriors_equal_dense_reference(config, op_list, queries, node_pruning):
    replay(config, op_list, queries, node_pruning=node_pruning)


def _learned(spec: str, **params) -> TDM:
    model = TDM(spec, **params)
    model.learn_many(["cheap pills buy now", "buy cheap watches now", "meeting notes for monday",
                      "monday lunch with the team"], ["spam", "spam", "ham", "ham"], ids=["m1", "m2", "m3", "m4"])
    return model


def test_the_guard_takes_the_tuned_spam_kernel_and_refuses_the_others():
    queries = ["cheap now", "monday team lunch", "buy cheap pills monday", "notes"]
    tuned = {"kdelta": 1.0, "kmu": 1000.0, "beta": 0.67, "mu": 289.0}
    with counting_shortcut(enabled=False):
        full = _learned("tdm_uc_jm_dp_kpd_kdp", **tuned).predict_log_proba_many(queries)
    with counting_shortcut() as taken:
        fast = _learned("tdm_uc_jm_dp_kpd_kdp", **tuned).predict_log_proba_many(queries)
        assert taken[0] == 1 and fast[0] == full[0]
        assert np.array_equal(fast[1].view(np.int64), full[1].view(np.int64))
        # a kernel that keeps part of each count: the weights are computed
        model = _learned("tdm_uc_jm_dp_kpd_kdp", kdelta=0.999, kmu=1000.0, beta=0.67, mu=289.0)
        model.predict_proba_one("cheap now")
        assert taken[0] == 1 and model.nodes.term_bound.max() > 0.0
        # kbeta=1 on a kernel whose first step is kpd: the kpd step keeps part, so no shortcut
        _learned("tdm_uc_jm_kjm_kpd", kbeta=1.0, kdelta=0.5, beta=0.5).predict_proba_one("cheap now")
        assert taken[0] == 1
        # a label chain with a power discount (its kept part is not shown non-negative): no shortcut
        _learned("tdm_uc_pd_jm_kpd", kdelta=1.0, beta=0.5, delta=0.5).predict_proba_one("cheap now")
        assert taken[0] == 1


def copied_zero_weights(self, terms, fills, epoch):
    """The store of zero weights before they were left uncopied (the reference): the postings' nodes copied
    from the arena into the weight cache with weights +0.0."""
    term_array, fills = np.asarray(terms, dtype=np.int64), np.asarray(fills, dtype=np.int64)
    released, total = release_unfit(term_array, fills, epoch, self.weight_epoch, self.cache_cap)
    self.cache_live -= int(released)
    self._reserve_cache(int(total))
    self.cache_used = int(store_cached_zeros(term_array, fills, self.post_start, self.post_node, self.cache_used,
                                             self.cache_start, self.cache_len, self.cache_cap, self.cache_node,
                                             self.cache_weight, self.term_bound))
    self.cache_live += int(total)
    self.weights_recomputed += len(term_array)


@contextlib.contextmanager
def alternating_guard(copied: bool):
    """The guard says yes on every other call, whatever the kernel (so zero weights, right or not, sit beside
    computed ones in one state epoch: a document holding both makes the scoring loop read the zero-weight
    terms' nodes); with ``copied`` the zeros are stored as before (:func:`copied_zero_weights`)."""
    calls = [0]

    def guard(self, *args):
        calls[0] += 1
        return calls[0] % 2 == 1

    original_guard, original_store = TDM._kernel_keeps_nothing, DocumentNodes.store_zero_weights
    TDM._kernel_keeps_nothing = guard
    if copied:
        DocumentNodes.store_zero_weights = copied_zero_weights
    try:
        yield calls
    finally:
        TDM._kernel_keeps_nothing, DocumentNodes.store_zero_weights = original_guard, original_store


def scored_one_at_a_time(config, op_list, queries, node_pruning):
    """:func:`scored`, the final queries scored one at a time (several weight builds in one state epoch)."""
    rows, model = scored(config, op_list, [], node_pruning)
    if len(model):
        for query in queries:
            classes, log_post = model.predict_log_proba_many([query])
            rows.append((classes, np.asarray(log_post).view(np.int64).tolist()))
    return rows, model


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs(), st.lists(ops, min_size=1, max_size=25), st.lists(documents, min_size=1, max_size=6),
       st.booleans())
def test_uncopied_zero_weights_score_as_the_copied_ones_bit_for_bit(config, op_list, queries, node_pruning):
    """Zero weights marked without their nodes (store_zero_weights) against the same zeros copied (as before),
    with the same guard answers: the same posteriors, bits included, and the same scoring paths, also where a
    document holds zero-weight terms beside weighted ones (their nodes are copied before the loop reads them)."""
    with alternating_guard(copied=False) as calls:
        uncopied, uncopied_model = scored_one_at_a_time(config, op_list, queries, node_pruning)
    with alternating_guard(copied=True) as reference_calls:
        copied, copied_model = scored_one_at_a_time(config, op_list, queries, node_pruning)
    assert calls[0] == reference_calls[0]
    assert uncopied == copied
    assert paths(uncopied_model) == paths(copied_model)


def test_a_document_with_zero_and_computed_weights_reads_the_copied_nodes():
    """One state epoch: the first query's terms get zero weights (left uncopied), the second query's new term
    computed ones; the second query holds both, so its uncopied terms are copied before the scoring loop reads
    them, and it scores as with the zeros copied at once."""
    tuned = {"kdelta": 0.5, "kmu": 10.0, "beta": 0.67, "mu": 2.0}
    results = []
    for copied in (False, True):
        with alternating_guard(copied=copied) as calls:
            model = _learned("tdm_uc_jm_dp_kpd_kdp", **tuned)
            model.predict_log_proba_many(["cheap now monday"])  # guard yes: zeros, uncopied unless `copied`
            nodes = model.nodes
            held = [model.state.terms.ids[word] for word in ("cheap", "now", "monday")]
            assert (nodes.uncopied(np.array(held)).all() != copied) and nodes.term_bound[held].max() == 0.0
            _, log_post = model.predict_log_proba_many(["cheap now monday pills"])  # guard no: "pills" computed
            assert calls[0] == 2 and nodes.term_bound[model.state.terms.ids["pills"]] > 0.0
            assert not nodes.uncopied(np.array(held)).any()
            results.append((log_post.view(np.int64).tolist(), paths(model)))
    assert results[0] == results[1]
