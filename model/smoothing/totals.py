"""Per-label totals of a count discount, kept up to date from the entries each update touched.

``D(l) = sum_n D(C(l, n))`` enters every label's smoothing weight ``a_l`` and
every posting's denominator, so it is needed after every update. A pass over
every (label, term) entry costs what the model holds; these keep the totals
from what changed (:meth:`model.state.CountState.changed_entries`), exactly
(the compiled loops and the reasoning are in :mod:`model.loops.discount_totals`):

=============================  ===================================  ==============================
discount setting               kept as                              cost of a read after an update
=============================  ===================================  ==============================
fixed ``delta`` (pd, ad)       :class:`SplitTotals`: per label, sums  the entries the update touched,
                               of the entries below / above the      plus those decay moved across
                               discount's threshold                  the threshold (a heap)
``delta="kn"``, no decay       :class:`HistogramTotals`: per label,  the touched entries, one ``D(v)``
                               stored value -> multiplicity          per distinct value, one step per
                                                                     (label, value) cell
``delta="kn"`` with decay      (none: the pass over every entry)     every entry
=============================  ===================================  ==============================

With ``kn`` under decay the discount's setting and every entry's true count
move with each update and stored counts are all distinct: no exact shortcut is
known, so the pass stays (``O(entries)`` per update; use a fixed delta in
streams). A full pass is also what any of them does first, after a decay
rebase, or when more changed than the state's journal holds.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from .contract import Discount
from ..arrays import SPILL, ExactArray, SpillBuffer
from ..loops.discount_totals import (ABSOLUTE, HEAP_SIZE, HIGH_COUNT, POWER, histogram_totals, histogram_update,
                                     split_rebuild, split_spill_room, split_totals, split_update)

if TYPE_CHECKING:  # pragma: no cover
    from ..state import CountState

KINDS = {"power": POWER, "absolute": ABSOLUTE}


def _grown(array: np.ndarray, size: int, fill) -> np.ndarray:
    if size <= len(array):
        return array
    bigger = np.full(max(size, 2 * len(array), 16), fill, dtype=array.dtype)
    bigger[: len(array)] = array
    return bigger


class _Follower:
    """What both schemes share: following one state's journal, and when to start over."""

    def __init__(self, kind: str) -> None:
        self.kind = KINDS[kind]
        self._token = object()  # identifies this reader to the state's journal
        self._state_id: int | None = None
        self._rebases = -1
        self._delta: float | None = None

    def _changes(self, state: "CountState", delta: float | None) -> np.ndarray | None:
        """The slots to bring up to date, or ``None`` for a pass over every entry."""
        changed = state.changed_entries(self._token)
        if self._state_id != id(state) or self._rebases != state.rebases or delta != self._delta:
            changed = None
        self._state_id, self._rebases, self._delta = id(state), state.rebases, delta
        return changed


