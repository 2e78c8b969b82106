"""Property tests: an ensemble's posterior equals the log-linear pool of its bases' dense references.

An MNB and a TDM base (random affixes and numbers, shared decay and multi-label mode) learn, re-learn,
unlearn and forget the same documents through the ensemble; every posterior equals the pool, computed
here from scratch, of what ``tests/reference.py`` and ``tests/reference_tdm.py`` give for each base
(floored, with drawn weights, meta-features and per-class biases), also after a snapshot round trip.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sgm.model import MNB, TDM, Ensemble, LearnGuardError, build_model, model_config
from tests.reference import DenseReference, class_name as mnb_class_name
from tests.reference_tdm import DenseTDMReference, class_name as tdm_class_name
from tests.test_mnb_exact import configs as mnb_configs, documents, label_sets, ops
from tests.test_tdm_exact import configs as tdm_configs

TOLERANCE = 1e-8  # the bases agree with their references to 1e-9; the pool multiplies by weights up to 2
SEP = "\x1f"
BIAS_KEYS = ["a", "b", "c", "a" + SEP + "b", "a" + SEP + "c"]


@st.composite
def ensembles(draw):
    spec, params, _, multilabel = draw(mnb_configs())
    tdm_spec, tdm_params, options = draw(tdm_configs(memory_bound=False))
    half_life = options["half_life"]  # None or above 3: the default expiry (20 half-lives) stays outside [0, 60]
    bases = [MNB(spec, half_life=half_life, multilabel=multilabel, **params),
             # the exact TDM kernel: its node pruning's bound is on posteriors (tests/test_tdm_exact.py), which a
             # negative pool weight on a pruned label's log posterior would not keep
             TDM(tdm_spec, half_life=half_life, multilabel=multilabel, node_pruning=False, **tdm_params)]
    meta = draw(st.booleans())
    width = 3 + 2 * len(bases) if meta else 1
    weights = draw(st.lists(st.lists(st.floats(-1.0, 2.0), min_size=width, max_size=width),
                            min_size=len(bases), max_size=len(bases)))
    bias = draw(st.dictionaries(st.sampled_from(BIAS_KEYS), st.floats(-3.0, 3.0), max_size=3))
    floor = draw(st.sampled_from([-50.0, -8.0, -2.0]))
    return Ensemble(bases, weights, bias, meta=meta, floor=floor)


def references(ensemble: Ensemble) -> list:
    mnb, tdm = ensemble.bases
    return [DenseReference(mnb.spec, dict(mnb.params), mnb.half_life, mnb.multilabel), DenseTDMReference.for_model(tdm)]


def expected_rows(ensemble: Ensemble, refs: list, query: dict, classes: list) -> list[np.ndarray]:
    """The pool of the references' posteriors, written out per class; one row per way of breaking near ties
    of a base's arg-max (the agreement meta-feature counts arg-max classes)."""
    names = (mnb_class_name, tdm_class_name)
    per_base = []
    for ref, name in zip(refs, names):
        by_class = {name(k, ref.multilabel): v for k, v in ref.log_posterior(query).items()}
        per_base.append([max(by_class[c], ensemble.floor) for c in classes])
    k = len(classes)
    constant = [1.0]
    if ensemble.meta:
        constant.append(math.log1p(sum(query.values())) / 5.0)
        for lp in per_base:
            p = [math.exp(x) for x in lp]
            constant.append(max(p))
            constant.append(-sum(pi * x for pi, x in zip(p, lp)) / (math.log(k) if k > 1 else 1.0))
    tops = [[i for i, x in enumerate(lp) if x >= max(lp) - 1e-7] for lp in per_base]
    rows = []
    for chosen in itertools.product(*tops):
        m = list(constant)
        if ensemble.meta:
            m.append(sum(a == b for a in chosen for b in chosen) / len(chosen) ** 2)
        alpha = [sum(v * f for v, f in zip(ensemble.weights[j], m)) for j in range(len(per_base))]
        scores = [sum(alpha[j] * per_base[j][i] for j in range(len(per_base)))
                  + ensemble.bias.get(SEP.join(c) if isinstance(c, tuple) else c, 0.0) for i, c in enumerate(classes)]
        top = max(scores)
        norm = top + math.log(sum(math.exp(s - top) for s in scores))
        rows.append(np.array([s - norm for s in scores]))
    return rows


