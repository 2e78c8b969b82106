"""Tied term weights (the ``tw`` affix, model/tied_weights.py) where they meet the rest of the model.

The step and the scores against a dense reference are tests/test_tied_weights_exact.py's; here: the
gradient against finite differences of the log likelihood, the pruned top-k, an ensemble base, the
memory bound's count, snapshots that do not fit, and the spec.
"""
from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sgm.model.mnb as mnb_module
import sgm.model.pruned_topk as pruned_module
from sgm.model import MNB, Ensemble, build_model
from sgm.model.batch import PreparedBatch
from sgm.model.persistence import SnapshotError
from sgm.model.spec import SpecError, parse_spec

WORDS = [f"w{i}" for i in range(25)]


def random_model(spec: str, seed: int, n_docs: int = 60, n_labels: int = 4, **params) -> MNB:
    rng = np.random.default_rng(seed)
    model = MNB(spec, **params)
    for i in range(n_docs):
        doc = " ".join(rng.choice(WORDS, size=int(rng.integers(1, 9))))
        model.learn_one(doc, f"l{int(rng.integers(n_labels))}", id=f"d{i}")
    return model


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), spec=st.sampled_from([
    ("uc_pd_jm_dp_fw_tw_ps", {"beta": 0.3, "mu": 2.0, "delta": 0.5, "theta": 0.8, "gamma": 1.5}),
    ("u_jm_tXiX_tw", {"beta": 0.4, "phi": 0.5, "ups_idf": 0.3}),
    ("c_ad_dp_tw", {"delta": 0.7, "mu": 3.0})]))
def test_the_step_direction_is_the_gradient_of_the_log_likelihood(seed, spec):
    """``G`` of model/tied_weights.py against central differences of ``log p(y | d)`` in the factors."""
    name, params = spec
    model = random_model(name, seed, **params)
    rng = np.random.default_rng(seed + 1)
    doc = " ".join(rng.choice(WORDS, size=6))
    batch = model._query_weighted(model._prepare_weights([doc]), tied=False)
    active, _ = model.class_names()
    target = int(active[rng.integers(len(active))])
    model.tied.s[batch.terms] = rng.uniform(0.2, 2.0, len(batch.terms))
    gradient = model.tied.gradient(model.labels, model.state, batch, active, [target])
    column = int(np.searchsorted(active, target))

    def log_likelihood(factors):
        scaled = PreparedBatch(batch.terms, batch.weights * factors, batch.owner, 1)
        return model.labels.log_posteriors(model.state, scaled, active)[0][column]

    start, h = model.tied.s[batch.terms].copy(), 1e-6
    numeric = [(log_likelihood(start + h * e) - log_likelihood(start - h * e)) / (2 * h) for e in np.eye(len(start))]
    np.testing.assert_allclose(gradient, numeric, atol=1e-7)


def test_pruned_top_k_scores_with_the_factors():
    """With many labels, top-k takes the pruned path: it must rank by the factor-weighted score, as the dense pass."""
    n = max(mnb_module.PRUNED_TOPK_MIN_CLASSES, 256)
    model = MNB("u_jm_tw", beta=0.5, tw_eta=2.0)
    docs = [{"common": 1.0, f"own{i}": 1.0 + i % 3, f"pair{i // 2}": 1.0} for i in range(n)]
    model.learn_many(docs + docs, [f"c{i}" for i in range(n)] * 2, ids=range(2 * n))
    assert model.tied_steps > 0 and model.uses_pruned_topk(5)
    weights = model.tied_term_weights(["common", "own7", "pair3"])
    assert weights["common"] != 1.0  # the factors moved: a ranking without them would differ
    query = {f"own{i}": 3.0 for i in (7, 11, 100, 101, 200)} | {"common": 1.0, "pair3": 1.0}
    got = model.predict_topk(query, 5)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mnb_module, "PRUNED_TOPK_MIN_CLASSES", 10**9)
        want = model.predict_topk(query, 5)
    assert model._pruner.counts["documents"] == 1
    assert [c for c, _ in got] == [c for c, _ in want]
    np.testing.assert_allclose([p for _, p in got], [p for _, p in want], rtol=pruned_module.RELATIVE_BOUND + 1e-12)