class SplitTotals(_Follower):
    """``sum_n D(C(l, n))`` for a count discount with a fixed setting (pd, ad), kept from the touched entries.

    >>> from sgm.model import MNB
    >>> m = MNB("u_pd", delta=0.5)
    >>> m.learn_one({"a": 4.0, "b": 1.0}, "x", id="1"); m.learn_one({"a": 0.01}, "y", id="2")
    True
    True
    >>> SplitTotals("power").totals(m.state, 1.0, 2, 0.5).tolist()  # 0.5 * (4 ** 0.5 + 1 ** 0.5), min(0.01, ...)
    [1.5, 0.01]
    """

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.slot_class = np.full(0, -1, dtype=np.int32)
        self.slot_count = np.zeros(0)
        self.slot_g = np.zeros(0)
        self.slot_high = np.zeros(0, dtype=np.bool_)
        # exact sums (the residuals a pair cannot hold kept beside it): a label's stored counts may span
        # hundreds of binades under decay (model.loops.discount_totals)
        self.low = ExactArray()
        self.high = ExactArray()
        self._low_spill, self._high_spill = SpillBuffer(), SpillBuffer()
        self.heap_key = np.zeros(0)
        self.heap_slot = np.zeros(0, dtype=np.int64)
        self.meta = np.zeros(2, dtype=np.int64)

    def threshold(self, delta: float) -> float:
        """``x*``: the true count up to which the discount is the count itself."""
        if self.kind == ABSOLUTE:
            return delta
        if delta >= 1.0:
            return math.inf  # min(x, x): every entry is "low"
        if delta <= 0.0:
            return 0.0
        return delta ** (1.0 / (1.0 - delta))  # x <= delta x**delta  <=>  x**(1 - delta) <= delta

    def totals(self, state: "CountState", scale: float, n: int, delta: float) -> np.ndarray:
        """``sum_n D(C(l, n))`` (true units) for class ids below ``n``."""
        changed = self._changes(state, delta)
        cstar = self.threshold(delta) / scale  # in stored units: rises as time passes (scale falls)
        decaying = state.clock.half_life is not None
        self._reserve(len(state.ent_refs), state.classes.capacity)
        args = (state.ent_class, state.ent_refs, state.ent_count.hi, state.ent_count.lo, self.kind, delta, cstar,
                decaying, self.slot_class, self.slot_count, self.slot_g, self.slot_high, self.low.hi, self.low.lo,
                self.high.hi, self.high.lo)
        stale_heap = self.meta[HEAP_SIZE] > 2 * self.meta[HIGH_COUNT] + 4096
        updated = False
        if changed is not None and not stale_heap:
            room = split_spill_room(len(changed), int(self.meta[HEAP_SIZE]))
            updated = split_update(changed, *args, self.heap_key, self.heap_slot, self.meta,
                                   *self._low_spill.reserve(room), *self._high_spill.reserve(room))
        if not updated:  # a pass over every entry (what an unfinished update left is dropped with the rest)
            if decaying and len(self.heap_key) < state.ent_used:
                self.heap_key = np.zeros(2 * state.ent_used)
                self.heap_slot = np.zeros(2 * state.ent_used, dtype=np.int64)
            self.low.spill.clear()
            self.high.spill.clear()
            split_rebuild(state.ent_used, *args, self.heap_key, self.heap_slot, self.meta,
                          *self._low_spill.reserve(state.ent_used), *self._high_spill.reserve(state.ent_used))
        self.low.take_spill(self._low_spill)  # keeps the residuals, and settles hi + lo to the rounded exact sum
        self.high.take_spill(self._high_spill)
        coefficient = delta * scale**delta if self.kind == POWER else delta
        out = np.empty(n)
        split_totals(n, self.low.hi, self.low.lo, self.high.hi, self.high.lo, scale, coefficient, state.cls_entries,
                     out)
        return out

    def _reserve(self, slots: int, classes: int) -> None:
        if slots > len(self.slot_class):
            self.slot_class = _grown(self.slot_class, slots, -1)
            size = len(self.slot_class)
            self.slot_count = _grown(self.slot_count, size, 0.0)
            self.slot_g = _grown(self.slot_g, size, 0.0)
            self.slot_high = _grown(self.slot_high, size, False)
        self.low.grow(classes)
        self.high.grow(classes)

    def cache_arrays(self) -> tuple[np.ndarray, ...]:
        return (self.slot_class, self.slot_count, self.slot_g, self.slot_high, self.low.hi, self.low.lo, self.high.hi,
                self.high.lo, self.heap_key, self.heap_slot)


