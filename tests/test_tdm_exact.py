"""Property tests: every TDM posterior equals the dense brute-force reference.

Random small models (background, label smoothing, kernel smoothing, TF-IDF,
prior scaling, decay, multi-label modes, the memory bound), random sequences
of learn / re-learn / unlearn / forget / score / restore; posteriors equal
``tests/reference_tdm.py`` to 1e-9 in log space in exact mode and within the
stated bound in binned mode.
"""
from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sgm.model import TDM, LearnGuardError, build_model, model_config
from sgm.model.state import CountState
from tests.reference import class_weight_params
from tests.reference_documents import apply_removal
from tests.reference_tdm import DenseTDMReference, class_name

VOCAB = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"]
LABELS = ["a", "b", "c"]
LABEL_SMOOTHINGS = ["jm", "dp", "jm_dp", "pd", "pd_dp", "pd_jm", "pd_jm_dp", "ad", "ad_dp"]
KERNELS = ["kjm", "kdp", "kpd", "kjm_kdp", "kpd_kdp", "kjm_kpd", "kjm_kpd_kdp"]
WEIGHTINGS = [None, None, "ti", "tXiX", "qidf", "tiX"]
TOLERANCE = 1e-9
#: What node pruning may add (model.loops.mixture): at most 2**-52 of the best label's joint score per label,
#: so at most 2**-51 on every posterior; doubled for the round-off of the sums themselves.
PRUNING_TOLERANCE = 2.0**-50


@st.composite
def configs(draw, memory_bound: bool = True):
    background = draw(st.sampled_from(["u", "c", "uc"]))
    smooth = draw(st.sampled_from(LABEL_SMOOTHINGS))
    kernel = draw(st.sampled_from(KERNELS))
    weighting = draw(st.sampled_from(WEIGHTINGS))
    ps = draw(st.booleans())
    fw = draw(st.booleans())
    spec = "_".join(p for p in ["tdm", background, smooth, kernel, weighting, "fw" if fw else None,
                                "ps" if ps else None] if p)
    params = {}
    if "jm" in smooth.split("_"):
        params["beta"] = draw(st.floats(0.05, 0.95))
    if "dp" in smooth.split("_"):
        params["mu"] = draw(st.floats(0.1, 50.0))
    if "ad" in smooth or "pd" in smooth:
        params["delta"] = draw(st.one_of(st.floats(0.05, 1.0), st.just("kn")))
    if background == "uc":
        params["ups"] = draw(st.floats(0.0, 1.0))
    if "kjm" in kernel:
        params["kbeta"] = draw(st.floats(0.05, 0.95))
    if "kdp" in kernel:
        params["kmu"] = draw(st.floats(0.05, 30.0))
    if "kpd" in kernel:
        params["kdelta"] = draw(st.one_of(st.floats(0.05, 1.0), st.just("kn")))
    if weighting in ("tXi", "tXiX"):
        params["phi"] = draw(st.floats(-1.0, 2.0))
    if weighting in ("tiX", "tXiX", "qidfX"):
        params["ups_idf"] = draw(st.floats(-1.0, 10.0))
    if ps:
        params["theta"] = draw(st.floats(0.0, 2.0))
    if fw:
        params.update(class_weight_params(draw))
    options = {
        # above 3 so that the default expiry (20 half-lives) never falls inside the event-time range [0, 60]:
        # a document exactly on a threshold could be kept by one rounding and dropped by the other
        "half_life": draw(st.one_of(st.none(), st.floats(3.01, 50.0))),
        "multilabel": draw(st.sampled_from(["per_label", "powerset"])),
    }
    if memory_bound:
        # thresholds away from any power of two a grid of event times could hit exactly
        options["prune_below"] = draw(st.sampled_from([None, 1e-300, 0.0137, 0.31]))
        options["max_documents"] = draw(st.sampled_from([None, None, 3, 5]))
    return spec, params, options


