"""Compiled upkeep of per-label discount totals ``D(l) = sum_n D(C(l, n))`` from the entries an update touched.

Two exact schemes (the Python side is :mod:`model.smoothing.totals`):

**Split sums** (a count discount with a fixed setting: ``pd``, ``ad``). With the
true count ``x = c * scale`` of a stored count ``c``, the discount is ``x`` below a
threshold ``x*`` and ``delta * x**delta`` (pd) or ``delta`` (ad) above it. So
per label two sums of stored values suffice, ``low(l) = sum c`` over the entries
at or below ``c* = x* / scale`` and ``high(l) = sum g(c)`` over the others
(``g(c) = c**delta`` for pd, 1 for ad), and ``D(l) = scale * low(l) + delta *
scale**delta * high(l)`` (pd) or ``scale * low(l) + delta * high(l)`` (ad). An
update moves only the entries it touched; as time passes ``scale`` falls, ``c*``
rises and entries cross from high to low only, found in a min-heap of the high
entries by stored count (stale heap items are skipped when popped).

**Histogram** (a setting that moves with the counts: ``delta="kn"``, no decay).
Each update may change ``delta`` and with it every entry's discount, but stored
counts repeat (raw counts are integers): per label the multiplicity of each
stored value, ``D(l) = sum_v m(l, v) D(v)``, costs one ``D(v)`` per distinct
value and one multiply-add per (label, value) cell.

The split sums are exact (:func:`.sums.exact_add`: a residual the pair cannot hold goes to the spill
buffers, kept by the caller's :class:`model.arrays.ExactArray`): under decay the stored counts of one
label span hundreds of binades (an entry of a document 120 half-lives older than the others weighs
2**-120 of them), and a compensated pair that took in the rounding errors of the large ones lost the
small rest once those left again (a label left with only old documents read ``D(l) = 0``). The
histogram's cells are summed exactly at each read.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .sums import exact_add

# meta array of the split scheme: heap size, high entries
HEAP_SIZE, HIGH_COUNT = 0, 1
# the count discount of the split scheme
POWER, ABSOLUTE = 0, 1


@njit(cache=True, nogil=True, inline="always")
def _g(kind, c, delta):  # pragma: no cover - compiled
    return c ** delta if kind == POWER else 1.0


@njit(cache=True, nogil=True)
def _heap_push(key, slot, size, k, s):  # pragma: no cover - compiled
    at = size
    while at > 0:
        parent = (at - 1) >> 1
        if key[parent] <= k:
            break
        key[at] = key[parent]
        slot[at] = slot[parent]
        at = parent
    key[at] = k
    slot[at] = s
    return size + 1


@njit(cache=True, nogil=True)
def _sift_down(key, slot, at, k, s, size):  # pragma: no cover - compiled
    """Place the item ``(k, s)`` at ``at`` or below it in a min-heap of ``size`` items."""
    while True:
        child = 2 * at + 1
        if child >= size:
            break
        if child + 1 < size and key[child + 1] < key[child]:
            child += 1
        if key[child] >= k:
            break
        key[at] = key[child]
        slot[at] = slot[child]
        at = child
    key[at] = k
    slot[at] = s


@njit(cache=True, nogil=True)
def _heap_pop(key, slot, size):  # pragma: no cover - compiled
    """Remove the root of a heap of ``size`` items; returns the new size."""
    size -= 1
    if size > 0:
        _sift_down(key, slot, 0, key[size], slot[size], size)
    return size


@njit(cache=True, nogil=True)
def split_rebuild(used, ent_class, ent_refs, ent_hi, ent_lo, kind, delta, cstar, decaying, slot_class, slot_count,
                  slot_g, slot_high, low_hi, low_lo, high_hi, high_lo, heap_key, heap_slot,
                  meta, low_spill_index, low_spill_value, low_spill_count, high_spill_index, high_spill_value,
                  high_spill_count):  # pragma: no cover - compiled
    """The split sums from scratch: every live slot below ``used``, in slot order (the heap arrays must hold ``used``,
    each spill buffer ``used`` residuals)."""
    low_hi[:] = 0.0
    low_lo[:] = 0.0
    high_hi[:] = 0.0
    high_lo[:] = 0.0
    size = 0
    high = 0
    for s in range(used):
        c = ent_hi[s] + ent_lo[s]
        if ent_refs[s] <= 0 or c <= 0.0:
            slot_class[s] = -1
            continue
        klass = ent_class[s]
        slot_class[s] = klass
        slot_count[s] = c
        if c > cstar:
            g = _g(kind, c, delta)
            slot_g[s] = g
            slot_high[s] = True
            exact_add(high_hi, high_lo, klass, g, high_spill_index, high_spill_value, high_spill_count)
            high += 1
            if decaying:
                heap_key[size] = c  # heapified below
                heap_slot[size] = s
                size += 1
        else:
            slot_high[s] = False
            exact_add(low_hi, low_lo, klass, c, low_spill_index, low_spill_value, low_spill_count)
    # heapify (sift down from the last parent)
    for root in range(size // 2 - 1, -1, -1):
        _sift_down(heap_key, heap_slot, root, heap_key[root], heap_slot[root], size)
    meta[HEAP_SIZE] = size
    meta[HIGH_COUNT] = high


@njit(cache=True, nogil=True)
def split_update(changed, ent_class, ent_refs, ent_hi, ent_lo, kind, delta, cstar, decaying, slot_class, slot_count,
                 slot_g, slot_high, low_hi, low_lo, high_hi, high_lo, heap_key, heap_slot,
                 meta, low_spill_index, low_spill_value, low_spill_count, high_spill_index, high_spill_value,
                 high_spill_count):  # pragma: no cover - compiled
    """Bring the split sums up to date: the ``changed`` slots, then the entries ``c*`` has passed.

    Returns False when the heap has no room for the items this update pushes
    (nothing is lost: the caller grows it and rebuilds). Each spill buffer must hold
    ``2 len(changed) + heap size`` residuals (:func:`split_spill_room`).
    """
    size = meta[HEAP_SIZE]
    high = meta[HIGH_COUNT]
    for i in range(changed.shape[0]):
        s = changed[i]
        c = ent_hi[s] + ent_lo[s]
        klass = ent_class[s] if (ent_refs[s] > 0 and c > 0.0) else -1
        old = slot_class[s]
        if old == klass and old >= 0 and slot_count[s] == c:
            continue  # listed again, or changed back: nothing to do
        if old >= 0:
            if slot_high[s]:
                exact_add(high_hi, high_lo, old, -slot_g[s], high_spill_index, high_spill_value, high_spill_count)
                high -= 1
            else:
                exact_add(low_hi, low_lo, old, -slot_count[s], low_spill_index, low_spill_value, low_spill_count)
        slot_class[s] = klass
        if klass < 0:
            continue
        slot_count[s] = c
        if c > cstar:
            g = _g(kind, c, delta)
            slot_g[s] = g
            slot_high[s] = True
            exact_add(high_hi, high_lo, klass, g, high_spill_index, high_spill_value, high_spill_count)
            high += 1
            if decaying:
                if size >= heap_key.shape[0]:
                    meta[HEAP_SIZE] = size
                    meta[HIGH_COUNT] = high
                    return False
                size = _heap_push(heap_key, heap_slot, size, c, s)
        else:
            slot_high[s] = False
            exact_add(low_hi, low_lo, klass, c, low_spill_index, low_spill_value, low_spill_count)
    # time passed: entries at or below the risen threshold move from high to low
    while size > 0 and heap_key[0] <= cstar:
        c = heap_key[0]
        s = heap_slot[0]
        size = _heap_pop(heap_key, heap_slot, size)
        klass = slot_class[s]
        if klass >= 0 and slot_high[s] and slot_count[s] == c:  # else a stale item: the slot changed since
            exact_add(high_hi, high_lo, klass, -slot_g[s], high_spill_index, high_spill_value, high_spill_count)
            exact_add(low_hi, low_lo, klass, c, low_spill_index, low_spill_value, low_spill_count)
            slot_high[s] = False
            high -= 1
    meta[HEAP_SIZE] = size
    meta[HIGH_COUNT] = high
    return True


def split_spill_room(changed: int, heap_size: int) -> int:
    """Residuals one :func:`split_update` may leave in each spill buffer: a changed slot leaves its old sum and
    joins its new one (2 exact additions, at most one residual each), each heap item popped (those there before
    and those the changed slots push) moves from one sum to the other (1 each)."""
    return 3 * changed + heap_size


@njit(cache=True, nogil=True)
def split_totals(n, low_hi, low_lo, high_hi, high_lo, scale, coefficient, cls_entries, out):  # pragma: no cover
    """``out[l] = scale * low(l) + coefficient * high(l)`` for class ids below ``n``; exactly 0 for a class
    without entries (not a round-off residue)."""
    for c in range(n):
        if cls_entries[c] == 0:
            out[c] = 0.0
        else:
            out[c] = scale * (low_hi[c] + low_lo[c]) + coefficient * (high_hi[c] + high_lo[c])


# ------------------------------------------------------------------ histogram
_EMPTY = -1


@njit(cache=True, nogil=True)
def _probe(table, keys, key):  # pragma: no cover - compiled
    """Position of ``key`` in an open-addressing table (``table[pos]`` is -1 if absent)."""
    mask = table.shape[0] - 1
    h = np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)
    at = np.int64(h >> np.uint64(20)) & mask
    while table[at] != _EMPTY and keys[table[at]] != key:
        at = (at + 1) & mask
    return at


@njit(cache=True, nogil=True)
def histogram_update(changed, ent_class, ent_refs, ent_hi, ent_lo, slot_class, slot_count, value_table, value_key,
                     value_of, cell_table, cell_key, cell_class, cell_value, cell_mult, meta):  # pragma: no cover
    """Move the ``changed`` slots between (label, stored value) cells.

    ``meta = [values, cells]`` in use. Values and cells are never removed (a
    cell may drop to multiplicity 0); returns False when a table would pass
    half full (the caller rebuilds larger; nothing of this call is lost as the
    slot being moved is left as it was).
    """
    n_values = meta[0]
    n_cells = meta[1]
    bits_of = np.empty(1)  # a float's bits, through an array view
    as_bits = bits_of.view(np.int64)
    for i in range(changed.shape[0]):
        s = changed[i]
        c = ent_hi[s] + ent_lo[s]
        klass = ent_class[s] if (ent_refs[s] > 0 and c > 0.0) else -1
        old = slot_class[s]
        if old == klass and old >= 0 and slot_count[s] == c:
            continue
        if klass >= 0:
            # find or add the value and the cell first (may need room), then move the slot
            bits_of[0] = c
            bits = as_bits[0]
            at = _probe(value_table, value_key, bits)
            if value_table[at] == _EMPTY:
                if 2 * (n_values + 1) > value_table.shape[0] or n_values >= value_key.shape[0]:
                    meta[0] = n_values
                    meta[1] = n_cells
                    return False
                value_key[n_values] = bits
                value_of[n_values] = c
                value_table[at] = n_values
                n_values += 1
            v = value_table[at]
            key = (np.int64(klass) << 32) | v
            at = _probe(cell_table, cell_key, key)
            if cell_table[at] == _EMPTY:
                if 2 * (n_cells + 1) > cell_table.shape[0] or n_cells >= cell_key.shape[0]:
                    meta[0] = n_values
                    meta[1] = n_cells
                    return False
                cell_key[n_cells] = key
                cell_class[n_cells] = klass
                cell_value[n_cells] = v
                cell_mult[n_cells] = 0
                cell_table[at] = n_cells
                n_cells += 1
            cell_mult[cell_table[at]] += 1
        if old >= 0:
            bits_of[0] = slot_count[s]
            bits = as_bits[0]
            v = value_table[_probe(value_table, value_key, bits)]
            cell_mult[cell_table[_probe(cell_table, cell_key, (np.int64(old) << 32) | v)]] -= 1
        slot_class[s] = klass
        slot_count[s] = c
    meta[0] = n_values
    meta[1] = n_cells
    return True


@njit(cache=True, nogil=True)
def histogram_totals(n_values, n_cells, value_of, cell_class, cell_value, cell_mult, kind, delta, scale,
                     out, out_lo, spill_index, spill_value, spill_count):  # pragma: no cover - compiled
    """``out[l] + out_lo[l] += sum_v m(l, v) D(v * scale)`` exactly (residuals in the spill buffers), with
    ``D(x) = min(x, delta x**delta)`` (pd) or ``min(delta, x)`` (ad).

    Exact because the cells are met in the order they were created, which follows when the state was read
    (and a rebuild creates them in value order): a rounded sum would depend on that order in its last bits.
    """
    discount = np.empty(n_values)
    for v in range(n_values):
        x = value_of[v] * scale
        if kind == POWER:
            discount[v] = min(x, delta * x ** delta)
        else:
            discount[v] = min(delta, x)
    for j in range(n_cells):
        m = cell_mult[j]
        if m > 0:
            exact_add(out, out_lo, cell_class[j], m * discount[cell_value[j]], spill_index, spill_value, spill_count)
