"""Compiled inner loops (numba), for what numpy cannot vectorize without Python-level rounds.

Each kernel is a plain loop with IEEE semantics (no fastmath: no reordering of
floating-point operations), so results are bit for bit those of the same loop
in Python. Compiled once per machine and cached next to this file.
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def compensated_add(hi: np.ndarray, lo: np.ndarray, index: np.ndarray, values: np.ndarray) -> None:  # pragma: no cover - compiled
    """``hi[index[i]] + lo[index[i]] += values[i]`` for i in order (Knuth's TwoSum; indices may repeat)."""
    for i in range(index.shape[0]):
        j = index[i]
        x = values[i]
        s = hi[j]
        t = s + x
        b = t - s
        lo[j] += (s - (t - b)) + (x - b)
        hi[j] = t


@njit(cache=True, nogil=True)
def accumulate_postings(owner: np.ndarray, terms: np.ndarray, weights: np.ndarray, starts: np.ndarray,
                        lengths: np.ndarray, posting_class: np.ndarray, posting_weight: np.ndarray,
                        out: np.ndarray) -> None:  # pragma: no cover - compiled
    """``out[doc, class] += w_n * w(class, n)`` over the postings of every (document, term).

    The sum runs in term order, then posting order: the order of the
    concatenate-and-bincount formulation it replaces.
    """
    for i in range(terms.shape[0]):
        d = owner[i]
        w = weights[i]
        t = terms[i]
        start = starts[t]
        for p in range(start, start + lengths[t]):
            out[d, posting_class[p]] += w * posting_weight[p]