# binary fractions keep raw-count sums exact (the Kneser-Ney estimate compares them to 1 and 2);
# small ones exercise min(C, D) for fractional counts
counts = st.sampled_from([1.0, 2.0, 3.0, 0.5, 1.5, 4.0, 0.25, 0.125, 1.0 / 64, 7.0])
documents = st.dictionaries(st.sampled_from(VOCAB), counts, min_size=0, max_size=6)
label_sets = st.lists(st.sampled_from(LABELS), min_size=1, max_size=2, unique=True)
DOC_IDS = ["d1", "d2", "d3", "d4", "d5", "d6", "d7", None]
ops = st.one_of(
    st.tuples(st.just("learn"), documents, label_sets, st.one_of(st.none(), st.floats(0.0, 60.0)),
              st.sampled_from(DOC_IDS)),
    st.tuples(st.just("batch"), st.lists(st.tuples(documents, label_sets, st.floats(0.0, 60.0),
                                                   st.sampled_from(DOC_IDS)), min_size=1, max_size=4)),
    st.tuples(st.just("forget"), st.sampled_from(["d1", "d2", "d3", "x"])),
    st.tuples(st.just("unlearn"), st.sampled_from(["d1", "d2", "d3"]), label_sets),
    st.tuples(st.just("score"), documents),
    st.tuples(st.just("restore")),
)


def make_model(config, **extra) -> TDM:
    spec, params, options = config
    return TDM(spec, **options, **params, **extra)


def doc_key(model: TDM, doc: dict, doc_id) -> str:
    return doc_id if doc_id is not None else model.anonymous_id(doc)


def restored_copy(model: TDM) -> TDM:
    """A snapshot round trip (model.snapshot): CountState + config + TDM's extra state."""
    clone = TDM.from_bytes(model.to_bytes())
    assert isinstance(clone, TDM) and clone.kernel_sum == model.kernel_sum
    assert clone.checksum() == model.checksum()
    return clone


def check(model: TDM, reference: DenseTDMReference, queries, bin_width: float | None = None) -> None:
    assert len(model) == len(reference.docs)
    if not model.state.docs:
        return
    classes, log_post = model.predict_log_proba_many(queries)
    assert sorted(map(str, classes)) == sorted(str(class_name(c, reference.multilabel))
                                               for c in {c for d in reference.docs.values() for c in d.classes})
    for query, row in zip(queries, log_post):
        expected_by_class = {class_name(k, reference.multilabel): v for k, v in reference.log_posterior(query).items()}
        expected = np.array([expected_by_class[c] for c in classes])
        tolerance = TOLERANCE
        if bin_width is not None:
            tolerance += reference.query_length(query) * bin_width  # the stated bound of kernel_sum="binned"
        within(row, expected, tolerance, model.node_pruning)


def within(log_post: np.ndarray, expected: np.ndarray, tolerance: float, pruned: bool) -> None:
    """Log posteriors within ``tolerance``; with node pruning, a label may instead be within the pruning
    bound on its posterior (what pruning leaves out is relative to the best label's joint score)."""
    close = np.abs(log_post - expected) <= tolerance
    if pruned:
        close |= np.abs(np.exp(log_post) - np.exp(expected)) <= PRUNING_TOLERANCE + np.expm1(tolerance) * np.exp(expected)
    assert close.all(), (log_post, expected)


def apply_op(model: TDM, op) -> TDM:
    """``op`` applied to ``model`` alone (no reference; a refused unlearn is skipped), for tests that run two
    models in lockstep; returns the model to keep (a restore gives a new one). Score ops are left to the caller."""
    kind = op[0]
    if kind == "learn":
        _, doc, labels, ts, doc_id = op
        model.learn_one(doc, labels, ts=ts, id=doc_id)
    elif kind == "batch":
        items = op[1]
        model.learn_many([d for d, _, _, _ in items], [lab for _, lab, _, _ in items],
                         ts=[t for _, _, t, _ in items], ids=[d for _, _, _, d in items])
    elif kind == "forget":
        model.forget(op[1])
    elif kind == "unlearn":
        try:
            model.unlearn_one(None, op[2], id=op[1])
        except LearnGuardError:
            pass
    elif kind == "restore":
        return restored_copy(model)
    return model


