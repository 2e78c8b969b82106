"""The cheaper learn step (issue #18, must-show 0) leaves the same bits as the steps it replaced.

* the scalar exact additions in Python floats (``ExactSum.add``, ``ExactArray.add_at``) against the compiled
  ones they stand for (``ExactSum.add_many``, ``ExactArray.add``): the same ``hi``, ``lo`` and residuals;
* TDM's length normalization of one document (the weigher's one-document path) against the general
  expression ``np.where(length > 0, c / length, 0)`` over its repeated length;
* the posting append with its room planned inside the compiled loop: every posting kept in order through
  the arena's growth and the regions' moves, and the appended terms' weights marked stale.
"""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sgm.model import TDM
from sgm.model.arrays import ExactArray, ExactSum

# values spanning ~600 binades and both signs: the pair (hi, lo) then often cannot hold a sum, so residuals spill
spread = st.builds(lambda mantissa, exponent: mantissa * 2.0 ** exponent,
                   st.floats(-1.0, 1.0, allow_nan=False, allow_infinity=False), st.integers(-300, 300))


def _bits(values) -> list[int]:
    return np.asarray(values, dtype=np.float64).view(np.int64).tolist()


@settings(max_examples=300, deadline=None)
@given(st.lists(spread, max_size=40))
def test_exact_sum_add_of_each_value_equals_add_many_bit_for_bit(values):
    one, many = ExactSum(), ExactSum()
    for x in values:
        one.add(x)
    for x in values:  # add_many one value at a time (what add did before)
        many.add_many(np.array([x]))
    assert _bits([one.hi, one.lo]) == _bits([many.hi, many.lo])
    assert _bits(one.spill) == _bits(many.spill)
    assert one.value == many.value or (one.value != one.value and many.value != many.value)


def test_the_exact_sum_cases_reach_the_residuals():
    # the property above is only a test of the residual path if values like these spill
    total = ExactSum()
    for x in (1.0, 2.0 ** -60, 2.0 ** 80, 3.0 * 2.0 ** -120, -2.0 ** 80):
        total.add(x)
    assert total.spill


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), spread), max_size=40))
def test_exact_array_add_at_equals_add_bit_for_bit(steps):
    scalar, compiled = ExactArray(4), ExactArray(4)
    for j, x in steps:
        scalar.add_at(j, x)
        compiled.add(np.array([j]), np.array([x]))
    assert _bits(scalar.hi) == _bits(compiled.hi) and _bits(scalar.lo) == _bits(compiled.lo)
    assert {j: _bits(r) for j, r in scalar.spill.items()} == {j: _bits(r) for j, r in compiled.spill.items()}


def _normalize(weigher, raw: np.ndarray) -> np.ndarray:
    return weigher(np.arange(len(raw)), raw, np.full(len(raw), len(raw), dtype=np.int64))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(spread, st.floats(0.0, 1e6), st.sampled_from([0.0, -0.0, 1.0, 3.0, 1e308])),
                min_size=1, max_size=30))
def test_one_document_normalization_equals_the_general_expression(raw):
    raw = np.array(raw)
    model = TDM("tdm_u_jm_kjm")
    with np.errstate(over="ignore"):  # sums of values near the largest float overflow (as they do on main)
        out = _normalize(model.nodes.normalizing(None), raw)
    weights, length_at = model.nodes._pending.pop()
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        length = np.add.reduceat(raw, np.cumsum([0]))
        expected = np.where(np.repeat(length, [len(raw)]) > 0, raw / np.repeat(length, [len(raw)]), 0.0)
    assert _bits(out) == _bits(expected)
    assert _bits(weights) == _bits(raw) and _bits(length_at) == _bits(np.repeat(length, [len(raw)]))


def test_a_batch_of_documents_is_still_normalized_per_document():
    model = TDM("tdm_u_jm_kjm")
    raw = np.array([1.0, 3.0, 2.0, 2.0, 4.0])
    out = model.nodes.normalizing(None)(np.arange(5), raw, np.array([2, 2, 3, 3, 3]))
    assert out.tolist() == [0.25, 0.75, 0.25, 0.25, 0.5]


def test_appending_postings_through_growth_keeps_every_posting_and_stales_the_terms():
    model = TDM("tdm_uc_jm_dp_kpd_kdp", kdelta=0.5)
    rng = np.random.default_rng(7)
    vocabulary = [f"w{i}" for i in range(300)]
    held: dict[str, list[tuple[int, float]]] = {}
    for d in range(120):
        words = rng.choice(vocabulary, size=int(rng.integers(1, 60)))
        model.learn_one(" ".join(words), "ab"[d % 2], id=f"d{d}")
        node = model.nodes.doc_nodes[f"d{d}"][1][0]
        record = model.state.docs[f"d{d}"]
        for term, weight in zip(record.terms.tolist(), record.weights.tolist()):
            held.setdefault(model.state.terms.names[term], []).append((node, weight))
        assert (model.nodes.weight_epoch[record.terms] == -1).all()  # every appended term: its weights stale
        if d % 3 == 0:
            model.predict_proba_one(" ".join(vocabulary))  # every term's weights fresh, so that staleness shows
            assert (model.nodes.weight_epoch[record.terms] == model.state.epoch).all()
    nodes = model.nodes
    assert nodes.post_used <= len(nodes.post_node) and len(nodes.post_count) >= len(nodes.post_node)
    for name, expected in held.items():
        term = model.state.terms.ids[name]
        got_nodes, got_counts = nodes.term_postings(term)
        assert got_nodes.tolist() == [n for n, _ in expected]
        # the postings hold c, the records c / |c|_1: compare the nodes' normalized counts
        lengths = nodes.node_length[got_nodes]
        assert np.allclose(got_counts / lengths, [w for _, w in expected], rtol=1e-15, atol=0)


@settings(max_examples=300, deadline=None)
@given(st.one_of(spread.map(abs), st.sampled_from([0.0, 1.0, 1e308, float("inf")])),
       st.one_of(spread.map(abs), st.sampled_from([0.0, 2.0, float("inf"), float("nan")])),
       st.sampled_from([None, 1e-300, 5.0, 1000.0, 289.279]))
def test_one_node_kernel_weight_equals_the_array_form(length, discount, kmu):
    # None: a kernel without the mass (kmu 0 in the weight)
    nodes = (TDM("tdm_uc_jm_dp_kpd") if kmu is None else TDM("tdm_uc_jm_dp_kpd_kdp", kmu=kmu)).nodes
    with np.errstate(all="ignore"):
        expected = nodes.kernel_log_a(np.array([length]), np.array([discount]))[0]
        got = nodes.kernel_log_a_one(length, discount)
    assert _bits([got]) == _bits([expected])


def test_interned_ids_are_the_fresh_range_then_the_freed_ones_in_order():
    from sgm.model.interner import Interner
    names = Interner(["a", "b", "c"])
    names.remove(1)
    names.remove(0)
    blob = np.frombuffer(b"xyzw", dtype=np.uint8)
    ids = names.add_new_encoded(blob, np.array([[0, 1], [1, 1], [2, 1], [3, 1]]))
    assert ids.dtype == np.int64 and ids.tolist() == [0, 1, 3, 4]
    assert names.add_new_encoded(blob, np.array([[0, 2]])).tolist() == [5]
