"""The compiled fw loop (model/loops/class_weights.py) against the numpy form of the same weights.

Random models of several labels, with decay (scaled counts), forgotten documents (classes without counts
take no part) and repeated terms in a batch: the two forms sum the postings in the same order, so they
differ only by the last bits of a logarithm or a power.
"""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sgm.model import MNB
from sgm.model.term_class_weights import term_class_weights, term_class_weights_numpy

WORDS = [f"w{i}" for i in range(30)]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), n_labels=st.integers(1, 6), half_life=st.sampled_from([None, 5.0]),
       gamma=st.sampled_from([0.0, 1.0, 2.5]), kappa=st.floats(1e-4, 50.0), eps=st.floats(0.0, 1.0))
def test_the_compiled_loop_gives_the_numpy_weights(seed, n_labels, half_life, gamma, kappa, eps):
    rng = np.random.default_rng(seed)
    model = MNB("u_jm", beta=0.5, half_life=half_life)
    for i in range(40):
        doc = {w: float(rng.integers(1, 4)) for w in rng.choice(WORDS, size=int(rng.integers(1, 7)))}
        model.learn_one(doc, f"l{int(rng.integers(n_labels))}", ts=float(i), id=f"d{i}")
    for i in rng.choice(40, size=10, replace=False):
        model.forget(f"d{i}")
    known = np.flatnonzero(model.state.arena.length[: model.state.terms.capacity] > 0)
    terms = rng.choice(known, size=min(len(known), 25))  # repeats allowed, as in a batch
    compiled = term_class_weights(model.state, terms, gamma, kappa, eps)
    numpy_form = term_class_weights_numpy(model.state, terms, gamma, kappa, eps)
    np.testing.assert_allclose(compiled, numpy_form, rtol=1e-13, atol=1e-15)
