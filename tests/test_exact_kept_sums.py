"""Kept sums that must read as a restore (or a fresh model) reads them: the discrepancies the kept-state stress
test (tests/test_kept_state_stress.py) found at medium sizes, each shrunk to a few documents.

Under decay a label's stored counts span hundreds of binades (a document 120 half-lives older than the others
weighs 2**-120 of them in stored units); a compensated pair that took in the rounding errors of the newer counts
loses the old one once they leave again. Kept sums are exact (:class:`sgm.model.arrays.ExactArray` /
``ExactSum``: the residual a pair cannot hold is kept beside it), and every refresh takes the same ``log1p``.
"""
from __future__ import annotations

import numpy as np
import pytest

from sgm.model import MNB
from tests.test_kept_state_stress import compare


@pytest.mark.parametrize("spec", ["u_pd", "u_ad"])
def test_discount_totals_keep_an_old_remainder_when_newer_counts_leave(spec):
    """Found by the stress test (u_pd with decay, 6,000 documents): the kept split sums of the discount totals were
    compensated pairs, which took in the rounding errors of the newer documents' counts and lost the old
    document's (2**-120 of them) beside them; once the newer ones were forgotten the label read D(l) = 0 (u_pd:
    ZeroDivisionError when scoring), where a restored model (one pass over the entries) read the old count."""
    model = MNB(spec, delta=0.6, half_life=1.0)
    model.learn_one({"a": 1}, "x", ts=0.0, id="old")
    model.learn_one({"z": 1}, "y", ts=0.0, id="other")
    for i, ts in enumerate([120.1, 120.3, 120.7]):  # a rebase: "old" now weighs 2**-120 in stored units
        model.learn_one({f"b{i}": 1}, "x", ts=ts, id=f"new{i}")
    model.learn_one({"z": 1}, "y", ts=124.0, id="other2")  # time passes: the new counts fall below x*, all "low"
    model.predict_log_proba_many([{"a": 1}])  # a read: the sums kept from here on
    for i in range(3):
        model.forget(f"new{i}")
    x = model.state.classes.ids["x"]
    kept = model.labels.class_terms(model.state).denominator[x]
    restored = MNB.from_bytes(model.to_bytes())
    assert kept == restored.labels.class_terms(restored.state).denominator[x] > 0.0
    assert kept == pytest.approx(2.0**-124, rel=1e-12)  # D(1 * 2**-124) = 2**-124: below x*, the count itself
    names, live = model.predict_log_proba_many([{"a": 1}])
    np.testing.assert_array_equal(live, restored.predict_log_proba_many([{"a": 1}])[1])


def test_pruned_topk_prior_mass_keeps_old_labels_when_newer_ones_leave():
    """The pruned top-k's closed form for the labels a document does not meet (Jelinek-Mercer-only specs) reads
    ``sum_l N(l)**theta``, kept from the labels each update touched. As a compensated pair it took in the newer
    labels' rounding errors and lost the old labels' weights (2**-200 of them); once the newer ones were forgotten
    it read 0, and the posteriors left out the unmet labels' mass (log posterior 0 for the best label, -1.107 by
    the dense pass and a restored model)."""
    model = MNB("u_jm", beta=0.5, half_life=1.0)
    for i in range(130):  # enough labels for the pruned path
        model.learn_one({f"o{i}": 1, "common": 1}, f"old{i}", ts=i * 1e-3, id=f"old{i}")
    for step, ts in enumerate([70.0, 140.0, 200.0]):  # two rebases
        model.learn_one({"zz": 1}, "keep", ts=ts, id=f"keep{step}")
    for i in range(6):
        model.learn_one({f"n{i}": 1}, f"new{i}", ts=200.013 + 0.1 * i, id=f"new{i}")
    queries = [{"o3": 1}, {"o3": 1, "o5": 2}]  # each meets one or two labels: the rest by the closed form
    assert model.uses_pruned_topk(5)
    model.rank_many(queries, 5)  # the prior index kept from here on
    for doc_id in [f"new{i}" for i in range(6)] + [f"keep{i}" for i in range(3)]:
        model.forget(doc_id)
    compare(model, queries)  # the pruned ranking of the live model against the restored model's dense pass


