"""Finding 10 of issue #15: unlearning is exactly the reverse of learning; totals equal a re-summation bit for bit.

Learning added a document's mass summed in order while unlearning subtracted
numpy's pairwise sum, so every learn + forget moved a label's mass (3.0 ->
2.9999999999999964 after one cycle, growing linearly). And a TwoSum pair
cannot hold every sum exactly once its terms span ~100 binades (old decayed
documents beside new ones). The per-class, per-term and model totals are now
exact sums (model/arrays.py: ExactArray, ExactSum): each reads as the correctly
rounded sum of its live documents' contributions. The reference here is
independent of the model's own re-summation: ``math.fsum`` over the live
documents' records.
"""
from __future__ import annotations

import math
import random

import numpy as np
import pytest

from sgm.model import MNB, TDM
from sgm.model.persistence import loads


def fsum_reference(state) -> dict[str, dict]:
    """Every exact total recomputed with math.fsum from the live documents (the from-scratch re-summation)."""
    parts: dict[str, dict] = {name: {} for name in ("cls_docs", "cls_mass", "term_df", "term_mass")}
    scalars: dict[str, list] = {"total_docs": [], "class_docs_total": [], "total_mass": []}
    for record in state.docs.values():
        contrib = record.weights * record.factor
        mass = float(np.bincount(np.zeros(len(contrib), dtype=np.intp), contrib, minlength=1)[0])  # in order
        scalars["total_docs"].append(record.factor)
        for c in record.classes:
            parts["cls_docs"].setdefault(c, []).append(record.factor)
            parts["cls_mass"].setdefault(c, []).append(mass)
            scalars["class_docs_total"].append(record.factor)
            scalars["total_mass"].append(mass)
            for t, x in zip(record.terms.tolist(), contrib.tolist()):
                if x:
                    parts["term_mass"].setdefault(t, []).append(x)
        for t in record.terms.tolist():
            parts["term_df"].setdefault(t, []).append(record.factor)
    out = {name: {k: math.fsum(v) for k, v in d.items()} for name, d in parts.items()}
    out.update({name: math.fsum(v) for name, v in scalars.items()})
    return out


def assert_totals_exact(model) -> None:
    state = model.state
    reference = fsum_reference(state)
    for name in ("cls_docs", "cls_mass", "term_df", "term_mass"):
        sums = getattr(state, name)
        live = reference[name]
        got = {k: float(sums.get(k)) for k in live}
        assert got == live, f"{name}: {sum(got[k] != live[k] for k in live)} totals differ"
        pairs = {k: float(sums.hi[k] + sums.lo[k]) for k in live}  # what the compiled readers see
        assert pairs == live, f"{name}: {sum(pairs[k] != live[k] for k in live)} pairs read apart from their sums"
        others = np.setdiff1d(np.arange(len(sums.hi)), np.fromiter(live, dtype=np.int64, count=len(live)))
        assert not np.any(sums.get(others)), f"{name}: totals left where no document is"
    for name in ("total_docs", "class_docs_total", "total_mass"):
        assert getattr(state, name).value == reference[name], name
    assert state.resum_totals() == 0  # the model's own re-summation agrees: no drift


