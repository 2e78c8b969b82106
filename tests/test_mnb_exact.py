"""Property tests: every MNB posterior equals the dense brute-force reference.

Random small models, random affix strings and parameters, decay, sequences of
learn / re-learn / unlearn / forget, multi-label data; posteriors are checked
after lazy invalidation (scores read between updates) and to 1e-9 in log space.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sgm.model import MNB
from tests.reference import DenseReference, as_array, class_weight_params
from tests.reference_documents import apply_removal

VOCAB = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"]
LABELS = ["a", "b", "c"]
SMOOTHINGS = ["jm", "dp", "jm_dp", "ad", "pd", "pd_dp", "pd_jm", "pd_jm_dp", "ad_dp", "ad_jm"]
WEIGHTINGS = [None, "ti", "tXi", "tiX", "tXiX", "qidf", "qidfX"]
TOLERANCE = 1e-9


@st.composite
def configs(draw):
    background = draw(st.sampled_from(["u", "c", "uc"]))
    smooth = draw(st.sampled_from(SMOOTHINGS))
    weighting = draw(st.sampled_from(WEIGHTINGS))
    ps = draw(st.booleans())
    fw = draw(st.booleans())
    spec = "_".join(p for p in [background, smooth, weighting, "fw" if fw else None, "ps" if ps else None] if p)
    params = {}
    if "jm" in smooth:
        params["beta"] = draw(st.floats(0.05, 0.95))
    if "dp" in smooth:
        params["mu"] = draw(st.floats(0.1, 50.0))
    if "ad" in smooth or "pd" in smooth:
        params["delta"] = draw(st.one_of(st.floats(0.05, 1.0), st.just("kn")))
    if background == "uc":
        params["ups"] = draw(st.floats(0.0, 1.0))
    if weighting in ("tXi", "tXiX"):
        params["phi"] = draw(st.floats(-1.0, 2.0))
    if weighting in ("tiX", "tXiX", "qidfX"):
        params["ups_idf"] = draw(st.floats(-1.0, 10.0))
    if ps:
        params["theta"] = draw(st.floats(0.0, 2.0))
    if fw:
        params.update(class_weight_params(draw))
    half_life = draw(st.one_of(st.none(), st.floats(2.0, 50.0)))
    multilabel = draw(st.sampled_from(["per_label", "powerset"]))
    return spec, params, half_life, multilabel


# binary fractions keep raw-count sums exact (the Kneser-Ney estimate compares them to 1 and 2);
# small ones exercise min(C, D): delta * C**delta > C for fractional counts
counts = st.sampled_from([1.0, 2.0, 3.0, 0.5, 1.5, 4.0, 0.25, 0.125, 1.0 / 64])
documents = st.dictionaries(st.sampled_from(VOCAB), counts, min_size=0, max_size=5)
label_sets = st.lists(st.sampled_from(LABELS), min_size=1, max_size=2, unique=True)
ops = st.one_of(
    st.tuples(st.just("learn"), documents, label_sets, st.one_of(st.none(), st.floats(0.0, 60.0)),
              st.sampled_from(["d1", "d2", "d3", "d4", "d5", "d6", None])),
    st.tuples(st.just("forget"), st.sampled_from(["d1", "d2", "d3", "x"])),
    st.tuples(st.just("unlearn"), st.sampled_from(["d1", "d2", "d3"]), label_sets),
    st.tuples(st.just("score"), documents),
)


def check(model: MNB, reference: DenseReference, queries, slack=None) -> None:
    """Log posteriors of ``queries`` against the reference's, to TOLERANCE (plus ``slack(query)``, when given)."""
    if not model.state.docs:
        assert not reference.docs
        return
    classes, log_post = model.predict_log_proba_many(queries)
    for query, row in zip(queries, log_post):
        expected = as_array(reference.log_posterior(query), classes, reference.multilabel)
        np.testing.assert_allclose(row, expected, rtol=0, atol=TOLERANCE + (0.0 if slack is None else slack(query)))


