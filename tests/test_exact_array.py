"""ExactArray's contract with its readers: every element's ``hi + lo`` is its exact sum, correctly rounded.

The Python readers (:meth:`ExactArray.get`) add the residuals; the compiled ones read the pair alone. A
sequence of exact additions over ~200 binades, by every path the state uses (one value in Python floats, a
compiled batch, repeated indices, removals, scaling by powers of two), must leave both readings equal to
``math.fsum`` of what was added.
"""
from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings, strategies as st

from sgm.model.arrays import ExactArray, canonical_expansion

SIZE = 4
values = st.builds(lambda m, e: math.ldexp(m, e), st.floats(-1.0, 1.0, allow_nan=False), st.integers(-200, 60))
steps = st.lists(st.one_of(
    st.tuples(st.just("add_at"), st.integers(0, SIZE - 1), values),
    st.tuples(st.just("add"), st.lists(st.tuples(st.integers(0, SIZE - 1), values), min_size=1, max_size=6)),
    st.tuples(st.just("undo"), st.integers(0, 30)),  # subtract an earlier addition: sums that cancel to a sliver
    st.tuples(st.just("ldexp"), st.integers(-8, 8)),
), max_size=40)


@settings(max_examples=300, deadline=None)
@given(steps)
def test_every_pair_reads_as_its_exact_sum(program):
    sums, added = ExactArray(SIZE), [[] for _ in range(SIZE)]
    history: list[tuple[int, float]] = []
    for step in program:
        if step[0] == "add_at":
            _, j, x = step
            sums.add_at(j, x)
            added[j].append(x)
            history.append((j, x))
        elif step[0] == "add":
            index = np.array([j for j, _ in step[1]], dtype=np.int64)
            sums.add(index, np.array([x for _, x in step[1]]), distinct=False)
            for j, x in step[1]:
                added[j].append(x)
                history.append((j, x))
        elif step[0] == "undo" and history:
            j, x = history.pop(step[1] % len(history))
            sums.add_at(j, -x)
            added[j].append(-x)
        elif step[0] == "ldexp":
            sums.ldexp(step[1])
            added = [[math.ldexp(x, step[1]) for x in part] for part in added]
        for j in range(SIZE):
            exact = math.fsum(added[j])
            assert float(sums.get(j)) == exact
            assert float(sums.hi[j] + sums.lo[j]) == exact, (j, sums.hi[j], sums.lo[j], sums.spill.get(j))
            assert canonical_expansion([sums.hi[j], sums.lo[j], *sums.spill.get(j, [])]) == canonical_expansion(added[j])