def replay(config, op_list, final_queries, **extra):
    model = make_model(config, **extra)
    reference = DenseTDMReference.for_model(model)
    bin_width = model.kernel_bin_width if model.kernel_sum == "binned" else None
    for op in op_list:
        kind = op[0]
        if kind == "learn":
            _, doc, labels, ts, doc_id = op
            model.learn_one(doc, labels, ts=ts, id=doc_id)
            reference.learn(doc, labels, ts, doc_key(model, doc, doc_id))
        elif kind == "batch":
            items = op[1]
            model.learn_many([d for d, _, _, _ in items], [lab for _, lab, _, _ in items], ts=[t for _, _, t, _ in items],
                             ids=[i for _, _, _, i in items])
            reference.learn_batch([(d, lab, t, doc_key(model, d, i)) for d, lab, t, i in items])
        elif kind in ("forget", "unlearn"):
            apply_removal(model, reference, op)
        elif kind == "restore":
            model = restored_copy(model)
        else:  # score now: fills the posting caches, which later updates make stale
            check(model, reference, [op[1]], bin_width)
    assert model.stats()["pruned_documents"] == reference.pruned
    check(model, reference, final_queries, bin_width)
    return model, reference


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs(), st.lists(ops, min_size=1, max_size=25), st.lists(documents, min_size=1, max_size=4), st.booleans())
def test_posteriors_equal_dense_reference(config, op_list, queries, node_pruning):
    """Unpruned: every log posterior to 1e-9; pruned (the default): the same, or the posterior within 2**-50."""
    replay(config, op_list, queries, node_pruning=node_pruning)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs(), st.lists(ops, min_size=1, max_size=20), st.lists(documents, min_size=1, max_size=4),
       st.sampled_from([0.01, 0.1, 0.5]))
def test_binned_kernel_sums_stay_within_the_stated_bound(config, op_list, queries, bin_width):
    replay(config, op_list, queries, kernel_sum="binned", kernel_bin_width=bin_width)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs(memory_bound=False), st.lists(st.tuples(documents, label_sets, st.floats(0.0, 60.0)), min_size=1,
                                             max_size=10), st.lists(documents, min_size=1, max_size=3))
def test_batch_learning_equals_reference_batch(config, items, queries):
    """A batch learned at once: the reference learns the same documents and sees the batch IDF."""
    model = make_model(config)
    model.learn_many([d for d, _, _ in items], [lab for _, lab, _ in items], ts=[t for _, _, t in items],
                     ids=[f"b{i}" for i in range(len(items))])
    reference = DenseTDMReference.for_model(model)
    reference.learn_batch([(doc, labels, ts, f"b{i}") for i, (doc, labels, ts) in enumerate(items)])
    check(model, reference, queries)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs(memory_bound=False), st.lists(st.tuples(documents, label_sets, st.floats(0.0, 60.0)), min_size=1,
                                             max_size=10), st.lists(documents, min_size=1, max_size=3))
def test_unlearning_everything_leaves_no_nodes(config, items, queries):
    model = make_model(config)
    for i, (doc, labels, ts) in enumerate(items):
        model.learn_one(doc, labels, ts=ts, id=f"x{i}")
    for i in range(len(items)):
        model.forget(f"x{i}")
    nodes = model.nodes
    assert len(model) == 0 and model.classes_ == [] and model.state.n_entries == 0
    assert nodes.live_nodes == 0 and nodes.live_postings == 0 and not nodes.doc_nodes
    assert not any(nodes.class_nodes) and int(nodes.post_fill.sum()) == 0
    _, reference = replay(config, [("learn", d, lab, ts, f"y{i}") for i, (d, lab, ts) in enumerate(items)], queries)
    for i, (doc, labels, ts) in enumerate(items):
        model.learn_one(doc, labels, ts=ts, id=f"y{i}")
    check(model, reference, queries)