def replay(config, op_list, final_queries):
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
        elif kind in ("forget", "unlearn"):
            apply_removal(model, reference, op)
        else:  # score now: fills the posting cache, which later updates make stale
            check(model, reference, [op[1]])
    check(model, reference, final_queries)
    return model, reference


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs(), st.lists(ops, min_size=1, max_size=25), st.lists(documents, min_size=1, max_size=4))
def test_posteriors_equal_dense_reference(config, op_list, queries):
    replay(config, op_list, queries)


@settings(max_examples=60, deadline=None)
@given(configs(), st.lists(st.tuples(documents, label_sets, st.floats(0.0, 60.0)), min_size=1, max_size=12),
       st.lists(documents, min_size=1, max_size=3))
def test_unlearning_everything_then_relearning_is_exact(config, items, queries):
    """Learning, unlearning all and learning again leaves no residue."""
    spec, params, half_life, multilabel = config
    model = MNB(spec, half_life=half_life, multilabel=multilabel, **params)
    for i, (doc, labels, ts) in enumerate(items):
        model.learn_one(doc, labels, ts=ts, id=f"x{i}")
    for i in range(len(items)):
        model.forget(f"x{i}")
    assert len(model) == 0 and model.state.n_entries == 0 and model.classes_ == []
    assert model.state.total_mass.value == 0.0 and model.state.n_vocab == 0
    ops_again = [("learn", doc, labels, ts, f"y{i}") for i, (doc, labels, ts) in enumerate(items)]
    # fresh model and reference must agree with the reused one: time only moves forward
    _, reference = replay(config, ops_again, queries)
    for i, (doc, labels, ts) in enumerate(items):
        model.learn_one(doc, labels, ts=ts, id=f"y{i}")
    check(model, reference, queries)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs(), st.lists(ops, min_size=1, max_size=15), st.lists(ops, min_size=0, max_size=10),
       st.lists(documents, min_size=1, max_size=3))
def test_snapshot_restore_scores_identically_and_keeps_learning(config, before, after, queries):
    """A restored model scores bit for bit like the original, and both continue identically."""
    model, reference = replay(config, before, queries)
    restored = MNB.from_bytes(model.to_bytes())
    assert restored.checksum() == model.checksum()
    if model.state.docs:
        names_a, a = model.predict_log_proba_many(queries)
        names_b, b = restored.predict_log_proba_many(queries)
        assert names_a == names_b
        np.testing.assert_array_equal(a, b)
    for op in after:  # the same operations on both
        for m in (model, restored):
            if op[0] == "learn":
                m.learn_one(op[1], op[2], ts=op[3], id=op[4])
            elif op[0] == "forget":
                m.forget(op[1])
        if op[0] == "learn":
            reference.learn(op[1], op[2], op[3], op[4] if op[4] is not None else model.anonymous_id(op[1]))
        elif op[0] == "forget":
            reference.forget(op[1])
    assert restored.checksum() == model.checksum()
    check(restored, reference, queries)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs(), st.lists(st.tuples(documents, label_sets, st.one_of(st.none(), st.floats(0.0, 400.0)),
                                     st.sampled_from(["d1", "d2", "d3", "d4", "d5", "d6", "d7", None])),
                           min_size=1, max_size=20),
       st.lists(st.integers(1, 6), min_size=1, max_size=8))
def test_sequential_batches_equal_one_by_one(config, items, cuts):
    """learn_many(sequential=True) is bitwise learn_one in order, whatever the batch cuts."""
    spec, params, half_life, multilabel = config
    one = MNB(spec, half_life=None if half_life is None else half_life / 8, multilabel=multilabel, **params)
    batched = MNB(spec, half_life=None if half_life is None else half_life / 8, multilabel=multilabel, **params)
    for doc, labels, ts, doc_id in items:
        one.learn_one(doc, labels, ts=ts, id=doc_id)
    at, cut_index = 0, 0
    while at < len(items):
        size = cuts[cut_index % len(cuts)]
        chunk = items[at : at + size]
        batched.learn_many([c[0] for c in chunk], [c[1] for c in chunk], [c[2] for c in chunk], [c[3] for c in chunk],
                           sequential=True)
        at, cut_index = at + size, cut_index + 1
    assert batched.checksum() == one.checksum()


