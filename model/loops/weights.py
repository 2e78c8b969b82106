"""Compiled per-class and per-posting quantities of the label model (MODEL.md sections 1-2, 5).

A spec's smoothing reaches these loops as numbers: its discount chain as
``(forms, values)`` (each step's form, :data:`LINEAR` ``v x``, :data:`POWER`
``min(x, v x**v)``, :data:`ABSOLUTE` ``min(v, x)``, applied in order each to
what the earlier ones left, as :class:`model.smoothing.DiscountChain` does),
and its background as the affine map ``p_b(n) = a C(n) + b`` every built-in
background is (:meth:`model.smoothing.contract.Background.affine`).

Posting weights ``w = log1p(r)`` are computed in two steps: the ratios ``r``
here, then the ``log1p`` by numpy over the batch's ratios at once, whose
vectorized ``log1p`` is several times faster per value than a scalar call in a
compiled loop, and gives the same bits whatever the batch (the compiled one
differs in the last bit for some values: :meth:`model.postings.PostingCache.store`).
"""
from __future__ import annotations

import numpy as np
from numba import njit

LINEAR, POWER, ABSOLUTE = 0, 1, 2

#: Whole counts below this have their discounted count computed once per refresh (most counts, without
#: decay: a Kneser-Ney delta, which moves every update, then costs a power per distinct count, not per posting;
#: at a million entries the common words' counts in each label run into the thousands).
WHOLE_MEMO = 4096


@njit(cache=True, nogil=True, inline="always")
def chain_discount(forms, values, x):  # pragma: no cover - compiled
    """``D(x)`` of a discount chain: each step takes its discount of what the earlier ones left."""
    total = 0.0
    for k in range(forms.shape[0]):
        rest = x - total
        form = forms[k]
        v = values[k]
        if form == LINEAR:
            total += v * rest
        elif form == POWER:
            total += min(rest, v * rest ** v)
        else:
            total += min(v, rest)
    return total


@njit(cache=True, nogil=True)
def class_terms(n, mass_hi, mass_lo, docs_hi, docs_lo, refs, scale, mu, theta, docs_total, head, rest, forms,
                values, denominator, log_a, log_prior):  # pragma: no cover - compiled
    """Per class id below ``n``: ``mu + D(l)``, ``log a_l`` and ``theta log p(l)`` (-inf for unused ids).

    ``D(l)``: with an empty ``head`` (a linear chain) the chain ``(forms, values)``
    applied to ``C(l)``; else ``head[l]`` followed by the linear steps ``rest``,
    each taking its fraction of ``C(l)`` minus what came before.
    ``log a_l = log((mu + D(l)) / (mu + C(l)))``, 0 where ``mu + C(l) <= 0``.
    """
    log_docs_total = np.log(docs_total) if docs_total > 0 else 0.0
    linear = head.shape[0] == 0
    for c in range(n):
        mass = (mass_hi[c] + mass_lo[c]) * scale
        if linear:
            d = chain_discount(forms, values, mass)
        else:
            d = head[c]
            for k in range(rest.shape[0]):
                d += rest[k] * (mass - d)
        denominator[c] = mu + d
        total = mu + mass
        log_a[c] = np.log((mu + d) / total) if total > 0 else 0.0
        if refs[c] > 0:
            log_prior[c] = theta * (np.log(docs_hi[c] + docs_lo[c]) - log_docs_total)
        else:
            log_prior[c] = -np.inf


@njit(cache=True, nogil=True)
def posting_ratios(terms, computed_at, epoch, starts, lengths, cls, count, scale, forms, values,
                   denominator, by_mass, mass_hi, mass_lo, term_hi, term_lo, pb_a, pb_b, log_background, keep,
                   kept_count, kept_rest, memo_rest, memo_call, call, ratio, position):  # pragma: no cover - compiled
    """The ratios ``r = (C(l,n) - D(l,n)) / ((mu + D(l)) p_b(n))`` of the stale postings of ``terms``.

    Stale: ``computed_at[t] != epoch``; each stale term is marked fresh (repeats
    are read once) and its ``log p_b(n)`` stored. The ratios go to ``ratio[k]``
    with their arena positions in ``position[k]``; returns how many, and how many
    terms were stale. If ``ratio`` is too small nothing is changed and minus the
    size needed is returned. ``by_mass``: ``mu + D(l) = denominator[0] * C(l)`` (a constant
    smoothing weight: no per-class array), else ``denominator[l]``. The background is
    ``p_b(n) = pb_a * C(n) + pb_b`` (:meth:`model.smoothing.contract.Background.affine`, ``C(n)`` read as
    ``term_hi[n] + term_lo[n]``); ``(forms, values)`` is the discount chain ``D(x)`` (:func:`chain_discount`).

    The counts are the arena's copies (``count[p]``, stored units, times
    ``scale``): a term's are read in one walk of its region, as are the kept
    values. ``C(l,n) - D(l,n)`` depends on the entry's count and the discounts'
    numbers alone: with ``keep`` it is kept per arena position (``kept_rest[p]``,
    for the count ``kept_count[p]``; the caller resets ``kept_count`` to NaN when
    the numbers change), so that an update recomputes the discounts of the
    entries it changed only, not of every posting it makes stale. A position
    whose entry moved or changed keeps a pair that is still right for its own
    count, which then differs from the entry's: the pair is recomputed. Whole
    counts below :data:`WHOLE_MEMO` (most counts, without decay or weighting)
    are discounted once per call instead, without reading the kept pairs (the
    same function of the same numbers: the same bits): ``memo_rest[k]`` holds
    ``k - D(k)`` where ``memo_call[k] == call``, a number the caller makes new
    for every call.
    """
    need = 0
    for i in range(terms.shape[0]):
        t = terms[i]
        if computed_at[t] != epoch:
            need += lengths[t]
    if need > ratio.shape[0]:
        return -need, 0
    n = 0
    stale = 0
    for i in range(terms.shape[0]):
        t = terms[i]
        if computed_at[t] == epoch:
            continue
        computed_at[t] = epoch
        stale += 1
        pb = pb_a * (term_hi[t] + term_lo[t]) + pb_b
        log_background[t] = np.log(pb)
        for p in range(starts[t], starts[t] + lengths[t]):
            x = count[p] * scale
            c = cls[p]
            if by_mass:
                den = denominator[0] * ((mass_hi[c] + mass_lo[c]) * scale)
            else:
                den = denominator[c]
            if x < WHOLE_MEMO and x >= 0.0 and x == np.floor(x):  # a whole count: once per call
                k = np.int64(x)
                if memo_call[k] != call:
                    memo_rest[k] = x - chain_discount(forms, values, x)
                    memo_call[k] = call
                rest = memo_rest[k]
            elif keep and kept_count[p] == x:
                rest = kept_rest[p]
            else:  # a changed count (or numbers): its discount anew
                rest = x - chain_discount(forms, values, x)
                if keep:
                    kept_count[p] = x
                    kept_rest[p] = rest
            ratio[n] = rest / (den * pb)
            position[n] = p
            n += 1
    return n, stale


@njit(cache=True, nogil=True)
def store_weights(log_ratio, position, n, weight):  # pragma: no cover - compiled
    """``weight[position[k]] = max(log_ratio[k], 0)``: the ``log1p`` of the ratios is numpy's, taken before
    (:meth:`model.postings.PostingCache.store`). A fully discounted entry adds nothing (the max guards -0.0 and
    round-off).
    """
    for k in range(n):
        w = log_ratio[k]
        weight[position[k]] = w if w > 0.0 else 0.0
