"""The term arena: the entries of each term in one contiguous, class-sorted region (the inverted
index's skeleton). Inserts and removals run in the compiled loops of :mod:`model.loops.entries`."""
from __future__ import annotations

import numpy as np

from .arrays import grow


class TermArena:
    """The entries of each term, contiguous in one array (the inverted index's skeleton).

    Term ``n`` owns ``slot[start[n] : start[n] + length[n]]`` (entry slots) and
    the parallel ``cls`` (their class ids) and ``count`` (a copy of each entry's
    stored count ``hi + lo``, kept by the entry loops once :meth:`copy_counts`
    started it, i.e. once the model scores: reading the counts of a term's
    entries then walks one region instead of looking up each slot, which at a
    million entries are cache misses), sorted by class id: an entry is
    found by binary search, so no hash table of entries is needed. Each
    region has spare capacity that doubles when full (the region then moves to
    the end), so inserts are amortized cheap and reading the entries of many
    terms is a few vectorized gathers. Abandoned regions are garbage until
    :meth:`compact` runs. Inserts and removals happen in the compiled
    loops of :mod:`model.loops.entries`.

    >>> arena = TermArena()
    >>> arena.reserve_terms(3)
    >>> arena.grow_arena(8)
    >>> arena.start[:3], arena.length[:3], arena.capacity[:3] = [0, 4, 4], [1, 0, 2], [4, 0, 4]
    >>> arena.slot[[0, 4, 5]], arena.cls[[0, 4, 5]] = [11, 10, 12], [6, 5, 7]
    >>> arena.used = 8
    >>> index, lengths = arena.ranges(np.array([2, 1, 0]))
    >>> arena.slot[index].tolist(), lengths.tolist()
    ([10, 12, 11], [2, 0, 1])
    """

    def __init__(self) -> None:
        self.slot = np.zeros(0, dtype=np.int64)
        self.cls = np.zeros(0, dtype=np.int32)
        self.count = np.zeros(0)
        self.start = np.zeros(0, dtype=np.int64)
        self.length = np.zeros(0, dtype=np.int64)
        self.capacity = np.zeros(0, dtype=np.int64)
        self.used = 0
        self.garbage = 0
        self.version = 0  # changes whenever regions move

    def reserve_terms(self, count: int) -> None:
        if count > len(self.start):
            self.start = grow(self.start, count)
            self.length = grow(self.length, count)
            self.capacity = grow(self.capacity, count)

    def ranges(self, terms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Arena positions of the entries of ``terms`` (concatenated in order) and their lengths."""
        lengths = self.length[terms]
        total = int(lengths.sum())
        ends = np.cumsum(lengths)
        return np.repeat(self.start[terms] - (ends - lengths), lengths) + np.arange(total), lengths

    def _allocate(self, size: int) -> int:
        at = self.used
        self.used += size
        if self.used > len(self.slot):
            self.slot = grow(self.slot, self.used)
            self.cls = grow(self.cls, self.used)
            if len(self.count):
                self.count = grow(self.count, len(self.slot))
        return at

    def release(self, term: int) -> None:
        """Give up the region of a term that left the model (its id may be reused with no region)."""
        assert self.length[term] == 0, "only an empty region is released"
        self.garbage += int(self.capacity[term])
        self.start[term] = 0
        self.capacity[term] = 0

    def grow_arena(self, size: int) -> None:
        if size > len(self.slot):
            self.slot = grow(self.slot, size)
            self.cls = grow(self.cls, len(self.slot))
            if len(self.count):
                self.count = grow(self.count, len(self.slot))

    @property
    def counting(self) -> bool:
        """Whether :attr:`count` is kept (empty until :meth:`copy_counts`: a model that only learns
        does not pay 8 bytes per arena position for it)."""
        return len(self.count) > 0

    def copy_counts(self, hi: np.ndarray, lo: np.ndarray) -> None:
        """Set :attr:`count` of every live entry from the entry tables (to start keeping it, or after a
        restore or a rescale); from then on the entry loops keep it."""
        terms = np.flatnonzero(self.length)
        index, _ = self.ranges(terms)
        self.count = np.zeros(max(len(self.slot), 1))
        slots = self.slot[index]
        self.count[index] = hi[slots] + lo[slots]

    def compact(self) -> None:
        """Repack every term's region (capacity = max(4, length)), dropping garbage."""
        terms = np.flatnonzero(self.capacity)
        old_index, lengths = self.ranges(terms)
        capacity = np.maximum(4, lengths)
        capacity[lengths == 0] = 0
        starts = np.cumsum(capacity) - capacity
        new_index = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(len(old_index))
        slot = np.zeros(int(capacity.sum()), dtype=np.int64)
        cls = np.zeros(len(slot), dtype=np.int32)
        slot[new_index] = self.slot[old_index]
        cls[new_index] = self.cls[old_index]
        if self.counting:
            count = np.zeros(max(len(slot), 1))
            count[new_index] = self.count[old_index]
            self.count = count
        self.slot, self.cls = slot, cls
        self.start[terms] = starts
        self.capacity[terms] = capacity
        self.start[self.capacity == 0] = 0
        self.used = len(slot)
        self.garbage = 0
        self.version += 1