def test_corrupt_or_foreign_snapshots_are_rejected():
    from sgm.model.persistence import SnapshotError

    model = MNB("u_jm", beta=0.5)
    model.learn_one("a b c", "x", id="1")
    data = bytearray(model.to_bytes())
    for bad in (b"", b"not a zip", bytes(data[: len(data) // 2])):
        with pytest.raises(SnapshotError):
            MNB.from_bytes(bad)
    flipped = bytearray(data)
    flipped[len(flipped) // 2] ^= 0xFF  # inside an array payload (stored, not compressed)
    with pytest.raises(SnapshotError):
        MNB.from_bytes(bytes(flipped))
    with pytest.raises(SnapshotError, match="limit"):
        MNB.from_bytes(bytes(data), max_bytes=100)


def test_rebase_keeps_posteriors():
    """Event times spanning hundreds of half-lives force origin shifts; results stay exact."""
    model = MNB("uc_pd_jm_dp", beta=0.3, mu=5.0, delta=0.6, ups=0.3, half_life=1.0)
    reference = DenseReference(model.spec, dict(model.params), 1.0)
    for step in range(40):
        ts = step * 10.0
        doc = {VOCAB[step % 8]: 1.0 + step % 3, VOCAB[(step * 3) % 8]: 2.0}
        model.learn_one(doc, LABELS[step % 3], ts=ts, id=f"d{step}")
        reference.learn(doc, LABELS[step % 3], ts, f"d{step}")
    assert model.state.clock.origin > 0  # rebased at least once
    check(model, reference, [{"alpha": 1.0, "gamma": 2.0}, {"eta": 3.0}])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.lists(st.sampled_from(list("abcdefghij")), min_size=1, max_size=6),
                          st.sampled_from(["x", "y", "z"]), st.sampled_from(["d1", "d2", "d3", "d4", "d5", "d6"])),
                min_size=1, max_size=25),
       st.sampled_from([None, 2, 4]))
def test_batch_interning_survives_removals_mid_batch(items, max_documents):
    """learn_many interns a batch's terms once; re-learned ids and the memory bound remove terms
    (freeing ids for reuse) in the middle of it. The result must be the live documents, exactly."""
    model = MNB("uc_pd_jm_dp", beta=0.3, mu=5.0, delta=0.5, max_documents=max_documents)
    model.learn_many([" ".join(words) for words, _, _ in items], [label for _, label, _ in items],
                     ids=[doc_id for _, _, doc_id in items])
    state = model.state
    for name, t in state.terms.ids.items():  # every interned term is held by a live document
        assert state.term_refs[t] > 0 and state.terms.names[t] == name
    live: dict = {}  # the spam filters' learn cache: same id and labels = no-op, other labels = replace
    for words, label, doc_id in items:
        if doc_id in live and live[doc_id][1] == label:
            continue
        live.pop(doc_id, None)
        live[doc_id] = (" ".join(words), label)
        if max_documents and len(live) > max_documents:  # the bound drops the oldest
            live.pop(next(iter(live)))
    assert set(state.docs) == set(live)
    fresh = MNB("uc_pd_jm_dp", beta=0.3, mu=5.0, delta=0.5)
    for doc_id, (text, label) in live.items():
        fresh.learn_one(text, label, id=doc_id)
    queries = ["a b c", "d e f g", "h i j a"]
    names_a, a = model.predict_log_proba_many(queries)
    names_b, b = fresh.predict_log_proba_many(queries)
    order = [names_b.index(n) for n in names_a]
    np.testing.assert_allclose(a, b[:, order], rtol=0, atol=1e-9)
