"""Compiled loops of the sparse top-k (many classes, constant smoothing weight): a sparse accumulator
per document and the scoring of its explicit classes."""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def sparse_accumulate(terms, weights, starts, lengths, posting_class, posting_weight, scratch, marked,
                      touched):  # pragma: no cover - compiled
    """Sparse accumulator: add one document's posting contributions per class.

    ``scratch`` (values) and ``marked`` (flags) are class-sized and all zero on
    entry; the classes hit are written to ``touched`` in first-hit order and
    their count returned. The caller reads ``scratch[touched[:n]]`` and resets
    those entries: cost O(postings touched), independent of the class count.
    """
    n = 0
    for i in range(terms.shape[0]):
        w = weights[i]
        t = terms[i]
        start = starts[t]
        for p in range(start, start + lengths[t]):
            c = posting_class[p]
            if not marked[c]:
                marked[c] = True
                touched[n] = c
                n += 1
            scratch[c] += w * posting_weight[p]
    return n


@njit(cache=True, nogil=True)
def sparse_topk_finish(touched, n_hit, scratch, marked, massless, log_power, power, log_total_power,
                       base, smooth, k, top_ids, top_scores):  # pragma: no cover - compiled
    """Score one document's explicit classes after :func:`sparse_accumulate`; reset the accumulator.

    Explicit classes: the ``n_hit`` classes with postings (``base + theta log p(l) +
    their posting sum``) and the ``massless`` ones (``smooth + theta log p(l)``).
    Writes their ``k`` best to ``top_ids``/``top_scores`` by score, ties by lower
    id, and returns ``(how many, peak score, sum of exp(score - peak), sum of
    N(l)**theta over them)`` for the normalizer. ``log_power[c] = theta log N(c)``
    and ``power[c] = N(c)**theta`` come from the prior index (updated only for
    classes that changed), ``log_total_power = theta log sum_l N(l)``: one ``exp``
    per class, no ``log``. Clears ``scratch`` and ``marked`` for the classes it read.
    """
    n_top = 0
    peak = -np.inf
    count = n_hit + massless.shape[0]
    scores = np.empty(count)
    ids = np.empty(count, dtype=np.int64)
    prior_power = 0.0
    for j in range(count):
        if j < n_hit:
            c = touched[j]
            extra = base + scratch[c]
            scratch[c] = 0.0
        else:
            c = massless[j - n_hit]
            extra = smooth
        marked[c] = False
        prior_power += power[c]
        score = (log_power[c] - log_total_power) + extra
        scores[j] = score
        ids[j] = c
        if score > peak:
            peak = score
        # insertion into the running top k (k is small)
        if n_top < k or score > top_scores[n_top - 1] or (score == top_scores[n_top - 1] and c < top_ids[n_top - 1]):
            at = n_top if n_top < k else k - 1
            while at > 0 and (score > top_scores[at - 1] or (score == top_scores[at - 1] and c < top_ids[at - 1])):
                if at < k:
                    top_scores[at] = top_scores[at - 1]
                    top_ids[at] = top_ids[at - 1]
                at -= 1
            top_scores[at] = score
            top_ids[at] = c
            if n_top < k:
                n_top += 1
    total = 0.0
    for j in range(count):
        total += np.exp(scores[j] - peak)
    return n_top, peak, total, prior_power
