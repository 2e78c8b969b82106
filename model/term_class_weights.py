"""Supervised weights of scored terms (the ``fw`` affix): how unevenly the classes hold a term.

A scored document's weight ``w_n`` is multiplied by ``g(n)``, read from the
model's own (decayed) count tables at scoring time, so learning, unlearning and
decay change it exactly as they change the counts::

    r_l(n) = (C(l,n) + kappa * C(n) / C) / (C(l) + kappa)     per-class relative frequency,
                                                               pulled towards the collection's
    q_l(n) = r_l(n) / sum_l' r_l'(n)
    g(n)   = eps + (1 - eps) * (1 - H(q(n)) / log K) ** gamma

over the ``K`` classes holding counts (``g = 1`` when ``K < 2``). A term spread
evenly over the classes (``H = log K``) keeps only ``eps`` of its weight; a term
held by one class keeps nearly all of it. This is naive Bayes with feature
weights (Zhang and Sheng's weighted naive Bayes; the entropy weight is the
normalized information gain of the term's class distribution), still a sparse
linear score: ``sum_n g(n) w_n log p_l(n)``. Only the scored side is weighted;
the counts the classes learn are unchanged.

Cost: one pass over the postings of the batch's distinct terms. Classes without
the term share one value of ``r_l`` up to their own ``C(l)``, so their part of
``sum r`` and ``sum r log r`` comes from two sums over all classes
(``S1 = sum_l x_l``, ``S2 = sum_l x_l log x_l`` with ``x_l = 1 / (C(l) + kappa)``)
minus the posted classes' share.
"""
from __future__ import annotations

import numpy as np

from .loops.class_weights import entropy_weights


def class_entropy_weights(class_mass: np.ndarray, posting_term: np.ndarray, posting_class: np.ndarray,
                          posting_count: np.ndarray, n_terms: int, gamma: float, kappa: float,
                          eps: float) -> np.ndarray:
    """``g(n)`` for ``n_terms`` terms from their postings (true, decayed units).

    ``class_mass[c]`` is ``C(l)`` of class ``c`` (0 for classes without counts:
    they take no part); posting ``i`` says term ``posting_term[i]`` holds
    ``posting_count[i]`` under class ``posting_class[i]``.

    >>> mass = np.array([10.0, 10.0])
    >>> g = class_entropy_weights(mass, np.array([0, 0, 1]), np.array([0, 1, 0]),
    ...                           np.array([5.0, 5.0, 5.0]), 2, gamma=1.0, kappa=1e-9, eps=0.1)
    >>> g.round(4)  # term 0 is spread evenly: eps; term 1 lives in one class: nearly 1
    array([0.1, 1. ])
    """
    live = class_mass > 0
    n_classes = int(live.sum())
    if n_classes < 2 or n_terms == 0:
        return np.ones(n_terms)
    x = np.zeros(len(class_mass))
    x[live] = 1.0 / (class_mass[live] + kappa)
    s1 = float(x[live].sum())
    s2 = float((x[live] * np.log(x[live])).sum())
    held = live[posting_class] & (posting_count > 0)  # postings of classes without counts take no part
    posting_term, posting_class, posting_count = posting_term[held], posting_class[held], posting_count[held]
    term_mass = np.bincount(posting_term, posting_count, minlength=n_terms)
    b = kappa * term_mass / float(class_mass[live].sum())
    xp = x[posting_class]
    r = (posting_count + b[posting_term]) * xp
    rest_x = np.maximum(s1 - np.bincount(posting_term, xp, minlength=n_terms), 0.0)
    rest_xlogx = s2 - np.bincount(posting_term, xp * np.log(xp), minlength=n_terms)
    with np.errstate(divide="ignore", invalid="ignore"):
        b_log_b = np.where(b > 0, b * np.log(b), 0.0)
        total = np.bincount(posting_term, r, minlength=n_terms) + b * rest_x
        total_rlogr = (np.bincount(posting_term, r * np.log(r), minlength=n_terms)
                       + b_log_b * rest_x + b * rest_xlogx)
        entropy = np.where(total > 0, np.log(total) - total_rlogr / total, np.log(n_classes))
    share = np.clip(1.0 - entropy / np.log(n_classes), 0.0, 1.0)
    return eps + (1.0 - eps) * share**gamma


def term_class_weights(state, terms: np.ndarray, gamma: float, kappa: float, eps: float) -> np.ndarray:
    """``g(n)`` of each entry of ``terms`` (known term ids, repeats allowed) from a count state: the compiled
    loop (:func:`model.loops.class_weights.entropy_weights`), one pass over the postings of the distinct terms."""
    if not len(terms):
        return np.ones(0)
    scale, class_mass = _scaled_class_mass(state)
    n = len(class_mass)
    live = class_mass > 0
    n_live = int(live.sum())
    if n_live < 2:
        return np.ones(len(terms))
    unique, inverse = np.unique(terms, return_inverse=True)
    inverse_mass = np.zeros(n)
    inverse_mass[live] = 1.0 / (class_mass[live] + kappa)
    inverse_mass_log = np.zeros(n)
    inverse_mass_log[live] = inverse_mass[live] * np.log(inverse_mass[live])
    g = np.empty(len(unique))
    arena, counts = state.arena, state.ent_count
    entropy_weights(unique, arena.start, arena.length, arena.cls, arena.slot, counts.hi, counts.lo, scale, live,
                    inverse_mass, inverse_mass_log, float(inverse_mass[live].sum()), float(inverse_mass_log[live].sum()),
                    n_live, float(class_mass[live].sum()), float(gamma), float(kappa), float(eps), g)
    return g[inverse]


def term_class_weights_numpy(state, terms: np.ndarray, gamma: float, kappa: float, eps: float) -> np.ndarray:
    """:func:`term_class_weights` by the numpy form (:func:`class_entropy_weights`): the compiled loop's check."""
    if not len(terms):
        return np.ones(0)
    unique, inverse = np.unique(terms, return_inverse=True)
    scale, class_mass = _scaled_class_mass(state)
    index, lengths = state.arena.ranges(unique)
    posting_term = np.repeat(np.arange(len(unique)), lengths)
    posting_class = state.arena.cls[index].astype(np.int64)
    posting_count = state.ent_count.get(state.arena.slot[index]) * scale
    g = class_entropy_weights(class_mass, posting_term, posting_class, posting_count, len(unique), gamma, kappa, eps)
    return g[inverse]


def _scaled_class_mass(state) -> tuple[float, np.ndarray]:
    """The decay scale and ``C(l)`` of every class id in true units (0 for classes without documents)."""
    scale = state.clock.scale()
    class_mass = np.zeros(state.classes.capacity)
    active = state.active_classes()
    class_mass[active] = state.cls_mass.get(active) * scale
    return scale, class_mass
