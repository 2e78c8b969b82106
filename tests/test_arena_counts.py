"""The term arena's per-position copy of each entry's count (what the posting refresh reads) equals the entry
tables after every kind of change: learning (regions growing and moving), unlearning (entries freed, regions
shifting), compaction, decay with rebases of the origin, and a snapshot restore."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from sgm.model import MNB


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
        assert_counts_copied(model)
        if live:
            model.predict_proba_one(" ".join(doc))  # the refresh reads the copies
