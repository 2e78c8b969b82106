"""Multinomial Naive Bayes with generalized smoothing, TF-IDF and prior scaling.

The scoring kernel is the label score of :class:`model.label_model.LabelModel`
(MODEL.md section 5, thesis algorithm 1), computed and normalized in one
compiled pass over the batch (:func:`model.loops.scoring.dense_log_posterior`).
With many classes, top-k (``predict_topk_many``, ``rank_many``, ``predict_many``) prunes with
per-term upper bounds (:mod:`model.pruned_topk`): the same scores for the classes it scores, the
top-k exact, the posteriors to within a certified relative bound below float64 rounding (or a stated,
looser one: the ``tolerance`` of ``rank_many`` / ``predict_topk_many``, the service's
``posterior_tolerance``).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .base import GenerativeTextModel
from .batch import PreparedBatch
from .label_model import LabelModel
from .predictions import Ranking, top_k_indices
from .pruned_topk import PrunedResult, PrunedTopK, check_tolerance, margin, relative_bound

#: With at least this many active classes (and ``k`` well below them), top-k takes the pruned path
#: (1.0-1.4x the dense pass at 100-500 labels, 0.7-0.8x at 40, in the same runs):
#: measured by ``python -m bench.topk_pruning`` (docs/PERFORMANCE.md, must-show 2).
PRUNED_TOPK_MIN_CLASSES = 128
#: ... and at least this many active classes per class asked for (``k``).
PRUNED_TOPK_CLASSES_PER_K = 8


class MNB(GenerativeTextModel):
    """Multinomial Naive Bayes over a stream: exact sparse inference, decay, unlearning.

    Parameters
    ----------
    spec : str
        Affix string (see :mod:`model.spec`), e.g. ``"uc_pd_jm_dp_tXiX_ps"``.
    multilabel : {"per_label", "powerset"}
        How documents with several labels are counted: under each label, or as
        one class per label set.
    label_threshold : float, optional
        Powerset mode: output the labels whose marginal probability is at least
        this (:mod:`model.label_marginals`) instead of the arg-max label set.
    tokenizer : Tokenizer, optional
        Applied to text documents (default: :class:`model.text.Tokenizer`).
    half_life : float, optional
        Half-life of the time decay in event-time units (seconds); ``None``
        disables decay.
    prune_below, max_documents, max_bytes : optional
        The memory bound: documents whose decayed weight falls below
        ``prune_below``, and the oldest (least decayed weight first) beyond
        ``max_documents`` or while the model holds more than ``max_bytes``
        (:meth:`model.state.CountState.approx_bytes`), are unlearned.
    **params
        The numbers of the spec, named as in MODEL.md: ``beta``, ``mu``,
        ``delta`` (a number or ``"kn"``), ``ups``, ``phi``, ``ups_idf``, ``theta``.

    Examples
    --------
    >>> m = MNB("uc_pd_jm_dp_ps", beta=0.3, mu=1, delta=0.6, ups=0.2, theta=1.0)
    >>> m.learn_one("cheap pills buy now", "spam", id="m1")
    True
    >>> m.learn_one("meeting notes for monday", "ham", id="m2")
    True
    >>> m.learn_one("buy cheap watches now", "spam", id="m3")
    True
    >>> m.predict_one("cheap watches")
    'spam'
    >>> round(m.predict_proba_one("monday meeting")["ham"], 3)
    0.679
    >>> m.forget("m2"); m.classes_
    True
    ['spam']
    """

    family = "mnb"

    def rebuild_caches(self) -> None:
        super().rebuild_caches()
        self.labels = LabelModel(self.spec, self.params)
        self._pruner: PrunedTopK | None = None  # the pruned top-k's scratch and caches

    # ------------------------------------------------------------ the kernel
    def _log_posteriors(self, batch: PreparedBatch, active: np.ndarray) -> np.ndarray:
        return self.labels.log_posteriors(self.state, batch, active)

    def _scoring_cache_arrays(self) -> list[np.ndarray]:
        return self.labels.cache_arrays()

    def _tied_step(self, doc, classes) -> None:
        """The tied term weights' step (:mod:`model.tied_weights`) for ``doc``, about to be learned under the class
        keys ``classes``: towards those of them that are active, over the known terms; none if there are neither."""
        state = self.state
        active, _ = self.class_names()
        ids = state.classes.ids
        targets = [c for c in (ids.get(key) for key in classes) if c is not None and state.cls_refs[c] > 0]
        if not targets:
            return
        batch = self._query_weighted(self._prepare_weights([doc]), tied=False)
        if not len(batch.terms):
            return
        self.tied.step(batch.terms, self.tied.gradient(self.labels, state, batch, active, targets))

    # ------------------------------------------------------------ pruned top-k
    def uses_pruned_topk(self, k: int = 5, threshold: float | None = None, tolerance: float | None = None) -> bool:
        """Whether top-``k`` takes the pruned path: its cost follows the postings a document reads, the
        dense pass's the labels too, so it pays with many labels and ``k`` well below them; a posterior
        threshold must lie above what pruning leaves out (``e^-margin``, by the posterior ``tolerance``)."""
        n = len(self.class_names()[0])
        if self.feedback is not None and self.feedback.active:  # the second pass needs every first-pass posterior
            return False
        return (n >= PRUNED_TOPK_MIN_CLASSES and PRUNED_TOPK_CLASSES_PER_K * k <= n and k < n
                and (threshold is None or threshold > math.exp(-margin(n, tolerance))))

    def predict_topk_many(self, docs, k: int, tolerance: float | None = None):
        if k < 1:
            raise ValueError("k must be at least 1")
        tolerance = check_tolerance(tolerance)
        if not self.uses_pruned_topk(k, None, tolerance):
            return super().predict_topk_many(docs, k)
        names, top, log_p, _ = self._pruned_rank(list(docs), k, None, tolerance)
        return [[(names[i], p) for i, p in zip(row_top, row_p)]
                for row_top, row_p in zip(top.tolist(), np.exp(log_p).tolist())]

    def rank_many(self, docs, k: int, threshold: float | None = None, tolerance: float | None = None) -> Ranking:
        tolerance = check_tolerance(tolerance)
        marginals = self.multilabel == "powerset" and (threshold is not None or self.label_threshold is not None)
        # label marginals need every class: the dense pass
        if len(self) == 0 or marginals or not self.uses_pruned_topk(k, threshold, tolerance):
            return super().rank_many(docs, k, threshold)
        classes, top, log_p, above = self._pruned_rank(list(docs), k, threshold, tolerance)
        names = [("+".join(c) if isinstance(c, tuple) else c) for c in classes]
        top_names = [[names[i] for i in row] for row in top.tolist()]
        if self.multilabel == "powerset":
            labels = [list(classes[row[0]]) for row in top.tolist()]
        elif threshold is not None:
            labels = [[names[i] for i in row] for row in above]
        else:
            labels = [row[:1] for row in top_names]
        return Ranking(top_names, np.exp(log_p), labels)

    def _pruned_rank(self, docs: list, k: int, threshold: float | None, tolerance: float | None = None):
        """Columns of the top ``k`` classes per document (best first, ties by class id), their log
        posteriors (to within the relative posterior ``tolerance``), and the columns with posterior at least
        ``threshold`` (ascending), by the pruned path (:mod:`model.pruned_topk`); documents its bounds
        cannot settle take the dense kernel."""
        active, names = self.class_names()
        if not len(active):
            raise RuntimeError("the model has not learned any document yet")
        batch = self._prepare(docs)
        if self._pruner is None:
            self._pruner = PrunedTopK(self.labels)
        results: list[PrunedResult | None] = self._pruner.rank(self.state, batch, k, active,
                                                               threshold is not None, tolerance)
        log_threshold = math.log(threshold) if threshold is not None else None
        if log_threshold is not None:
            # a class left out might pass the threshold, or one scored pass it only by the tolerance
            # (p <= p' <= p (1 + tau): p' in [threshold, threshold (1 + tau))): the dense pass decides
            band = log_threshold + math.log1p(relative_bound(tolerance))  # == log_threshold by default (e^-40)
            results = [r if r is None or (r.floor < log_threshold and not (
                band > log_threshold and any(log_threshold <= lp < band for _, lp in r.scored))) else None
                       for r in results]
        top = np.empty((batch.n_docs, k), dtype=np.int64)
        log_p = np.empty((batch.n_docs, k))
        above: list[list[int]] = [[] for _ in range(batch.n_docs)]
        dense = [d for d, r in enumerate(results) if r is None]
        if dense:
            rows = self._log_posteriors(_select(batch, dense), active)
            columns = top_k_indices(rows, k)
            for row, d in enumerate(dense):
                top[d] = columns[row]
                log_p[d] = rows[row, columns[row]]
                if log_threshold is not None:
                    above[d] = np.flatnonzero(rows[row] >= log_threshold).tolist()
        for d, result in enumerate(results):
            if result is None:
                continue
            ids = np.array([c for c, _ in result.top], dtype=np.int64)
            top[d] = np.searchsorted(active, ids)
            log_p[d] = [lp for _, lp in result.top]
            if log_threshold is not None:
                above[d] = sorted(np.searchsorted(active, [c for c, lp in result.scored if lp >= log_threshold]).tolist())
        return names, top, log_p, above

    def stats(self) -> dict[str, Any]:
        out = super().stats()
        out.update(self.labels.stats(self.state))
        if self.tied is not None:
            out["tied_steps"] = self.tied.steps  # learned documents that moved the tied term weights (tw)
        return out


def _select(batch: PreparedBatch, docs: list[int]) -> PreparedBatch:
    """The documents ``docs`` (ascending) of ``batch`` as a batch of their own."""
    keep = np.isin(batch.owner, docs)
    owner = np.searchsorted(np.asarray(docs), batch.owner[keep])
    return PreparedBatch(batch.terms[keep], batch.weights[keep], owner, len(docs))