@pytest.mark.xfail(strict=True, reason="(class, term) entries are compensated pairs (model/state.py ent_count), "
                   "not exact sums: an old count beside newer ones that leave is lost (docs/MODEL_NOTES.md)")
def test_entry_counts_keep_an_old_remainder_when_newer_counts_leave():
    """Found by the stress test's fresh-model check (u_pd kn / u_ad with decay): an entry shared by an old document
    and newer ones took in the newer counts' rounding errors and lost the old count (hi = 4.4e-16, lo = -4.4e-16)
    once they were forgotten. The snapshot keeps the pair, so a restored model reads the same 0; a model that
    learns the live documents afresh reads the old count. When every entry of a label is lost, u_pd reads
    D(l) = 0 and scoring raises ZeroDivisionError (live and restored alike)."""
    model = MNB("u_pd", delta=0.6, half_life=1.0)
    model.learn_one({"a": 1, "b": 1}, "x", ts=0.0, id="old")
    model.learn_one({"z": 1}, "y", ts=0.0, id="other")
    for i, ts in enumerate([120.1, 120.3, 120.7]):  # the same entries, 2**120 heavier (a rebase between)
        model.learn_one({"a": 1, "b": 1}, "x", ts=ts, id=f"new{i}")
    model.learn_one({"z": 1}, "y", ts=124.0, id="other2")
    for i in range(3):
        model.forget(f"new{i}")
    fresh = MNB("u_pd", delta=0.6, half_life=1.0)
    for doc, label, ts, doc_id in [({"a": 1, "b": 1}, "x", 0.0, "old"), ({"z": 1}, "y", 0.0, "other"),
                                   ({"z": 1}, "y", 124.0, "other2")]:
        fresh.learn_one(doc, label, ts=ts, id=doc_id)
    state, again = model.state, fresh.state
    x, fx = state.classes.ids["x"], again.classes.ids["x"]
    live = sorted(float(state.ent_count.get(s)) for s in range(state.ent_used) if state.ent_class[s] == x)
    expected = sorted(float(again.ent_count.get(s)) for s in range(again.ent_used) if again.ent_class[s] == fx)
    assert live == expected  # fails: [0.0, 0.0] vs [2**-124, 2**-124] (stored units)
    np.testing.assert_array_equal(model.predict_log_proba_many([{"a": 1}])[1],
                                  fresh.predict_log_proba_many([{"a": 1}])[1])


def test_posting_weights_do_not_depend_on_the_refresh_size():
    """Found by the stress test's tw lockstep (a twin restored at each check, learning the same burst): the tied
    weights' AdaGrad squares parted in the last bit. The posting refresh took the compiled scalar log1p for up to
    256 postings and numpy's above, which differ in the last bit for ~4% of values on an AVX-512 machine: a model
    that read its lists a few at a time and its restored copy that read them at once held weights 1 ulp apart (25
    of 600 here), so the restored model did not score bit for bit like the original and tw's steps parted between
    replicas that read differently. (Where numpy's log1p gives the compiled one's bits this passes either way.)"""
    model = MNB("u_jm", beta=0.3)
    for i in range(600):  # 60 terms with 10 postings each
        model.learn_one({f"t{i % 60}": 1 + i % 3, f"u{i % 7}": 1}, f"L{i % 41}", id=f"d{i}")
    terms = [f"t{j}" for j in range(60)]
    for term in terms:  # one list per read: a refresh of 10 postings each
        model.predict_log_proba_many([{term: 1}])
    restored = MNB.from_bytes(model.to_bytes())
    restored.predict_log_proba_many([{term: 1 for term in terms}])  # every list in one refresh of 600 postings
    weights = []
    for m in (model, restored):
        positions, _ = m.state.arena.ranges(np.array([m.state.terms.ids[t] for t in terms]))
        weights.append(m.labels.postings.weight[positions])
    np.testing.assert_allclose(weights[0], weights[1], rtol=1e-15)  # the same up to the last bit...
    np.testing.assert_array_equal(weights[0], weights[1])  # ... and bit for bit (25 of 600 differed before)