def test_expiry_bounds_memory_on_an_endless_stream():
    """With decay, documents older than ~20 half-lives expire: nodes and postings stay bounded."""
    rng = np.random.default_rng(5)
    model = TDM("tdm_uc_jm_dp_kpd_kdp", half_life=9.71)  # thresholds fall between the integer event times
    reference = DenseTDMReference.for_model(model)
    assert model.state.prune_below == 2.0**-20
    model.nodes.compact_after = 64  # exercise the renumbering early
    sizes = []
    for step in range(600):
        doc = {VOCAB[int(k)]: float(1 + k % 3) for k in rng.integers(0, len(VOCAB), 4)}
        model.learn_one(doc, LABELS[step % 3], ts=float(step), id=f"s{step}")
        reference.learn(doc, LABELS[step % 3], float(step), f"s{step}")
        sizes.append(model.stats()["document_nodes"])
    assert max(sizes[300:]) <= 20 * 9.71 + 1  # one document per time unit, 20 half-lives
    assert model.stats()["pruned_documents"] == reference.pruned > 300
    assert model.nodes.compactions >= 1  # node ids were renumbered at least once
    assert model.nodes.n_nodes <= 2 * model.nodes.live_nodes + 64
    check(model, reference, [{"alpha": 2.0, "gamma": 1.0}, {"eta": 1.0}])


def test_rebase_keeps_posteriors():
    """Event times spanning hundreds of half-lives force decay-origin shifts; results stay exact."""
    model = TDM("tdm_uc_pd_jm_dp_kjm_kdp", beta=0.3, mu=5.0, delta=0.6, ups=0.3, kbeta=0.4, kmu=3.0,
                half_life=1.0, prune_below=1e-300)
    reference = DenseTDMReference.for_model(model)
    for step in range(40):
        ts = step * 10.0
        doc = {VOCAB[step % 8]: 1.0 + step % 3, VOCAB[(step * 3) % 8]: 2.0}
        model.learn_one(doc, LABELS[step % 3], ts=ts, id=f"d{step}")
        reference.learn(doc, LABELS[step % 3], ts, f"d{step}")
        if step % 7 == 0:
            check(model, reference, [{"alpha": 1.0}])
    assert model.state.clock.origin > 0  # rebased at least once
    check(model, reference, [{"alpha": 1.0, "gamma": 2.0}, {"eta": 3.0}])


def test_copy_by_config_and_replay_scores_identically():
    """Without a snapshot: the config plus a replay of the learned documents rebuilds the same model."""
    model = TDM("tdm_uc_jm_dp_kpd_kdp", beta=0.4, mu=8.0, ups=0.3, kdelta=0.7, kmu=12.0, half_life=30.0)
    history = []
    rng = np.random.default_rng(11)
    for step in range(60):
        doc = {VOCAB[int(k)]: float(1 + k % 4) for k in rng.integers(0, len(VOCAB), 5)}
        history.append((doc, LABELS[int(rng.integers(0, 3))], float(step), f"h{step}"))
        model.learn_one(*history[-1][:2], ts=history[-1][2], id=history[-1][3])
    for step in range(0, 60, 7):
        model.forget(f"h{step}")
    copy_ = build_model(model_config(model))
    for doc, label, ts, doc_id in history:
        copy_.learn_one(doc, label, ts=ts, id=doc_id)
    for step in range(0, 60, 7):
        copy_.forget(f"h{step}")
    queries = [{"alpha": 1.0, "beta": 2.0}, {"zeta": 3.0, "eta": 1.0, "theta": 1.0}]
    np.testing.assert_allclose(model.predict_log_proba_many(queries)[1], copy_.predict_log_proba_many(queries)[1],
                               rtol=0, atol=1e-12)


def test_exact_kernel_sums_group_equal_smoothing_weights():
    """kjm alone: one no-match group per label; kdp on raw counts: one group per document length."""
    model = TDM("tdm_u_jm_kjm", beta=0.5, kbeta=0.3)
    model.learn_many(["a b c", "a a b", "c d", "d e f g"], ["x", "x", "y", "y"])
    model.predict_one("a")
    assert model.stats()["kernel_groups"] == 2
    model = TDM("tdm_u_jm_kdp", beta=0.5, kmu=5.0)
    model.learn_many(["a b c", "a a b", "c d", "d e f g", "d d"], ["x", "x", "y", "y", "y"])
    model.predict_one("a")
    assert model.stats()["kernel_groups"] == 1 + 2  # x: length 3; y: lengths 2 and 4


