"""The entry journal across a growth of the entry tables: the discount totals must see every change.

The kept per-label discount totals (``model/smoothing/totals.py``) follow the slots the state notes in its
journal; past the journal's capacity only the count grows, and the reader redoes its pass over every entry.
Until session 12 the journal grew with the entry tables, and a count that had run past the old capacity fit
the new one: the reader took the unwritten tail (zeros) for the changes and missed the real ones. Labels met
only in that stretch kept a discount total of 0 (``u_pd`` has no other smoothing weight: ZeroDivisionError
while scoring), and the others stayed off their exact totals until the next full pass.
"""
from __future__ import annotations

import random

import numpy as np
import pytest

from sgm.model import MNB


def brute_discount_totals(state, n: int, delta: float) -> np.ndarray:
    """``sum_n D(C(l, n))`` with the power-law discount, entry by entry."""
    out = np.zeros(n)
    for slot in range(state.ent_used):
        if state.ent_refs[slot] > 0:
            x = float(state.ent_count.get(slot))
            out[state.ent_class[slot]] += min(x, delta * x ** delta)
    return out


@pytest.mark.parametrize("delta", [0.6, "kn"])
def test_discount_totals_stay_exact_when_a_burst_of_learning_grows_the_entries(delta):
    rng = random.Random(1)
    model = MNB("u_pd", delta=delta)
    words = [f"w{i}" for i in range(2000)]
    checked = 0
    for i in range(160):
        doc: dict[str, float] = {}
        for _ in range(60):  # 50-60 distinct words, skewed towards the first third of the vocabulary
            w = words[min(int(rng.paretovariate(1.0)) - 1 + rng.randrange(len(words)) // 3, len(words) - 1)]
            doc[w] = doc.get(w, 0) + 1
        model.learn_one(doc, f"L{rng.randrange(200)}", id=str(i))
        if (i + 1) % 50 == 0:  # ~2,700 entry changes between reads: past the journal's 1,024 or 2,048
            state = model.state
            derived = model.labels.class_terms(state)
            n = len(derived.denominator)
            live = state.cls_refs[:n] > 0
            expected = brute_discount_totals(state, n, derived.values[0])
            assert np.allclose(derived.denominator[live], expected[live], rtol=1e-12, atol=0), \
                np.flatnonzero(live & ~np.isclose(derived.denominator, expected, rtol=1e-12, atol=0))
            labels, log_probs = model.predict_log_proba_many([doc])
            assert np.isfinite(log_probs).all()
            checked += 1
    assert checked == 3 and model.state.ent_used > 8000  # the entry tables grew twice between reads