def cycles(model, n: int, seed: int = 3, step: float = 30.0) -> None:
    """A base of documents, then ``n`` learn/forget cycles of 8-14-term documents while event time runs fast."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(300)]
    t = 1_700_000_000.0
    for i in range(150):
        t += rng.random() * 10
        doc = {rng.choice(words): rng.random() * 3 + 0.1 for _ in range(10)}
        model.learn_one(doc, rng.sample(["a", "b", "c"], rng.randint(1, 2)), ts=t, id=f"base{i}")
    for c in range(n):
        t += rng.random() * step
        doc = {rng.choice(words): rng.random() * 5 + 0.01 for _ in range(rng.randint(8, 14))}
        model.learn_one(doc, rng.sample(["a", "b", "c", "d"], rng.randint(1, 2)), ts=t, id=f"x{c % 7}")
        if c % 3 == 0:
            model.forget(f"x{(c + 3) % 7}")


def test_one_learn_and_forget_leaves_every_total_as_it_was():
    model = MNB("uc_pd_jm_dp_tXiX", half_life=3600.0)
    for i in range(3):
        model.learn_one({f"t{i}": 1.0, "shared": 2.0}, ["spam"], ts=1000.0 + i, id=f"d{i}")
    before = (model.state.cls_mass.get().copy(), model.state.term_mass.get().copy(), model.state.total_mass.value)
    model.learn_one({f"word{j}": 1.0 + j / 7 for j in range(40)}, ["spam"], ts=1003.0, id="forty")
    model.forget("forty")
    after = (model.state.cls_mass.get(), model.state.term_mass.get(), model.state.total_mass.value)
    assert np.array_equal(before[0], after[0][: len(before[0])]) and before[2] == after[2]
    assert np.array_equal(before[1], after[1][: len(before[1])])
    assert_totals_exact(model)


@pytest.mark.parametrize("spec, half_life", [("uc_pd_jm_dp", None), ("uc_pd_jm_dp_tXiX", 600.0)])
def test_learn_forget_cycles_keep_every_total_equal_to_a_resummation(spec, half_life):
    model = MNB(spec, half_life=half_life)
    cycles(model, 4000)
    assert_totals_exact(model)
    if half_life is not None:
        assert model.state.rebases > 0  # decay moved the origin: every stored value was rescaled


def test_residuals_survive_snapshots_and_the_tdm_shares_the_exact_totals():
    model = MNB("uc_pd_jm_dp", half_life=600.0)
    cycles(model, 4000, seed=11)
    assert_totals_exact(model)
    residuals = sum(len(getattr(model.state, name).spill) for name in ("cls_docs", "cls_mass", "term_df", "term_mass"))
    assert residuals > 0, "this stream makes sums no TwoSum pair can hold: the residual path must be exercised"
    restored, _ = loads(model.to_bytes())
    assert restored.checksum() == model.checksum()
    assert_totals_exact(restored)
    tdm = TDM("tdm_uc_jm_dp_kpd_kdp", half_life=600.0)
    cycles(tdm, 1000, seed=5)
    assert_totals_exact(tdm)


@pytest.mark.slow
@pytest.mark.long
def test_200k_learn_forget_cycles_keep_every_total_equal_to_a_resummation():
    model = MNB("uc_pd_jm_dp", half_life=3600.0)
    cycles(model, 200_000, step=2.0)
    assert_totals_exact(model)


def test_the_checksum_reads_exact_totals_by_value_not_by_their_split():
    """Found by test_mnb_exact's hypothesis run: one-by-one and batched learning left the same exact
    totals split differently (residuals [x, -x], or part of ``lo`` as a residual); the checksums differed."""
    items = [({}, ["a"], None, "d1")] * 6 + [
        ({}, ["b"], 286.75, "d1"), ({"alpha": 1.0}, ["a"], None, "d4"), ({"alpha": 1.0}, ["a", "b"], None, "d1"),
        ({"alpha": 1.0}, ["a"], 0.0, "d1"), ({}, ["a", "b"], None, "d1"),
        ({"alpha": 1.0, "beta": 1.0}, ["a", "b"], 0.0, "d3"), ({"alpha": 1.0}, ["a", "b"], 1.0, "d2")]
    one, batched = MNB("u_jm", half_life=1.625, beta=0.5), MNB("u_jm", half_life=1.625, beta=0.5)
    for doc, labels, ts, doc_id in items:
        one.learn_one(doc, labels, ts=ts, id=doc_id)
    at, cuts = 0, [1, 2, 2] * 5
    while at < len(items):
        chunk = items[at : at + cuts.pop(0)]
        batched.learn_many(*(list(column) for column in zip(*chunk)), sequential=True)
        at += len(chunk)
    split = lambda total: (total.hi, total.lo, list(total.spill))  # noqa: E731
    assert split(one.state.total_mass) != split(batched.state.total_mass)  # the case: same value, other split
    assert one.state.total_mass.value == batched.state.total_mass.value
    assert one.checksum() == batched.checksum()
    restored, _ = loads(one.to_bytes())
    assert restored.checksum() == one.checksum()


def test_a_pair_that_cancels_beside_a_residual_is_settled_before_scoring():
    """Found by helper-51's hypothesis run: under extreme decay a removal that left no residual left
    ``term_mass`` as ``hi = -2^-52, lo = 2^-52`` beside the residual 3e-33. The compiled readers read
    ``hi + lo = 0`` for a positive mass, and scoring raised ZeroDivisionError in the posting weights."""
    model = MNB("c_jm", beta=0.5, half_life=0.25)
    for doc, labels, ts, doc_id in [({}, ["a"], 27.0, "d1"), ({}, ["a", "b"], None, "d1"),
                                     ({"alpha": 1.0}, ["a"], 0.0, "d1"), ({"alpha": 1.0}, ["a", "b"], None, "d2"),
                                     ({"alpha": 1.0}, ["b"], 14.0, "d3"), ({}, ["a"], None, "d2"),
                                     ({}, ["a"], None, "d3")]:
        model.learn_one(doc, labels, ts=ts, id=doc_id)
    assert_totals_exact(model)
    assert float(model.state.term_mass.get(model.state.terms.get("alpha"))) == 2.0 ** -108
    labels, log_probs = model.predict_log_proba_many([{"alpha": 1.0}])
    assert labels == ["a"] and log_probs.tolist() == [[0.0]]