def plain_state_copy(model: TDM) -> CountState:
    """The model's CountState as a plain CountState, as a restore that knows nothing of TDM gives it."""
    state = copy.deepcopy(model.state)
    state.observer = None  # no document nodes follow it
    return state


def test_extra_state_is_needed_only_for_tfidf():
    queries = ["a c", "e b b"]
    for spec, needs_lengths in (("tdm_u_jm_kdp_ti", True), ("tdm_u_jm_kdp", False)):
        model = TDM(spec, beta=0.5, kmu=5.0)
        model.learn_many(["a b c", "a a b", "c d e"], ["x", "x", "y"], ids=["1", "2", "3"])
        clone = build_model(model_config(model))
        clone.state = plain_state_copy(model)
        clone.rebuild_caches()
        if needs_lengths:
            with pytest.raises(ValueError, match="extra_state"):
                clone.predict_one("a")
            extra = model.extra_state()
            clone.restore_extra_state(extra._replace(meta=json.loads(json.dumps(extra.meta))))
        np.testing.assert_allclose(clone.predict_log_proba_many(queries)[1], model.predict_log_proba_many(queries)[1],
                                   rtol=0, atol=1e-12)


def test_snapshot_keeps_options_and_keeps_learning():
    model = TDM("tdm_uc_pd_dp_kpd_kdp_tXiX", mu=3.0, delta="kn", ups=0.1, kdelta="kn", kmu=4.0, phi=0.3,
                ups_idf=1.0, kernel_sum="binned", kernel_bin_width=0.02, half_life=100.0)
    model.learn_many(["a b c", "a a b d", "c d e", "e e f a"], ["x", "x", "y", ("y", "x")], ts=[1, 2, 3, 4],
                     ids=["1", "2", "3", "4"])
    clone = restored_copy(model)
    assert clone.kernel_bin_width == 0.02 and clone.state.prune_below == model.state.prune_below
    for m in (model, clone):
        m.learn_one("a f f", "y", ts=5.0, id="5")
        m.forget("2")
    queries = ["a c", "f e b"]
    np.testing.assert_array_equal(clone.predict_log_proba_many(queries)[1], model.predict_log_proba_many(queries)[1])


def test_options_are_checked():
    with pytest.raises(ValueError):
        TDM("tdm_u_jm_kjm", kernel_sum="approximate")
    with pytest.raises(ValueError):
        TDM("u_jm")  # an MNB spec
    assert math.isclose(TDM("tdm_u_jm_kjm", half_life=5.0).state.prune_below, 2.0**-20)
    assert TDM("tdm_u_jm_kjm").state.prune_below is None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs(), st.lists(st.tuples(documents, label_sets, st.floats(0.0, 60.0), st.sampled_from(DOC_IDS[:-1])),
                           min_size=1, max_size=12), st.lists(st.integers(1, 12), max_size=4))
def test_sequential_batches_equal_one_by_one(config, items, cuts):
    """learn_many(sequential=True), cut anywhere, is bitwise the model learned one document at a time."""
    one, batched = make_model(config), make_model(config)
    for doc, labels, ts, doc_id in items:
        one.learn_one(doc, labels, ts=ts, id=doc_id)
    bounds = sorted({0, len(items), *[c for c in cuts if c < len(items)]})
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        part = items[lo:hi]
        batched.learn_many([p[0] for p in part], [p[1] for p in part], ts=[p[2] for p in part],
                           ids=[p[3] for p in part], sequential=True)
    assert batched.checksum() == one.checksum()
    queries = [{"alpha": 1.0, "beta": 2.0}, {"eta": 1.0}]
    if len(one):
        np.testing.assert_array_equal(batched.predict_log_proba_many(queries)[1], one.predict_log_proba_many(queries)[1])
