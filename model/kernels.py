"""Compiled inner loops (numba), for what numpy cannot vectorize without Python-level rounds.

Each kernel is a plain loop with IEEE semantics (no fastmath: no reordering of
floating-point operations), so results are bit for bit those of the same loop
in Python. Compiled once per machine and cached next to this file.
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True, inline="always")
def _two_sum(hi, lo, j, x):  # pragma: no cover - compiled
    """``hi[j] + lo[j] += x`` keeping the rounding error of the addition in ``lo[j]`` (Knuth's TwoSum)."""
    s = hi[j]
    t = s + x
    b = t - s
    lo[j] += (s - (t - b)) + (x - b)
    hi[j] = t


@njit(cache=True, nogil=True)
def compensated_add(hi: np.ndarray, lo: np.ndarray, index: np.ndarray, values: np.ndarray) -> None:  # pragma: no cover - compiled
    """``hi[index[i]] + lo[index[i]] += values[i]`` for i in order (indices may repeat)."""
    for i in range(index.shape[0]):
        _two_sum(hi, lo, index[i], values[i])


@njit(cache=True, nogil=True)
def compensated_running_sum(hi: float, lo: float, values: np.ndarray):  # pragma: no cover - compiled
    """``(hi, lo)`` after adding ``values`` one by one with TwoSum: a scalar running sum, in order."""
    for i in range(values.shape[0]):
        x = values[i]
        t = hi + x
        b = t - hi
        lo += (hi - (t - b)) + (x - b)
        hi = t
    return hi, lo


@njit(cache=True, nogil=True)
def count_terms(terms: np.ndarray, factors: np.ndarray, raw: np.ndarray, df_hi: np.ndarray, df_lo: np.ndarray,
                refs: np.ndarray, term_raw: np.ndarray):  # pragma: no cover - compiled
    """Count documents' terms in order: document frequency (+factor), references (+1), raw counts (+raw).

    Returns the change in how many terms have a raw count of exactly 1 and of
    exactly 2 (the Kneser-Ney estimate's n1 and n2), followed term by term.
    """
    d1 = 0
    d2 = 0
    for i in range(terms.shape[0]):
        t = terms[i]
        _two_sum(df_hi, df_lo, t, factors[i])
        refs[t] += 1
        old = term_raw[t]
        new = old + raw[i]
        term_raw[t] = new
        if old == 1.0:
            d1 -= 1
        elif old == 2.0:
            d2 -= 1
        if new == 1.0:
            d1 += 1
        elif new == 2.0:
            d2 += 1
    return d1, d2


@njit(cache=True, nogil=True)
def power_discount_totals(ent_class, ent_hi, ent_lo, used, scale, scale_power, delta, beta, jm, power, power_of,
                          out):  # pragma: no cover - compiled
    """``out[l] += D(l, n)`` over the entries: the ``pd`` discount ``min(x, delta x**delta)``, then ``jm``.

    ``x = c * scale`` for the stored count ``c``; ``x**delta`` is taken as
    ``scale**delta * c**delta`` with ``c**delta`` cached per slot in
    ``power`` and recomputed only where the stored count is not the one it
    was computed for (``power_of``): after an update only the changed
    entries pay for a ``pow``. Entries are summed in slot order, as
    ``np.bincount`` does. Free slots hold 0 and add 0.
    """
    for s in range(used):
        c = ent_hi[s] + ent_lo[s]
        if power_of[s] != c:
            power[s] = c ** delta
            power_of[s] = c
        x = c * scale
        base = min(x, delta * (scale_power * power[s]))
        out[ent_class[s]] += base + beta * (x - base) if jm else base


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


# Status codes of the entry kernels: done, or which array needs to grow before resuming.
DONE, NEED_ENTRIES, NEED_ARENA = 0, 1, 2
# Slots of the counters array shared with CountState.
ENT_USED, FREE_TOP, ARENA_USED, ARENA_GARBAGE, VOCABULARY = 0, 1, 2, 3, 4


@njit(cache=True, nogil=True)
def _find(arena_cls, start, length, klass):  # pragma: no cover - compiled
    """Position of ``klass`` in a term's class-sorted region, or where it would be inserted."""
    lo, hi = 0, length
    while lo < hi:
        mid = (lo + hi) // 2
        if arena_cls[start + mid] < klass:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, nogil=True)
