"""The sparse top-k path (many classes, Jelinek-Mercer) agrees with the dense full posterior."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sgm.model.mnb as mnb_module
from sgm.model import MNB

VOCAB = [f"w{i}" for i in range(12)]
docs = st.dictionaries(st.sampled_from(VOCAB), st.sampled_from([1.0, 2.0, 0.5, 3.0]), min_size=0, max_size=5)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["u_jm", "c_jm", "uc_jm", "uc_jm_ps", "u_jm_tXiX_ps", "uc_jm_fw_ps"]), st.floats(0.05, 0.95),
       st.floats(0.0, 2.0), st.one_of(st.none(), st.floats(1.0, 20.0)),
       st.lists(st.tuples(docs, st.integers(0, 30), st.floats(0.0, 40.0)), min_size=1, max_size=40),
       st.lists(st.integers(0, 39), max_size=6), st.lists(docs, min_size=1, max_size=4), st.integers(1, 6))
def test_sparse_topk_equals_dense(spec, beta, theta, half_life, items, forgets, queries, k):
    params = {"beta": beta}
    if spec.endswith("ps"):
        params["theta"] = theta
    if "tXiX" in spec:
        params.update(phi=0.5, ups_idf=2.0)
    if spec.startswith("uc"):
        params["ups"] = 0.3
    if "fw" in spec:
        params.update(gamma=1.5, kappa=0.5, eps=0.2)
    model = MNB(spec, half_life=half_life, **params)
    for i, (doc, label, ts) in enumerate(items):
        model.learn_one(doc, f"c{label}", ts=ts, id=f"d{i}")
        if i in forgets:
            model.forget(f"d{i // 2}")
    if not len(model):
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mnb_module, "SPARSE_TOPK_MIN_CLASSES", 1)
        assert model.uses_sparse_topk()
        sparse = model.predict_topk_many(queries, k)
        patch.setattr(mnb_module, "SPARSE_TOPK_MIN_CLASSES", 10**9)
        assert not model.uses_sparse_topk()
        classes, log_post = model.predict_log_proba_many(queries)
    for row, got in zip(log_post, sparse):
        assert len(got) == min(k, len(classes))
        for name, p in got:
            assert math.log(p) == pytest.approx(row[classes.index(name)], abs=1e-9)
        # same set of best classes (up to ties at the cut)
        kth = sorted(row, reverse=True)[len(got) - 1]
        assert all(row[classes.index(name)] >= kth - 1e-9 for name, _ in got)
        assert [p for _, p in got] == sorted((p for _, p in got), reverse=True)


def test_many_classes_use_the_sparse_path_by_default():
    model = MNB("u_jm", beta=0.5)
    model.learn_many([{"a": 1.0, f"t{i}": 1.0} for i in range(mnb_module.SPARSE_TOPK_MIN_CLASSES)],
                     [f"c{i}" for i in range(mnb_module.SPARSE_TOPK_MIN_CLASSES)])
    assert model.uses_sparse_topk()
    (best, p), *_ = model.predict_topk({"t7": 1.0}, 3)
    assert best == "c7" and 0 < p <= 1
    assert not MNB("u_dp", mu=10).uses_sparse_topk()


@pytest.mark.parametrize("k", [1, 3, 7, 10])
def test_sparse_topk_breaks_ties_by_class_id_like_the_dense_path(k):
    """Equal scores rank by class id (first learned first), among matched and unmatched classes alike."""
    model = MNB("u_jm", beta=0.5)
    for i in range(10):  # c0..c4 share "a", c5..c9 share "b": every class ties with its group
        model.learn_one({"a" if i < 5 else "b": 1.0}, f"c{i}", id=f"d{i}")
    for query in ({"a": 1.0}, {"b": 1.0}, {"zzz": 1.0}):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(mnb_module, "SPARSE_TOPK_MIN_CLASSES", 1)
            sparse = [name for name, _ in model.predict_topk_many([query], k)[0]]
            patch.setattr(mnb_module, "SPARSE_TOPK_MIN_CLASSES", 10**9)
            dense = [name for name, _ in model.predict_topk_many([query], k)[0]]
        assert sparse == dense


def test_sparse_topk_ties_hit_out_of_id_order():
    """More tied classes than k, reached in descending id order (through different terms): the k lowest ids win."""
    model = MNB("u_jm", beta=0.5)
    docs = [{"p": 1.0, "s": 1.0}, {"y": 1.0, "r": 1.0}, {"t": 1.0, "u": 1.0}, {"x": 1.0, "q": 1.0},
            {"v": 1.0, "n": 1.0}, {"w": 1.0, "o": 1.0}]
    for i, doc in enumerate(docs):
        model.learn_one(doc, f"c{i}", id=f"d{i}")
    query = {"w": 1.0, "x": 1.0, "y": 1.0}  # reaches c5, then c3, then c1: equal scores
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mnb_module, "SPARSE_TOPK_MIN_CLASSES", 1)
        sparse = [name for name, _ in model.predict_topk_many([query], 2)[0]]
    assert sparse == ["c1", "c3"]
