"""Finding 5 of issue #15, in the model: ``max_bytes`` bounds what the model holds, whatever valid documents arrive.

The service's test (tests/test_field_faults_process.py, test_5) measures resident
memory through a real broker; this one checks the rule itself, fast: after every
learn ``CountState.approx_bytes()`` is within the bound, the documents pruned are
the least weighted ones (decayed weight, the ``--max-documents`` order), each one
is counted, and what stays is exactly the model of the survivors.
"""
from __future__ import annotations

import random

import pytest

from sgm.model import MNB, TDM
from tests.test_exact_totals import assert_totals_exact


def adversarial(rng: random.Random, n_terms: int) -> dict[str, float]:
    """A document of ``n_terms`` words never seen before (hex strings)."""
    return {f"{rng.getrandbits(40):010x}": 1.0 + rng.random() for _ in range(n_terms)}


@pytest.mark.parametrize("family, spec", [(MNB, "uc_pd_jm_dp"), (TDM, "tdm_uc_jm_dp_kpd_kdp")])
def test_max_bytes_prunes_the_least_weighted_documents_and_holds_the_bound(family, spec):
    rng = random.Random(5)
    warm = family(spec, half_life=3600.0)
    for i in range(5):  # the arrays' allocated size counts too: measure it with a few documents in
        warm.learn_one(adversarial(rng, 2000), ["a"], ts=1_700_000_000.0 + i, id=f"w{i}")
    bound = 2 * warm.state.approx_bytes()
    model = family(spec, half_life=3600.0, max_bytes=bound)
    learned: dict[str, tuple] = {}
    t = 1_700_000_000.0
    for i in range(60):
        t += rng.random() * 600
        doc, labels = adversarial(rng, rng.choice([200, 1000, 3000])), [rng.choice("abc")]
        model.learn_one(doc, labels, ts=t, id=f"d{i}")
        learned[f"d{i}"] = (doc, labels, t)
        assert model.state.approx_bytes() <= bound, i
    kept = [doc_id for doc_id in learned if doc_id in model.state.docs]
    assert model.state.pruned_documents == len(learned) - len(kept) >= 30  # each one counted
    # the least weighted go first: with event time rising, the survivors are the latest documents
    assert kept == list(learned)[-len(kept):]
    survivors = family(spec, half_life=3600.0)
    for doc_id in kept:
        doc, labels, ts = learned[doc_id]
        survivors.learn_one(doc, labels, ts=ts, id=doc_id)
    probes = [dict(list(learned[d][0].items())[:50]) for d in kept[-3:]] + [{"nothing": 1.0}]
    for got, want in zip(model.predict_proba_many(probes), survivors.predict_proba_many(probes)):
        assert got == pytest.approx(want, rel=1e-9)
    assert_totals_exact(model)


def test_max_bytes_survives_a_snapshot():
    model = MNB("uc_pd_jm_dp", max_bytes=5_000_000)
    model.learn_one({"a": 1.0}, ["x"], id="one")
    restored = MNB.from_bytes(model.to_bytes())
    assert restored.state.max_bytes == 5_000_000