def add_entries(pair_terms, pair_classes, pair_values, first,
                arena_slot, arena_cls, term_start, term_length, term_capacity,
                ent_class, ent_term, ent_hi, ent_lo, ent_refs, free_stack,
                term_hi, term_lo, cls_entries, counters):  # pragma: no cover - compiled
    """Add ``pair_values[i]`` to entry (term, class) for i = first.. in order, creating missing entries.

    An entry is found by binary search in its term's region of the arena (kept
    sorted by class id). A new entry takes a freed slot (last freed first) or
    the next unused one and is inserted in order; a full region moves to the
    end of the arena with twice the capacity. Returns ``(status, i)``: DONE, or
    which array must grow before calling again from pair ``i`` (nothing of
    pair ``i`` has been applied then).
    """
    for i in range(first, pair_terms.shape[0]):
        t = pair_terms[i]
        c = pair_classes[i]
        x = pair_values[i]
        start = term_start[t]
        length = term_length[t]
        at = _find(arena_cls, start, length, c)
        if at < length and arena_cls[start + at] == c:
            s = arena_slot[start + at]
        else:
            if counters[FREE_TOP] == 0 and counters[ENT_USED] >= ent_refs.shape[0]:
                return NEED_ENTRIES, i
            if length == term_capacity[t]:
                capacity = max(4, 2 * term_capacity[t])
                if counters[ARENA_USED] + capacity > arena_slot.shape[0]:
                    return NEED_ARENA, i
                moved = counters[ARENA_USED]
                for k in range(length):
                    arena_slot[moved + k] = arena_slot[start + k]
                    arena_cls[moved + k] = arena_cls[start + k]
                counters[ARENA_USED] += capacity
                counters[ARENA_GARBAGE] += term_capacity[t]
                term_start[t] = moved
                term_capacity[t] = capacity
                start = moved
            if counters[FREE_TOP] > 0:
                counters[FREE_TOP] -= 1
                s = free_stack[counters[FREE_TOP]]
            else:
                s = counters[ENT_USED]
                counters[ENT_USED] += 1
            for k in range(length, at, -1):  # keep the region sorted by class
                arena_slot[start + k] = arena_slot[start + k - 1]
                arena_cls[start + k] = arena_cls[start + k - 1]
            arena_slot[start + at] = s
            arena_cls[start + at] = c
            term_length[t] = length + 1
            if length == 0:
                counters[VOCABULARY] += 1
            ent_class[s] = c
            ent_term[s] = t
            ent_hi[s] = 0.0
            ent_lo[s] = 0.0
            ent_refs[s] = 0
            cls_entries[c] += 1
        _two_sum(ent_hi, ent_lo, s, x)
        ent_refs[s] += 1
        _two_sum(term_hi, term_lo, t, x)
    return DONE, pair_terms.shape[0]


