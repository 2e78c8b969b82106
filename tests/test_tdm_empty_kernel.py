"""A kernel that keeps nothing (``kdelta=1`` or ``kbeta=1`` on its first step): every posting weight is +0.0.

:meth:`model.tdm.TDM._kernel_keeps_nothing` then skips the posting-weight computation and stores zeros
(docs/RESULTS.md's tuned spamassassin TDM has ``kdelta=1.0``). Checked here: the scores are bit-for-bit
those of the full computation over random learn/forget/unlearn/decay/restore sequences, they equal the dense
reference (tests/reference_tdm.py), the shortcut is actually taken, and the guard refuses kernels that keep
something and label chains whose kept part could be negative.
"""
from __future__ import annotations

import contextlib

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from sgm.model import TDM
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


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(empty_kernel_configs(), st.lists(ops, min_size=1, max_size=25), st.lists(documents, min_size=1, max_size=4),
       st.booleans())
def test_empty_kernel_scores_are_the_full_computations_bit_for_bit(config, op_list, queries, node_pruning):
    """(That the shortcut is taken where it should be: the guard test below; here a query may share no term
    with the model, or find its weights fresh, and then no weights are computed at all.)"""
    with counting_shortcut():
        fast, _ = scored(config, op_list, queries, node_pruning)
    with counting_shortcut(enabled=False):
        full, _ = scored(config, op_list, queries, node_pruning)
    assert fast == full


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
