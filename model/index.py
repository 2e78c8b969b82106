"""The inverted index: per-term posting lists, computed lazily (MODEL.md sections 5, 7).

A posting list for term ``n`` holds ``(class id, w(class, n))`` for every
class whose discounted count of ``n`` is positive. The weights depend on the
whole model (background, label totals, decay scale), so any update makes
every cached list stale. Staleness costs nothing at update time: each list
remembers the model epoch it was computed at, and a list is recomputed only
when a scored document reads it and its epoch is old. Many documents scored
between two updates share one computation; a stream that alternates learning
and scoring pays one vectorized recomputation of the lists it reads.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .state import grow

#: (stale term ids) -> (class ids, weights, lengths per term), concatenated in term order.
PostingBuilder = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]

_EMPTY_IDS = np.zeros(0, dtype=np.int32)
_EMPTY_WEIGHTS = np.zeros(0)


class PostingCache:
    """Posting lists by term id, each valid for the epoch it was computed at.

    Attributes
    ----------
    recomputed : int
        Posting lists recomputed so far (a metric: how much staleness cost).
    """

    def __init__(self) -> None:
        self.computed_at = np.full(0, -1, dtype=np.int64)
        self.lengths = np.zeros(0, dtype=np.int64)
        self.ids: list[np.ndarray] = []
        self.weights: list[np.ndarray] = []
        self.recomputed = 0

    def clear(self) -> None:
        self.__init__()

    def _reserve(self, size: int) -> None:
        if size > len(self.computed_at):
            old = len(self.computed_at)
            self.computed_at = grow(self.computed_at, size)
            self.computed_at[old:] = -1
            self.lengths = grow(self.lengths, size)
            extra = len(self.computed_at) - len(self.ids)
            self.ids.extend([_EMPTY_IDS] * extra)
            self.weights.extend([_EMPTY_WEIGHTS] * extra)

    def gather(self, terms: np.ndarray, epoch: int, build: PostingBuilder) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Concatenated postings of ``terms`` (in order), recomputing stale lists first.

        Returns ``(class ids, weights, lengths)`` where ``lengths[i]`` is the
        number of postings of ``terms[i]``.
        """
        if len(terms) == 0:
            return _EMPTY_IDS, _EMPTY_WEIGHTS, np.zeros(0, dtype=np.int64)
        top = int(terms.max()) + 1
        if top > len(self.computed_at):
            self._reserve(top)
        stale = terms[self.computed_at[terms] != epoch]
        if len(stale):
            stale = np.unique(stale)
            ids, weights, lengths = build(stale)
            self.recomputed += len(stale)
            bounds = np.cumsum(lengths)[:-1]
            for term, term_ids, term_weights in zip(stale.tolist(), np.split(ids, bounds), np.split(weights, bounds)):
                self.ids[term] = term_ids.copy()
                self.weights[term] = term_weights.copy()
            self.lengths[stale] = lengths
            self.computed_at[stale] = epoch
        term_list = terms.tolist()
        ids_list, weights_list = self.ids, self.weights
        return (
            np.concatenate([ids_list[t] for t in term_list]),
            np.concatenate([weights_list[t] for t in term_list]),
            self.lengths[terms],
        )

    def stored_postings(self) -> int:
        return int(sum(len(a) for a in self.ids))