def test_an_ensemble_base_with_tied_weights_learns_and_restores():
    bases = [{"model": "uc_pd_jm_dp_fw_tw_ps", "params": {"tw_eta": 1.0}}, {"model": "u_jm_ps"}]
    pool = Ensemble([build_model(b) for b in bases], [0.5, 0.5])
    rng = np.random.default_rng(3)
    for i in range(40):
        pool.learn_one(" ".join(rng.choice(WORDS, size=5)), f"l{i % 3}", id=f"d{i}")
    assert pool.bases[0].tied_steps == 37  # the first three documents each brought a label not yet active
    clone = Ensemble.from_bytes(pool.to_bytes())
    assert clone.bases[0].tied_term_weights() == pool.bases[0].tied_term_weights()
    for model in (pool, clone):
        model.learn_one("w1 w2 w3", "l1", id="next")
    assert clone.bases[0].tied_term_weights() == pool.bases[0].tied_term_weights()
    assert clone.predict_proba_one("w1 w4") == pool.predict_proba_one("w1 w4")


def test_the_memory_bound_counts_the_factors():
    plain, tied = MNB("u_jm", beta=0.5), MNB("u_jm_tw", beta=0.5)
    for model in (plain, tied):
        for i in range(50):  # one at a time, as tw learns: the same array growth in both
            model.learn_one(f"a{i} b{i}", "xy"[i % 2], id=str(i))
    assert tied.state.approx_bytes() - plain.state.approx_bytes() == 32 * len(tied.state.terms)


def test_a_released_term_starts_again_at_one():
    model = MNB("u_jm_tw", beta=0.5)
    model.learn_many(["rare common", "other common", "rare more"], ["x", "y", "x"], ids=["a", "b", "c"])
    model.learn_one("rare common", "y", id="d")
    assert model.tied_term_weights(["rare"])["rare"] != 1.0
    for doc_id in ("a", "c", "d"):
        model.forget(doc_id)
    assert "rare" not in model.state.terms.ids  # its last document left: its id was given back
    model.learn_one("fresh words", "x", id="e")  # the freed id goes to a new term
    assert model.tied_term_weights(["fresh", "words", "rare"]) == {"fresh": 1.0, "words": 1.0, "rare": 1.0}


@pytest.mark.parametrize("damage, message", [
    (lambda tied: tied.s.__setitem__(0, -0.5), "out of range"),
    (lambda tied: tied.total.__setitem__(1, np.inf), "out of range"),
    (lambda tied: tied.last.__setitem__(0, 10**6), "out of range"),
])
def test_a_snapshot_whose_factors_do_not_fit_is_refused(damage, message):
    model = random_model("u_jm_tw", 1, beta=0.5)
    damage(model.tied)
    with pytest.raises(SnapshotError, match=message):
        MNB.from_bytes(model.to_bytes())


def test_per_term_arrays_for_a_model_without_tied_weights_are_refused():
    data = random_model("u_jm_tw", 2, beta=0.5).to_bytes()
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dst:
        for item in src.infolist():
            raw = src.read(item.filename)
            if item.filename == "meta.json":
                meta = json.loads(raw)
                meta["config"]["model"] = "mnb_u_jm"
                meta["config"]["params"].pop("tw_eta")  # the arrays' content hash still holds
                raw = json.dumps(meta).encode()
            dst.writestr(item, raw)
    with pytest.raises(SnapshotError, match="for a model without tied term weights"):
        MNB.from_bytes(out.getvalue())


def test_the_spec():
    assert parse_spec("tw_ps_fw_jm_uc").name == "mnb_uc_jm_fw_tw_ps"
    assert "tw_eta" in parse_spec("u_jm_tw").free_params and "tw_eta" not in parse_spec("u_jm").free_params
    with pytest.raises(SpecError, match="for MNB"):
        parse_spec("tdm_uc_jm_kpd_tw")
    with pytest.raises(SpecError, match="tw_eta"):
        MNB("u_jm_tw", tw_eta=0.0)
    with pytest.raises(SpecError, match="not used"):
        MNB("u_jm", tw_eta=1.0)
    with pytest.raises(ValueError, match="no tied term weights"):
        MNB("u_jm").tied_term_weights()
