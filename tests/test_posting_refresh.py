"""What the posting refresh reads and keeps between calls (model/loops/weights.py ``posting_ratios``).

The term arena's per-position copy of each entry's count equals the entry tables after every kind of change:
learning (regions growing and moving), unlearning (entries freed, regions shifting), compaction, decay with
rebases of the origin, and a snapshot restore. The discounted whole counts the refresh memoizes hold for one
call only: a Kneser-Ney delta moves with every update, and scoring between such updates matches the dense
reference."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from sgm.model import MNB
from tests.reference import DenseReference, as_array


def assert_counts_copied(model: MNB) -> None:
    state = model.state
    arena = state.arena
    terms = np.flatnonzero(arena.length)
    index, _ = arena.ranges(terms)
    slots = arena.slot[index]
    expected = state.ent_count.hi[slots] + state.ent_count.lo[slots]
    assert np.array_equal(arena.count[index], expected)


words = st.lists(st.sampled_from([f"w{i}" for i in range(40)]), min_size=1, max_size=12)
steps = st.lists(st.tuples(st.sampled_from(["learn", "forget", "restore", "compact"]), words,
                           st.sampled_from(["a", "b", "c", "d"]), st.floats(0.0, 400.0)), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(steps)
def test_arena_counts_follow_the_entries(ops) -> None:
    model = MNB("uc_pd_jm_dp", beta=0.3, mu=5.0, delta=0.6, half_life=2.0)  # ts jumps of 130+ rebase
    live: list[str] = []
    ts = 0.0
    for n, (op, doc, label, jump) in enumerate(ops):
        if op == "learn" or not live:
            ts += jump
            model.learn_one(" ".join(doc), label, ts=ts, id=f"d{n}")
            live.append(f"d{n}")
        elif op == "forget":
            model.forget(live.pop(n % len(live)))
        elif op == "restore":
            model = MNB.from_bytes(model.to_bytes())
        else:
            model.state.arena.compact()
        if live:
            model.predict_proba_one(" ".join(doc))  # a refresh of known terms starts the copy, then reads it
        if model.state.arena.counting:
            assert_counts_copied(model)


def test_a_model_that_only_learns_keeps_no_count_copy() -> None:
    model = MNB("uc_pd_jm_dp", beta=0.3, mu=5.0, delta=0.6)
    for n in range(30):
        model.learn_one(f"w{n % 7} w{n % 11} x{n}", "ab"[n % 2], id=f"d{n}")
    assert not model.state.arena.counting and len(model.state.arena.count) == 0
    model.predict_one("w1 w2")
    assert model.state.arena.counting
    model.learn_one("w1 w3 new", "a", id="late")
    assert_counts_copied(model)


def test_kneser_ney_delta_moving_between_scores_matches_the_reference() -> None:
    """Whole counts up to the thousands (the memo's range), a delta that every learn moves, a score after each."""
    model = MNB("u_pd", delta="kn")
    reference = DenseReference(model.spec, dict(model.params))
    rng = np.random.default_rng(3)
    query = {f"w{i}": 1.0 for i in range(12)}
    for n in range(40):
        doc = {f"w{int(i)}": float(c) for i, c in zip(rng.integers(0, 30, size=6), rng.integers(1, 400, size=6))}
        doc[f"rare{n}"] = 1.0 if n % 3 else 2.0  # moves n1 / n2, so the delta
        label = "ab"[n % 2]
        model.learn_one(doc, label, id=f"d{n}")
        reference.learn(doc, [label], None, f"d{n}")
        classes, log_post = model.predict_log_proba_many([query])
        expected = as_array(reference.log_posterior(query), classes, reference.multilabel)
        np.testing.assert_allclose(log_post[0], expected, rtol=0, atol=1e-9)