def check(ensemble: Ensemble, refs: list, queries) -> None:
    assert len(ensemble) == len(refs[0].docs) == len(refs[1].docs)
    if not len(ensemble):
        return
    classes, log_post = ensemble.predict_log_proba_many(queries)
    for query, row in zip(queries, log_post):
        candidates = expected_rows(ensemble, refs, query, classes)
        assert any(np.allclose(row, expected, rtol=0, atol=TOLERANCE) for expected in candidates), \
            (row, candidates)


def replay(ensemble: Ensemble, op_list, final_queries, restore_at: int | None = None):
    refs = references(ensemble)
    for step, op in enumerate(op_list):
        kind = op[0]
        if kind == "learn":
            _, doc, labels, ts, doc_id = op
            key = doc_id if doc_id is not None else ensemble.bases[0].anonymous_id(doc)
            ensemble.learn_one(doc, labels, ts=ts, id=doc_id)
            for ref in refs:
                ref.learn(doc, labels, ts, key)
        elif kind == "forget":
            assert ensemble.forget(op[1]) == (op[1] in refs[0].docs)
            for ref in refs:
                ref.forget(op[1])
        elif kind == "unlearn":
            _, doc_id, labels = op
            record = refs[0].docs.get(doc_id)
            if record is None:
                assert ensemble.unlearn_one(None, labels, id=doc_id) is False
            elif set(record.classes) != set(refs[0].classes_of(labels)):
                with pytest.raises(LearnGuardError):
                    ensemble.unlearn_one(None, labels, id=doc_id)
                assert all(doc_id in base for base in ensemble.bases)  # refused before any base changed
            else:
                assert ensemble.unlearn_one(None, labels, id=doc_id) is True
                for ref in refs:
                    ref.forget(doc_id)
        else:  # score now: fills the bases' caches, which later updates make stale
            check(ensemble, refs, [op[1]])
        if step == restore_at:
            ensemble = Ensemble.from_bytes(ensemble.to_bytes())
    check(ensemble, refs, final_queries)
    return ensemble


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ensembles(), st.lists(ops, min_size=1, max_size=20), st.lists(documents, min_size=1, max_size=3),
       st.one_of(st.none(), st.integers(0, 19)))
def test_pool_equals_the_pool_of_dense_references(ensemble, op_list, queries, restore_at):
    replay(ensemble, op_list, queries, restore_at)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ensembles(), st.lists(st.tuples(documents, label_sets, st.floats(0.0, 60.0)), min_size=1, max_size=8),
       st.lists(documents, min_size=1, max_size=3))
def test_sequential_batch_equals_references_learning_one_at_a_time(ensemble, items, queries):
    ensemble.learn_many([d for d, _, _ in items], [lab for _, lab, _ in items], ts=[t for _, _, t in items],
                        ids=[f"b{i}" for i in range(len(items))], sequential=True)
    refs = references(ensemble)
    for i, (doc, labels, ts) in enumerate(items):
        for ref in refs:
            ref.learn(doc, labels, ts, f"b{i}")
    check(ensemble, refs, queries)


def test_configuration_round_trip_and_bad_pools():
    ensemble = build_model({"model": "ensemble", "bases": [{"model": "u_jm", "params": {"beta": 0.3}},
                                                           {"model": "uc_pd_jm_dp", "tokenizer": {"binary": True}}],
                            "weights": [0.7, 0.5], "bias": {"spam": 0.2}})
    config = model_config(ensemble)
    assert config["bases"][1]["tokenizer"]["binary"] is True and config["weights"] == [[0.7], [0.5]]
    assert model_config(build_model(config)) == config
    with pytest.raises(ValueError, match="shape"):
        Ensemble([MNB("u_jm")], [[1.0, 2.0]])
    with pytest.raises(ValueError, match="multilabel"):
        Ensemble([MNB("u_jm"), MNB("u_jm", multilabel="powerset")], [1.0, 1.0])
    with pytest.raises(ValueError, match="snapshot"):
        Ensemble.from_bytes(b"not a zip")
