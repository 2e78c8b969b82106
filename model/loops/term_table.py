"""The compiled vocabulary's hash table (:class:`model.lexicon.TermLexicon`): one 32-byte row per slot.

A row is ``(hash bits, term id, start << 24 | length of its bytes, counting mark)``:
finding a token, locating its bytes for the exact comparison and counting it in the
document read one row (one cache miss), then the bytes. Term ids, where each term's
bytes are and its hash are also kept per term id (``location``, ``term_hash``) for
unfiling. Rows are filed, found, counted, unfiled and regrown here; the tokenizing
passes that use them are in :mod:`model.lexicon`.
"""
from __future__ import annotations

import numpy as np
from numba import njit

FNV_OFFSET = np.uint64(0xCBF29CE484222325)
FNV_PRIME = np.uint64(0x100000001B3)
EMPTY, DELETED = -1, -2  # a slot's term id: never filed; filed, then removed


@njit(cache=True, nogil=True)
def delete_row(slots, h, term):  # pragma: no cover - compiled
    mask = slots.shape[0] - 1
    at = np.int64(h & np.uint64(mask))
    while slots[at, 1] != EMPTY:
        if slots[at, 1] == term:
            slots[at, 1] = DELETED
            return
        at = (at + 1) & mask


#: The packed length of a term this long or longer: its length is read from the term's ``location`` row.
LONG_TERM = (1 << 24) - 1
ROW_MASK = (1 << 32) - 1  # a counting mark's output row: its low 32 bits


@njit(cache=True, nogil=True)
def file_row(slots, h, term, start, length):  # pragma: no cover - compiled
    """File ``term`` (hash ``h``, bytes ``term_bytes[start : start + length]``) in a free slot row.

    A row is ``(hash bits, term id, start << 24 | length, counting mark)``: one 32-byte read finds,
    locates and counts a token (the caller keeps the table at most half full: an empty slot exists).
    """
    mask = slots.shape[0] - 1
    at = np.int64(h & np.uint64(mask))
    while slots[at, 1] != EMPTY:  # deleted slots are not reused: they go at the next rebuild
        at = (at + 1) & mask
    slots[at, 0] = np.int64(h)
    slots[at, 1] = term
    slots[at, 2] = (start << 24) | min(length, LONG_TERM)
    slots[at, 3] = -1


@njit(cache=True, nogil=True)
def find_row(slots, term_bytes, location, h, buf, starts, ends, first, n):  # pragma: no cover
    """Slot row of the term equal to words ``first .. first + n - 1`` of ``buf`` joined by spaces, or -1.

    The row holds where the term's bytes are (:func:`file_row`); only a term of ``LONG_TERM`` bytes or
    more reads its length from ``location``.
    """
    length = n - 1
    for j in range(first, first + n):
        length += ends[j] - starts[j]
    mask = slots.shape[0] - 1
    at = np.int64(h & np.uint64(mask))
    key = np.int64(h)
    while slots[at, 1] != EMPTY:
        if slots[at, 1] >= 0 and slots[at, 0] == key:
            packed = slots[at, 2]
            filed = packed & LONG_TERM
            if filed == LONG_TERM:
                filed = location[slots[at, 1], 1]
            if filed == length:
                p = packed >> 24
                same = True
                for j in range(first, first + n):
                    if j > first:
                        if term_bytes[p] != 32:
                            same = False
                            break
                        p += 1
                    for i in range(starts[j], ends[j]):
                        if term_bytes[p] != buf[i]:
                            same = False
                            break
                        p += 1
                    if not same:
                        break
                if same:
                    return at
        at = (at + 1) & mask
    return -1


@njit(cache=True, nogil=True, inline="always")
def count_row(slots, at, d, serial, out_owner, out_terms, out_counts, n_out):  # pragma: no cover - compiled
    """Count one occurrence of the term in slot row ``at`` in document ``d``; returns the number of rows.

    The row's mark is ``serial << 32 | output row`` of the last document that counted it.
    """
    mark = slots[at, 3]
    if (mark >> 32) == serial:
        out_counts[mark & ROW_MASK] += 1.0
        return n_out
    slots[at, 3] = (serial << 32) | n_out
    out_owner[n_out] = d
    out_terms[n_out] = slots[at, 1]
    out_counts[n_out] = 1.0
    return n_out + 1


@njit(cache=True, nogil=True)
def regrown(slots, size):  # pragma: no cover - compiled
    """The filed rows of ``slots`` in a new table of ``size`` slots (deleted slots dropped, marks reset)."""
    table = np.zeros((size, 4), dtype=np.int64)
    table[:, 1] = EMPTY
    mask = size - 1
    for row in range(slots.shape[0]):
        if slots[row, 1] >= 0:
            at = np.int64(np.uint64(slots[row, 0]) & np.uint64(mask))
            while table[at, 1] != EMPTY:
                at = (at + 1) & mask
            table[at, 0] = slots[row, 0]
            table[at, 1] = slots[row, 1]
            table[at, 2] = slots[row, 2]
            table[at, 3] = -1
    return table


@njit(cache=True, nogil=True)
def file_terms(slots, term_bytes, at, term_hash, location, ids, blob, lengths):  # pragma: no cover - compiled
    """File term ``ids[k]`` (the k-th run of ``lengths[k]`` bytes of ``blob``) at ``term_bytes[at:]`` and in the table."""
    p = 0
    for k in range(ids.shape[0]):
        t = ids[k]
        n = lengths[k]
        h = FNV_OFFSET
        for i in range(n):
            b = blob[p + i]
            term_bytes[at + i] = b
            h = (h ^ np.uint64(b)) * FNV_PRIME
        location[t, 0] = at
        location[t, 1] = n
        term_hash[t] = h
        file_row(slots, h, t, at, n)
        p += n
        at += n


@njit(cache=True, nogil=True)
def unfile_terms(slots, term_hash, location, ids):  # pragma: no cover - compiled
    """Take the filed terms among ``ids`` out of the table; returns (how many, their bytes)."""
    removed = 0
    garbage = 0
    for k in range(ids.shape[0]):
        t = ids[k]
        if location[t, 1] >= 0:
            delete_row(slots, term_hash[t], t)
            garbage += location[t, 1]
            location[t, 1] = -1
            removed += 1
    return removed, garbage
