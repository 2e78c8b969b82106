"""Generalized smoothing (MODEL.md sections 1-2, thesis table 4.1).

Every smoothing method is one formula with a per-count discount ``D(l, n)``
and a Dirichlet mass ``mu``::

    p_l(n) = (1 - a_l) * pu_l(n) + a_l * p_b(n)
    a_l    = (mu + D(l)) / (mu + C(l))                 D(l) = sum_n D(l, n)

and the sparse weight stored in the posting lists is::

    w(l, n) = log p_l(n) - log(a_l p_b(n)) = log1p((C(l,n) - D(l,n)) / ((mu + D(l)) p_b(n)))

All functions take *true* (decayed) counts as numpy arrays.
"""
from __future__ import annotations

import numpy as np

from .spec import ModelSpec


def entry_discount(counts: np.ndarray, spec: ModelSpec, beta: float, delta: float) -> np.ndarray:
    """``D(l, n)`` for each count: ``ad``/``pd`` base discount, then ``jm`` on the rest.

    A discount never exceeds its count (``min(C, .)``), which matters for
    fractional TF-IDF counts where ``delta * C**delta > C``.

    >>> from sgm.model.spec import parse_spec
    >>> entry_discount(np.array([4.0, 0.01]), parse_spec("u_pd"), 0.0, 0.5)
    array([1.  , 0.01])
    >>> entry_discount(np.array([4.0]), parse_spec("u_pd_jm"), 0.5, 0.5)  # 1 + 0.5 * (4 - 1)
    array([2.5])
    """
    if spec.discount == "pd":
        base = np.minimum(counts, delta * np.power(counts, delta))
    elif spec.discount == "ad":
        base = np.minimum(counts, delta)
    else:
        base = None
    if spec.jm:
        if base is None:
            return beta * counts
        return base + beta * (counts - base)
    if base is None:
        return np.zeros_like(counts)
    return base


def background_prob(term_mass: np.ndarray, total_mass: float, vocabulary: int, spec: ModelSpec, ups: float) -> np.ndarray:
    """``p_b(n)``: uniform ``1/V``, collection ``C(n)/C``, or their mix ``uc``.

    ``V`` is the number of terms the model currently holds counts for (seen in
    training, not pruned), so it grows with the vocabulary of the stream.
    Masses may be in stored units: only ratios are used.
    """
    if len(term_mass) == 0:  # also covers an empty model (V = 0, C = 0)
        return np.zeros(0)
    if spec.background == "u":
        return np.full(len(term_mass), 1.0 / vocabulary)
    collection = term_mass / total_mass
    if spec.background == "c":
        return collection
    return (1.0 - ups) * collection + ups / vocabulary


def log_smoothing_weight(mass: np.ndarray, discount_total: np.ndarray, mu: float) -> np.ndarray:
    """``log a_l`` with ``a_l = (mu + D(l)) / (mu + C(l))``; 0 for a label without counts."""
    total = mu + mass
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log((mu + discount_total) / total)
    out[total <= 0] = 0.0
    return out


def posting_weight(counts: np.ndarray, discounts: np.ndarray, label_denominator: np.ndarray,
                   background: np.ndarray) -> np.ndarray:
    """``w(l, n) = log1p((C(l,n) - D(l,n)) / ((mu + D(l)) p_b(n)))`` elementwise."""
    return np.log1p((counts - discounts) / (label_denominator * background))
