"""Compiled updates of the count tables: document frequencies, and (class, term) entries found, created
and freed in the term arena (:class:`model.arena.TermArena`) with compensated sums; the per-term totals
(document frequency, term mass) are exact sums whose rare residuals go to the spill buffers
(:func:`model.loops.sums.exact_add`)."""
from __future__ import annotations

import numpy as np
from numba import njit

from .sums import exact_add, two_sum


# Status codes of the entry loops: done, or which array needs to grow before resuming.
DONE, NEED_ENTRIES, NEED_ARENA = 0, 1, 2
# Slots of the counters array shared with CountState.
ENT_USED, FREE_TOP, ARENA_USED, ARENA_GARBAGE, VOCABULARY, JOURNAL_FILL = 0, 1, 2, 3, 4, 5


@njit(cache=True, nogil=True, inline="always")
def _journal(journal, counters, s):  # pragma: no cover - compiled
    """Note that entry slot ``s`` changed. Past the journal's capacity only the count grows: the
    reader then knows it missed some (it redoes its pass over every entry)."""
    fill = counters[JOURNAL_FILL]
    if fill < journal.shape[0]:
        journal[fill] = s
    counters[JOURNAL_FILL] = fill + 1


@njit(cache=True, nogil=True)
def count_terms(terms: np.ndarray, factors: np.ndarray, raw: np.ndarray, df_hi: np.ndarray, df_lo: np.ndarray,
                refs: np.ndarray, term_raw: np.ndarray, spill_index: np.ndarray, spill_value: np.ndarray,
                spill_count: np.ndarray):  # pragma: no cover - compiled
    """Count documents' terms in order: document frequency (+factor, exact), references (+1), raw counts (+raw).

    Returns the change in how many terms have a raw count of exactly 1 and of
    exactly 2 (the Kneser-Ney estimate's n1 and n2), followed term by term.
    """
    d1 = 0
    d2 = 0
    for i in range(terms.shape[0]):
        t = terms[i]
        exact_add(df_hi, df_lo, t, factors[i], spill_index, spill_value, spill_count)
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
                arena_slot, arena_cls, arena_count, term_start, term_length, term_capacity,
                ent_class, ent_term, ent_hi, ent_lo, ent_refs, free_stack,
                term_hi, term_lo, cls_entries, counters, spill_index, spill_value,
                spill_count, journal):  # pragma: no cover - compiled
    """Add ``pair_values[i]`` to entry (term, class) for i = first.. in order, creating missing entries.

    An entry is found by binary search in its term's region of the arena (kept
    sorted by class id). A new entry takes a freed slot (last freed first) or
    the next unused one and is inserted in order; a full region moves to the
    end of the arena with twice the capacity. Returns ``(status, i)``: DONE, or
    which array must grow before calling again from pair ``i`` (nothing of
    pair ``i`` has been applied then). Every slot changed is noted in ``journal``.
    """
    counting = arena_count.shape[0] > 0  # the arena keeps its count copy (once a model scores)
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
                    if counting:
                        arena_count[moved + k] = arena_count[start + k]
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
                if counting:
                    arena_count[start + k] = arena_count[start + k - 1]
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
        two_sum(ent_hi, ent_lo, s, x)
        if counting:
            arena_count[start + at] = ent_hi[s] + ent_lo[s]
        ent_refs[s] += 1
        exact_add(term_hi, term_lo, t, x, spill_index, spill_value, spill_count)
        _journal(journal, counters, s)
    return DONE, pair_terms.shape[0]


@njit(cache=True, nogil=True)
def remove_entries(pair_terms, pair_classes, pair_values,
                   arena_slot, arena_cls, arena_count, term_start, term_length,
                   ent_hi, ent_lo, ent_refs, free_stack,
                   term_hi, term_lo, cls_entries, cls_hi, cls_lo, counters, spill_index, spill_value,
                   spill_count, journal):  # pragma: no cover - compiled
    """Subtract what :func:`add_entries` added; an entry whose last document leaves is freed.

    A freed entry, a term without entries and a class without entries are
    reset to exactly zero, so round-off can never keep them alive (the caller
    drops the residuals of such terms and classes). The term mass is exact and
    needs no clamping. Every slot changed is noted in ``journal``.
    """
    counting = arena_count.shape[0] > 0
    for i in range(pair_terms.shape[0]):
        t = pair_terms[i]
        c = pair_classes[i]
        x = -pair_values[i]
        start = term_start[t]
        length = term_length[t]
        at = _find(arena_cls, start, length, c)
        s = arena_slot[start + at]
        _journal(journal, counters, s)
        two_sum(ent_hi, ent_lo, s, x)
        if ent_hi[s] + ent_lo[s] < 0.0:
            ent_hi[s] = 0.0
            ent_lo[s] = 0.0
        if counting:
            arena_count[start + at] = ent_hi[s] + ent_lo[s]
        exact_add(term_hi, term_lo, t, x, spill_index, spill_value, spill_count)
        ent_refs[s] -= 1
        if ent_refs[s] == 0:
            ent_hi[s] = 0.0
            ent_lo[s] = 0.0
            for k in range(at, length - 1):
                arena_slot[start + k] = arena_slot[start + k + 1]
                arena_cls[start + k] = arena_cls[start + k + 1]
                if counting:
                    arena_count[start + k] = arena_count[start + k + 1]
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