@njit(cache=True, nogil=True)
def remove_entries(pair_terms, pair_classes, pair_values,
                   arena_slot, arena_cls, term_start, term_length,
                   ent_hi, ent_lo, ent_refs, free_stack,
                   term_hi, term_lo, cls_entries, cls_hi, cls_lo, counters):  # pragma: no cover - compiled
    """Subtract what :func:`add_entries` added; an entry whose last document leaves is freed.

    A freed entry, a term without entries and a class without entries are
    reset to exactly zero, so round-off can never keep them alive.
    """
    for i in range(pair_terms.shape[0]):
        t = pair_terms[i]
        c = pair_classes[i]
        x = -pair_values[i]
        start = term_start[t]
        length = term_length[t]
        at = _find(arena_cls, start, length, c)
        s = arena_slot[start + at]
        _two_sum(ent_hi, ent_lo, s, x)
        if ent_hi[s] + ent_lo[s] < 0.0:
            ent_hi[s] = 0.0
            ent_lo[s] = 0.0
        _two_sum(term_hi, term_lo, t, x)
        if term_hi[t] + term_lo[t] < 0.0:
            term_hi[t] = 0.0
            term_lo[t] = 0.0
        ent_refs[s] -= 1
        if ent_refs[s] == 0:
            ent_hi[s] = 0.0
            ent_lo[s] = 0.0
            for k in range(at, length - 1):
                arena_slot[start + k] = arena_slot[start + k + 1]
                arena_cls[start + k] = arena_cls[start + k + 1]
            term_length[t] = length - 1
            free_stack[counters[FREE_TOP]] = s
            counters[FREE_TOP] += 1
            cls_entries[c] -= 1
            if cls_entries[c] == 0:
                cls_hi[c] = 0.0
                cls_lo[c] = 0.0
            if length == 1:
                counters[VOCABULARY] -= 1
                term_hi[t] = 0.0
                term_lo[t] = 0.0


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
def dense_log_posterior(n_docs, owner, terms, weights, log_background, starts, lengths, posting_class,
                        posting_weight, active, log_prior, log_a, out):  # pragma: no cover - compiled
    """Normalized log posteriors of a batch over the ``active`` class ids (MODEL.md section 5).

    ``out[d, j] = score(active[j]) - logsumexp(score)`` with
    ``score(l) = theta log p(l) + |w|_1 log a_l + sum_n w_n log p_b(n) + sum_postings w_n w(l, n)``.
    """
    n_active = active.shape[0]
    capacity = log_prior.shape[0]
    matched = np.zeros(capacity)
    i = 0
    for d in range(n_docs):
        length = 0.0
        smooth = 0.0
        start_i = i
        while i < terms.shape[0] and owner[i] == d:
            length += weights[i]
            smooth += weights[i] * log_background[i]
            i += 1
        for j in range(start_i, i):
            w = weights[j]
            t = terms[j]
            for p in range(starts[t], starts[t] + lengths[t]):
                matched[posting_class[p]] += w * posting_weight[p]
        peak = -np.inf
        for j in range(n_active):
            c = active[j]
            score = ((log_prior[c] + length * log_a[c]) + smooth) + matched[c]
            out[d, j] = score
            if score > peak:
                peak = score
        total = 0.0
        for j in range(n_active):
            total += np.exp(out[d, j] - peak)
        log_norm = peak + np.log(total)
        for j in range(n_active):
            out[d, j] -= log_norm
        for j in range(start_i, i):  # reset only what was touched
            t = terms[j]
            for p in range(starts[t], starts[t] + lengths[t]):
                matched[posting_class[p]] = 0.0


#: :func:`count_status` results.
COUNTS_POSITIVE, COUNTS_WITH_ZEROS, COUNTS_INVALID = 0, 1, 2


@njit(cache=True, nogil=True)
def count_status(values):  # pragma: no cover - compiled
    """One pass over caller-supplied term counts: all positive and finite, some zero, or invalid.

    Invalid means negative, NaN or infinite (NaN fails every comparison).
    """
    status = COUNTS_POSITIVE
    for x in values:
        if x > 0.0:
            if x == np.inf:
                return COUNTS_INVALID
        elif x == 0.0:
            status = COUNTS_WITH_ZEROS
        else:
            return COUNTS_INVALID
    return status


@njit(cache=True, nogil=True)
def keep_seen_terms(term_ids, values, owner, term_entries):  # pragma: no cover - compiled
    """Compact ``(term_ids, values, owner)`` in place to the terms with entries; returns how many remain.

    A term is seen when its id is valid (``>= 0``; ``-1`` marks a word not in the
    vocabulary) and it has at least one (class, term) entry.
    """
    n = 0
    for i in range(term_ids.shape[0]):
        t = term_ids[i]
        if t >= 0 and term_entries[t] > 0:
            term_ids[n] = t
            values[n] = values[i]
            owner[n] = owner[i]
            n += 1
    return n


@njit(cache=True, nogil=True)
def count_stale(computed_at, terms, epoch):  # pragma: no cover - compiled
    """How many of ``terms`` have postings computed before ``epoch``."""
    n = 0
    for t in terms:
        if computed_at[t] != epoch:
            n += 1
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
