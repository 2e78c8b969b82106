"""Model-based feedback (the ``fb`` affix): score a document, then score it again with its weights mixed
with the word distributions of its top labels.

Pseudo-relevance feedback as in KL-divergence retrieval (Zhai and Lafferty 2001; the thesis's KL section
and its LSHTC4 solution, which used it as "model-based feedback"). A first pass gives the posteriors
``p(l|w)``; the ``K`` most probable labels (``fb_labels``), weighted by their posteriors renormalized over
them (``pi_k``), give the feedback distribution::

    f(n)   = sum_k pi_k p_k(n),       p_l(n) = C(l, n) / C(l)   (the label's own counts, decayed)
    f~(n)  = f(n) / sum_{n' in F} f(n')   over F: the N terms of largest f (``fb_terms``)
    w'_n   = (1 - lambda) w_n + lambda |w|_1 f~(n)                                 (``fb_lambda``)

and the second pass scores ``w'`` with the same scoring kernel, the query term weights (``fw``) applied to
``w'`` as they are to ``w``. ``w'`` keeps the document's mass ``|w|_1``, so the prior and the posterior's
sharpness keep their scale; keeping only ``N`` feedback terms keeps it sparse: ``w'`` holds at most
``N`` terms more than ``w``. With ``lambda = 0`` there is no second pass: the scores are the first pass's.

Cost: per document, one pass over the ``K`` labels' entries (the label-major copy of the count tables
below, rebuilt after an update, once per epoch) plus a second scoring pass.

>>> from sgm.model import MNB
>>> m = MNB("u_jm_fb", beta=0.5, fb_lambda=0.5, fb_labels=1, fb_terms=2)
>>> m.learn_many(["cheap pills cheap", "monday meeting notes"], ["spam", "ham"])
2
>>> doc = m.feedback_documents(["pills now"])[0]
>>> doc.labels  # the top label, its weight renormalized over the top labels
[('spam', 1.0)]
>>> sorted(doc.weights.items())  # |w|_1 = 1; p_spam: cheap 2/3, pills 1/3; w' = 0.5 w + 0.5 f~
[('cheap', 0.3333333333333333), ('pills', 0.6666666666666666)]
>>> round(m.predict_proba_one("pills now")["spam"], 3)  # the second pass: w' scored by the same kernel
0.758
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .batch import PreparedBatch
from .loops.feedback import feedback_documents


class FeedbackDocument(NamedTuple):
    """One document's second pass: its labels with their weights ``pi_k``, and its term weights ``w'``
    (before the query term weights ``fw``)."""

    labels: list[tuple[object, float]]
    weights: dict[str, float]


class LabelTerms:
    """Each class's terms and ``p_l(n) = C(l, n) / C(l)``, label-major (ascending term id), for one epoch."""

    __slots__ = ("epoch", "row_ptr", "row_term", "row_prob")

    def __init__(self, state) -> None:
        self.epoch = state.epoch
        used = state.ent_used
        slots = np.flatnonzero(state.ent_refs[:used] > 0)
        classes = state.ent_class[slots].astype(np.int64)
        terms = state.ent_term[slots].astype(np.int64)
        counts = state.ent_count.get(slots)  # stored units: the decay scale cancels in the ratio
        keep = counts > 0
        slots, classes, terms, counts = slots[keep], classes[keep], terms[keep], counts[keep]
        order = np.lexsort((terms, classes))
        classes, terms, counts = classes[order], terms[order], counts[order]
        capacity = state.classes.capacity
        self.row_ptr = np.zeros(capacity + 1, dtype=np.int64)
        np.cumsum(np.bincount(classes, minlength=capacity), out=self.row_ptr[1:])
        mass = state.cls_mass.get(np.arange(capacity)) if capacity else np.zeros(0)
        self.row_term = terms
        self.row_prob = counts / mass[classes] if len(classes) else np.zeros(0)


def top_labels(log_post: np.ndarray, active: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Class ids of each row's ``k`` most probable labels (ties: the lower column) and their posteriors
    renormalized over them; ``k`` beyond the labels takes them all.

    >>> ids, pi = top_labels(np.log([[0.5, 0.3, 0.2]]), np.array([4, 7, 9]), 2)
    >>> ids.tolist(), pi.round(3).tolist()
    ([[4, 7]], [[0.625, 0.375]])
    """
    k = min(k, log_post.shape[1])
    columns = np.argsort(-log_post, axis=1, kind="stable")[:, :k]
    top = np.take_along_axis(log_post, columns, axis=1)
    weights = np.exp(top - top[:, :1])
    return active[columns], weights / weights.sum(axis=1, keepdims=True)


class ModelFeedback:
    """The second pass's documents of one model (its numbers and its label-major cache)."""

    def __init__(self, lam: float, labels: float, terms: float) -> None:
        self.lam = float(lam)
        self.labels = max(1, int(round(labels)))
        self.terms = max(1, int(round(terms)))
        self._label_terms: LabelTerms | None = None

    @classmethod
    def of(cls, spec, params) -> "ModelFeedback | None":
        """The feedback of a parsed spec and its resolved numbers; ``None`` without the ``fb`` affix."""
        return cls(params["fb_lambda"], params["fb_labels"], params["fb_terms"]) if spec.feedback else None

    @property
    def active(self) -> bool:
        """Whether there is a second pass (``lambda > 0``)."""
        return self.lam > 0

    def cache_arrays(self) -> list[np.ndarray]:
        """The label-major copy's arrays (counted by ``cache_bytes``); none before the first second pass."""
        cached = self._label_terms
        return [] if cached is None else [cached.row_ptr, cached.row_term, cached.row_prob]

    def label_terms(self, state) -> LabelTerms:
        cached = self._label_terms
        if cached is None or cached.epoch != state.epoch:
            cached = self._label_terms = LabelTerms(state)
        return cached

    def documents(self, state, batch: PreparedBatch, log_post: np.ndarray,
                  active: np.ndarray) -> tuple[PreparedBatch, np.ndarray, np.ndarray]:
        """The second-pass batch of ``batch`` (weights before ``fw``) from its first-pass ``log_post`` over
        ``active``, with each document's label ids and weights."""
        label_ids, label_weights = top_labels(log_post, active, self.labels)
        table = self.label_terms(state)
        n_docs = batch.n_docs
        row_start = np.searchsorted(batch.owner, np.arange(n_docs + 1))
        capacity = len(state.arena.length)
        # each document gains at most min(N, its top labels' terms) feedback terms (N alone: 300 MB for r52's
        # test split at N = 5000)
        label_rows = (table.row_ptr[label_ids + 1] - table.row_ptr[label_ids]).sum(axis=1)
        size = len(batch.terms) + int(np.minimum(label_rows, self.terms).sum())
        out_terms = np.empty(size, dtype=np.int64)
        out_weights = np.empty(size)
        out_owner = np.empty(size, dtype=np.int64)
        n = feedback_documents(row_start, batch.terms, batch.weights, label_ids, label_weights, table.row_ptr,
                               table.row_term, table.row_prob, self.lam, self.terms, np.zeros(capacity),
                               np.zeros(capacity, dtype=np.bool_), out_terms, out_weights, out_owner)
        return PreparedBatch(out_terms[:n], out_weights[:n], out_owner[:n], n_docs), label_ids, label_weights