class HistogramTotals(_Follower):
    """``sum_n D(C(l, n))`` for a setting that moves with every update (``kn``), without decay.

    Per label, the multiplicity of each stored value; a read costs one ``D(v)``
    per distinct value and one multiply-add per (label, value) cell.

    >>> from sgm.model import MNB
    >>> m = MNB("u_ad", delta="kn")
    >>> m.learn_one({"a": 2.0, "b": 1.0, "c": 1.0}, "x", id="1")
    True
    >>> HistogramTotals("absolute").totals(m.state, 1.0, 1, 0.5).tolist()  # min(0.5, 2) + 2 min(0.5, 1)
    [1.5]
    """

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.slot_class = np.full(0, -1, dtype=np.int32)
        self.slot_count = np.zeros(0)
        self._tables(1024, 4096)

    def _tables(self, values: int, cells: int) -> None:
        values, cells = (1 << (n - 1).bit_length() for n in (values, cells))  # open addressing masks: powers of two
        self.value_table = np.full(2 * values, -1, dtype=np.int64)
        self.value_key = np.zeros(values, dtype=np.int64)
        self.value_of = np.zeros(values)
        self.cell_table = np.full(2 * cells, -1, dtype=np.int64)
        self.cell_key = np.zeros(cells, dtype=np.int64)
        self.cell_class = np.zeros(cells, dtype=np.int64)
        self.cell_value = np.zeros(cells, dtype=np.int64)
        self.cell_mult = np.zeros(cells, dtype=np.int64)
        self.meta = np.zeros(2, dtype=np.int64)
        self.live_cells = 0

    def totals(self, state: "CountState", scale: float, n: int, delta: float) -> np.ndarray:
        """``sum_n D(C(l, n))`` (true units) for class ids below ``n``."""
        changed = self._changes(state, None)  # delta moves freely: the cells do not depend on it
        if len(self.slot_class) < len(state.ent_refs):
            self.slot_class = _grown(self.slot_class, len(state.ent_refs), -1)
            self.slot_count = _grown(self.slot_count, len(self.slot_class), 0.0)
        tables = (self.value_table, self.value_key, self.value_of, self.cell_table, self.cell_key, self.cell_class,
                  self.cell_value, self.cell_mult, self.meta)
        entries = (state.ent_class, state.ent_refs, state.ent_count.hi, state.ent_count.lo, self.slot_class,
                   self.slot_count)
        garbage = self.meta[1] > 4 * self.live_cells + 4096
        if changed is None or garbage or not histogram_update(changed, *entries, *tables):
            self._rebuild(state)
        totals = ExactArray(max(n, 1))  # exact: the same sum whatever the cells' order
        histogram_totals(self.meta[0], self.meta[1], self.value_of, self.cell_class, self.cell_value, self.cell_mult,
                         self.kind, delta, scale, totals.hi, totals.lo, *SPILL.reserve(int(self.meta[1])))
        totals.take_spill(SPILL)
        self.live_cells = int(np.count_nonzero(self.cell_mult[: self.meta[1]]))
        return totals.get(slice(0, n))

    def _rebuild(self, state: "CountState") -> None:
        """Every live entry into fresh tables, sized for what the state holds."""
        used = state.ent_used
        live = np.flatnonzero(state.ent_refs[:used] > 0)
        values, value_ids = np.unique(state.ent_count.get(live), return_inverse=True)
        cells = len(np.unique((state.ent_class[live].astype(np.int64) << 32) | value_ids)) if len(live) else 0
        self._tables(max(1024, 2 * len(values)), max(4096, 2 * cells))
        self.slot_class[:] = -1
        everything = np.arange(used, dtype=np.int64)
        entries = (state.ent_class, state.ent_refs, state.ent_count.hi, state.ent_count.lo, self.slot_class,
                   self.slot_count)
        ok = histogram_update(everything, *entries, self.value_table, self.value_key, self.value_of, self.cell_table,
                              self.cell_key, self.cell_class, self.cell_value, self.cell_mult, self.meta)
        assert ok, "the tables were sized for every entry"

    def cache_arrays(self) -> tuple[np.ndarray, ...]:
        return (self.slot_class, self.slot_count, self.value_table, self.value_key, self.value_of, self.cell_table,
                self.cell_key, self.cell_class, self.cell_value, self.cell_mult)


class CountDiscount(Discount):
    """A discount of the count itself below a threshold and a function of it above (pd, ad), whose
    per-label totals are kept from the touched entries (:class:`SplitTotals`, :class:`HistogramTotals`)."""

    #: the form the compiled totals compute ("power": ``delta x**delta`` above, "absolute": ``delta``)
    totals_kind: ClassVar[str] = ""

    def __init__(self, setting: Any) -> None:
        super().__init__(setting)
        self._totals: SplitTotals | HistogramTotals | None = None

    def head_totals(self, state: "CountState", scale: float, n: int, value: float) -> np.ndarray | None:
        if self.follows_counts and state.clock.half_life is not None:
            return None  # kn under decay: the pass over every entry (see the module docstring)
        if self._totals is None:
            self._totals = HistogramTotals(self.totals_kind) if self.follows_counts else SplitTotals(self.totals_kind)
        return self._totals.totals(state, scale, n, value)

    def cache_arrays(self) -> tuple[np.ndarray, ...]:
        return () if self._totals is None else self._totals.cache_arrays()
