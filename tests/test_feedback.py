"""Model-based feedback (the fb affix, model/feedback.py) against the dense brute-force reference.

The reference computes the first pass, the posterior weights of the top labels, the feedback distribution
``f(n) = sum_k pi_k C(l_k, n) / C(l_k)`` and the mixed document from its own dense tables; the model's second
pass must score exactly that document. Labels or terms tied at the cut (within 1e-9) may be taken either
way: the model's choice must then be one of the admissible ones, and it is checked against that one.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sgm.model import MNB, TDM
from sgm.model.spec import SpecError, parse_spec
from tests.reference import SEP, DenseReference, as_array
from tests.test_mnb_exact import configs, documents, label_sets

TOLERANCE = 1e-9
TIE = 1e-9


@st.composite
def feedback_params(draw):
    return {"fb_lambda": draw(st.floats(0.01, 1.0)), "fb_labels": draw(st.integers(1, 4)),
            "fb_terms": draw(st.integers(1, 9))}


def reference_key(name, multilabel: str) -> str:
    return SEP.join(name) if multilabel == "powerset" else name


def admissible_feedback(values: dict[str, float], n_terms: int) -> list[set[str]]:
    """Every set of ``n_terms`` largest positive values, ties within :data:`TIE` at the cut taken either way."""
    ranked = sorted((v for v in values.values() if v > 0), reverse=True)
    if len(ranked) <= n_terms:
        return [{t for t, v in values.items() if v > 0}]
    cut = ranked[n_terms - 1]
    sure = {t for t, v in values.items() if v > cut * (1 + TIE)}
    tied = sorted(t for t, v in values.items() if abs(v - cut) <= cut * TIE)
    return [sure | set(choice) for choice in itertools.combinations(tied, n_terms - len(sure))]


def check_second_pass(model, reference: DenseReference, query: dict) -> None:
    lam, n_terms = model.feedback.lam, model.feedback.terms
    multilabel = model.multilabel
    (chosen,) = model.feedback_documents([query])
    first = reference.log_posterior(query)
    # the top labels: as many as asked (or all), none beaten by a label left out, weighted by their posteriors
    picked = [reference_key(name, multilabel) for name, _ in chosen.labels]
    assert len(picked) == min(model.feedback.labels, len(first)) and len(set(picked)) == len(picked)
    left = [v for c, v in first.items() if c not in picked]
    assert not left or min(first[c] for c in picked) >= max(left) - TIE
    peak = max(first[c] for c in picked)
    total = sum(math.exp(first[c] - peak) for c in picked)
    pi = [math.exp(first[c] - peak) / total for c in picked]
    np.testing.assert_allclose([p for _, p in chosen.labels], pi, rtol=0, atol=TOLERANCE)
    # the feedback distribution over the dense tables, its N largest terms, the mixed document
    _, counts, _ = reference.class_counts()
    values: dict[str, float] = {}
    for c, p in zip(picked, pi):
        mass = sum(counts[c].values())
        for t, count in counts[c].items():
            values[t] = values.get(t, 0.0) + p * count / mass
    weights = reference.query_weights(query)
    length = sum(weights.values())
    matched = None
    for kept in admissible_feedback(values, n_terms):
        kept_total = sum(values[t] for t in kept)
        mixed = {t: (1 - lam) * w for t, w in weights.items()}
        for t in kept:
            mixed[t] = mixed.get(t, 0.0) + lam * length * values[t] / kept_total
        mixed = {t: w for t, w in mixed.items() if w > 0}
        if set(mixed) == set(chosen.weights) and all(abs(mixed[t] - chosen.weights[t]) <= TOLERANCE * max(1.0, w)
                                                     for t, w in mixed.items()):
            matched = mixed
            break
    assert matched is not None, (chosen, values, weights)
    # the second pass: the mixed document through the scoring kernel
    classes, log_post = model.predict_log_proba_many([query])
    expected = as_array(reference.log_posterior(query, weighted=matched), classes, multilabel)
    np.testing.assert_allclose(log_post[0], expected, rtol=0, atol=TOLERANCE)


#: Documents learned in order: text, labels and a timestamp (None: the model's clock).
learned_items = st.lists(st.tuples(documents, label_sets, st.one_of(st.none(), st.floats(0.0, 60.0))), min_size=1,
                         max_size=10)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs(), feedback_params(),
       learned_items,
       st.lists(documents, min_size=1, max_size=3))
def test_second_pass_equals_dense_reference(config, fb, items, queries):
    spec, params, half_life, multilabel = config
    model = MNB(spec + "_fb", half_life=half_life, multilabel=multilabel, **params, **fb)
    reference = DenseReference(model.spec, dict(model.params), half_life, multilabel)
    for i, (doc, labels, ts) in enumerate(items):
        model.learn_one(doc, labels, ts=ts, id=f"d{i}")
        reference.learn(doc, labels, ts, f"d{i}")
        if i == len(items) // 2:  # scored between updates: the label-major cache must follow them
            check_second_pass(model, reference, queries[0])
    for query in queries:
        check_second_pass(model, reference, query)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs(), feedback_params(),
       learned_items,
       st.lists(documents, min_size=1, max_size=4))
def test_lambda_zero_reproduces_the_scores_exactly(config, fb, items, queries):
    """fb_lambda = 0: no second pass, the same scores bit for bit as the spec without fb (MNB and TDM)."""
    spec, params, half_life, multilabel = config
    fb["fb_lambda"] = 0.0
    pairs = [(MNB(spec, half_life=half_life, multilabel=multilabel, **params),
              MNB(spec + "_fb", half_life=half_life, multilabel=multilabel, **params, **fb))]
    tdm_params = {"beta": 0.3, "mu": 2.0, "kmu": 3.0, **{k: v for k, v in params.items() if k in ("gamma", "kappa", "eps")}}
    tdm_spec = "tdm_uc_jm_dp_kdp" + ("_fw" if "_fw" in spec else "")
    pairs.append((TDM(tdm_spec, multilabel=multilabel, **tdm_params), TDM(tdm_spec + "_fb", multilabel=multilabel,
                                                                             **tdm_params, **fb)))
    for plain, with_fb in pairs:
        for i, (doc, labels, ts) in enumerate(items):
            for m in (plain, with_fb):
                m.learn_one(doc, labels, ts=ts, id=f"d{i}")
        names_a, a = plain.predict_log_proba_many(queries)
        names_b, b = with_fb.predict_log_proba_many(queries)
        assert names_a == names_b
        np.testing.assert_array_equal(a, b)
        assert plain.rank_many(queries, 2).names == with_fb.rank_many(queries, 2).names


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(feedback_params(), st.booleans(),
       st.lists(st.tuples(documents, label_sets), min_size=2, max_size=10), st.lists(documents, min_size=1, max_size=3))
def test_tdm_second_pass_is_its_kernel_on_the_mixed_document(fb, fw, items, queries):
    """TDM with fb scores the mixed document (feedback_documents) with its own kernel, as a scored document."""
    spec = "tdm_uc_jm_dp_kdp" + ("_fw" if fw else "")
    params = {"beta": 0.3, "mu": 2.0, "kmu": 3.0, **({"gamma": 1.0, "kappa": 1.0, "eps": 0.2} if fw else {})}
    with_fb, plain = TDM(spec + "_fb", **params, **fb), TDM(spec, **params)
    for i, (doc, labels) in enumerate(items):
        for m in (with_fb, plain):
            m.learn_one(doc, labels, id=f"d{i}")
    mixed = [d.weights for d in with_fb.feedback_documents(queries)]
    names_a, a = with_fb.predict_log_proba_many(queries)
    names_b, b = plain.predict_log_proba_many(mixed)
    assert names_a == names_b
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)


def test_affix_and_numbers():
    spec = parse_spec("uc_pd_jm_dp_fw_fb_ps")
    assert spec.feedback and spec.name == "mnb_uc_pd_jm_dp_fw_fb_ps"
    assert {"fb_lambda", "fb_labels", "fb_terms"} <= spec.free_params
    assert "fb_lambda" not in parse_spec("uc_pd_jm_dp_fw_ps").free_params
    with pytest.raises(SpecError, match="fb_lambda"):
        MNB("u_jm_fb", beta=0.5, fb_lambda=1.5)
    with pytest.raises(SpecError, match="not used"):
        MNB("u_jm", beta=0.5, fb_lambda=0.5)
    with pytest.raises(ValueError, match="no feedback"):
        MNB("u_jm", beta=0.5).feedback_documents(["a"])


def test_feedback_terms_are_the_n_largest_and_the_pruned_path_is_not_taken():
    """Many labels: top-k must come from the second pass, not the pruned first-pass path."""
    m = MNB("u_jm_fb", beta=0.5, fb_lambda=0.5, fb_labels=2, fb_terms=3)
    texts = [f"w{i} w{i} common x{i % 7} y{i % 5}" for i in range(200)]
    m.learn_many(texts, [f"c{i}" for i in range(200)])
    assert not m.uses_pruned_topk(1)
    (doc,) = m.feedback_documents(["w3 common"])
    assert len([t for t in doc.weights if t not in ("w3", "common")]) <= 3
    classes, log_post = m.predict_log_proba_many(["w3 common"])
    ranked = m.rank_many(["w3 common"], 3)
    order = np.argsort(-log_post[0], kind="stable")[:3]
    assert ranked.names[0] == [classes[i] for i in order]


def test_the_label_major_cache_is_counted_in_the_models_bytes():
    # memory_bytes (the service's gauge) counts every score cache through cache_bytes; fb's label-major copy of
    # the count tables (16 bytes an entry) was left out
    docs, labels = ["cheap pills cheap now", "monday meeting notes", "win cheap prize"], ["spam", "ham", "spam"]
    plain, fb = MNB("u_jm", beta=0.5), MNB("u_jm_fb", beta=0.5, fb_lambda=0.5, fb_labels=2, fb_terms=3)
    for model in (plain, fb):
        model.learn_many(docs, labels)
        model.predict_log_proba_many(["pills meeting"])
    table = fb.feedback.label_terms(fb.state)
    extra = table.row_ptr.nbytes + table.row_term.nbytes + table.row_prob.nbytes
    assert extra > 0 and fb.cache_bytes() == plain.cache_bytes() + extra
