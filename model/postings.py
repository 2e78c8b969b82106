"""The inverted index: per-term posting lists, computed lazily (MODEL.md sections 5, 7).

A posting list for term ``n`` holds ``(class id, w(class, n))`` for every
class that has counts of ``n``. Its skeleton (which classes) is the term's
region of the :class:`model.arena.TermArena`; this module keeps the weights,
a column parallel to the arena. The weights depend on the whole model
(background, label totals, decay scale), so any update makes every cached list
stale. Staleness costs nothing at update time: each term remembers the model
epoch its weights were computed at, and a list is recomputed only when a scored
document reads it and its epoch is old. Many documents scored between two
updates share one computation; a stream that alternates learning and scoring
pays one vectorized recomputation of the lists it reads. Fully discounted
entries keep a zero weight, which adds nothing to any score.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .loops.scoring import any_stale
from .loops.weights import WHOLE_MEMO, store_weights
from .arena import TermArena
from .arrays import distinct_sorted, grow

#: (stale term ids, their arena positions, entries per term) -> weights at those positions.
WeightBuilder = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


class PostingCache:
    """Posting weights aligned with a :class:`TermArena`, valid per term for one epoch.

    Attributes
    ----------
    recomputed : int
        Posting lists recomputed so far (a metric: what staleness cost).
    """

    def __init__(self) -> None:
        self.weight = np.zeros(0)
        self.computed_at = np.full(0, -1, dtype=np.int64)
        #: Per term, filled by builders that want it: ``log p_b(n)`` as of ``computed_at``
        #: (it changes with every update, like the postings, so it is cached with them).
        self.log_background = np.zeros(0)
        self.recomputed = 0
        # per arena position: C(l,n) - D(l,n) as of the count kept_count[p] and the discounts' numbers kept_values
        self.kept_count = np.zeros(0)
        self.kept_rest = np.zeros(0)
        self.kept_values: tuple | None = None
        self.last_values: tuple | None = None
        # per whole count below WHOLE_MEMO: k - D(k), valid in the refresh call numbered memo_call[k]
        self.memo_rest = np.zeros(WHOLE_MEMO)
        self.memo_call = np.full(WHOLE_MEMO, -1, dtype=np.int64)
        self.calls = 0
        # scratch of the compiled refresh: stale postings' ratios and their arena positions
        self.ratio = np.zeros(1024)
        self.position = np.zeros(1024, dtype=np.int64)

    def reserve(self, arena: TermArena) -> None:
        """Room for every arena position and term id."""
        if len(self.weight) < len(arena.slot):
            self.weight = grow(self.weight, len(arena.slot))
        if len(self.computed_at) < len(arena.start):
            old = len(self.computed_at)
            self.computed_at = grow(self.computed_at, len(arena.start))
            self.computed_at[old:] = -1
            self.log_background = grow(self.log_background, len(arena.start))

    def kept_discounts(self, positions: int, values: tuple, wanted: bool = True) -> tuple[bool, np.ndarray, np.ndarray]:
        """``(keep, kept_count, kept_rest)`` for :func:`model.loops.weights.posting_ratios`.

        The kept discounts hold for the numbers ``kept_values``. Numbers that
        move with every update (a Kneser-Ney delta) would make keeping them a
        pass over every arena position per update: they are not kept (``keep``
        false) until the same numbers come twice in a row, when the kept
        values are forgotten (NaN counts) and kept anew for them. Not ``wanted``
        (whole counts, which the refresh discounts once per call): nothing is kept
        and nothing allocated.
        """
        if not wanted:
            return False, self.kept_count, self.kept_rest
        last, self.last_values = self.last_values, values
        if values != self.kept_values:
            if values != last:
                return False, self.kept_count, self.kept_rest
            self.kept_count[:] = np.nan
            self.kept_values = values
        if len(self.kept_count) < positions:
            old = len(self.kept_count)
            self.kept_count = grow(self.kept_count, positions)
            self.kept_count[old:] = np.nan
            self.kept_rest = grow(self.kept_rest, positions)
        return True, self.kept_count, self.kept_rest

    def whole_count_memo(self) -> tuple[np.ndarray, np.ndarray, int]:
        """``(memo_rest, memo_call, call)`` for one call of :func:`model.loops.weights.posting_ratios`."""
        self.calls += 1
        return self.memo_rest, self.memo_call, self.calls

    def reserve_scratch(self, size: int) -> None:
        """Room for ``size`` stale postings in :attr:`ratio` / :attr:`position` (filled by the compiled
        :func:`model.loops.weights.posting_ratios`, then :meth:`store`)."""
        if size > len(self.ratio):
            self.ratio = np.zeros(max(size, 2 * len(self.ratio)))
            self.position = np.zeros(len(self.ratio), dtype=np.int64)

    def store(self, n: int, lists: int) -> None:
        """Weights ``max(log1p(ratio), 0)`` of the first ``n`` scratch postings (of ``lists`` terms), at their
        positions.

        Always numpy's vectorized ``log1p`` (several times faster per value than a compiled scalar call on
        large refreshes, ~0.7 us more on a refresh of 10 postings): the compiled scalar ``log1p`` differs from it
        in the last bit for ~4% of values on an AVX-512 machine, and taking it for small refreshes made a posting's
        weight depend on how many postings its refresh held, i.e. on when the model was read (a restored model,
        or a replica that scored other batches, held other bits; tw's steps parted). numpy's result does not
        depend on the length of the array or the element's place in it."""
        self.recomputed += lists
        ratio = self.ratio
        np.log1p(ratio[:n], out=ratio[:n])
        store_weights(ratio, self.position, n, self.weight)

    def refresh(self, arena: TermArena, terms: np.ndarray, epoch: int, build: WeightBuilder) -> None:
        """Recompute the posting lists of ``terms`` that are older than ``epoch`` (the lazy step)."""
        self.reserve(arena)
        if any_stale(self.computed_at, terms, epoch):  # compiled: the common answer is none
            stale = terms[self.computed_at[terms] != epoch]
            if len(stale) > 1:
                stale = distinct_sorted(stale)  # a batch may repeat terms
            stale_index, stale_lengths = arena.ranges(stale)
            self.weight[stale_index] = build(stale, stale_index, stale_lengths)
            self.computed_at[stale] = epoch
            self.recomputed += len(stale)

    def gather(self, arena: TermArena, terms: np.ndarray, epoch: int,
               build: WeightBuilder) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Postings of ``terms`` concatenated in order, recomputing stale lists first.

        Returns ``(class ids, weights, lengths)``, ``lengths[i]`` being the
        number of postings of ``terms[i]``.
        """
        self.refresh(arena, terms, epoch, build)
        index, lengths = arena.ranges(terms)
        return arena.cls[index], self.weight[index], lengths

    def stored_postings(self, arena: TermArena) -> int:
        return int(arena.length.sum())
