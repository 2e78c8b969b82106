"""The predict API of every model, derived from one method: ``predict_log_proba_many(docs) -> (classes, log_post)``.

:class:`PosteriorPredictions` turns a model's normalized log posteriors into posteriors as dicts, the top
``k``, the arg-max and the service's :meth:`~PosteriorPredictions.rank_many` (a :class:`Ranking`). The single
models (:class:`model.base.GenerativeTextModel`) and :class:`model.ensemble.Ensemble` share it; with many labels
:class:`model.mnb.MNB` takes its pruned top-k instead (:mod:`model.pruned_topk`), which breaks ties as
:func:`top_k_indices` does.
"""
from __future__ import annotations

from typing import Any, Iterable, NamedTuple, Sequence

import numpy as np

from .label_marginals import label_marginals, labels_at_threshold
from .pruned_topk import check_tolerance


class Ranking(NamedTuple):
    """A scored batch: per document the top-k class names, their posteriors (one row each), the output labels."""

    names: list[list[str]]
    probabilities: np.ndarray
    labels: list[list[str]]


class PosteriorPredictions:
    """The predict API every model derives from its ``predict_log_proba_many(docs) -> (classes, log_post)``:
    posteriors as dicts, the top ``k`` with their probabilities, the arg-max, the service's :meth:`rank_many`
    (shared by the single models and :class:`model.ensemble.Ensemble`; :meth:`rank_many` also reads
    ``len(model)``, ``multilabel`` and ``label_threshold``)."""

    def invalidate_derived(self) -> None:
        """Mark every quantity derived from the counts (posting weights, class terms, kept totals) stale, so the
        next read recomputes it: after a scoring pass that raised midway, which may have left some half
        written. The counts are untouched. (A model without derived state has nothing to do.)"""

    def predict_proba_many(self, docs: Iterable) -> list[dict]:
        classes, log_post = self.predict_log_proba_many(docs)
        probs = np.exp(log_post)
        return [dict(zip(classes, row.tolist())) for row in probs]

    def predict_proba_one(self, doc) -> dict:
        """Full posterior ``{class: p}`` of one document."""
        return self.predict_proba_many([doc])[0]

    def predict_topk_many(self, docs: Iterable, k: int,
                          tolerance: float | None = None) -> list[list[tuple[Any, float]]]:
        """The ``k`` most probable classes of each document with their posteriors. ``tolerance``: the relative
        error the posteriors may have (the pruned top-k of :class:`model.mnb.MNB` uses it); this pass is
        exact."""
        if k < 1:
            raise ValueError("k must be at least 1")
        check_tolerance(tolerance)
        classes, log_post = self.predict_log_proba_many(docs)
        top = top_k_indices(log_post, k)
        probs = np.exp(np.take_along_axis(log_post, top, axis=1))
        return [[(classes[i], p) for i, p in zip(row_top, row_p)] for row_top, row_p in zip(top.tolist(), probs.tolist())]

    def predict_topk(self, doc, k: int) -> list[tuple[Any, float]]:
        """The ``k`` most probable classes with their posterior probabilities."""
        return self.predict_topk_many([doc], k)[0]

    def predict_many(self, docs: Iterable) -> list:
        return [top[0][0] for top in self.predict_topk_many(docs, 1)]

    def predict_one(self, doc):
        """The arg-max class (ties: the lower class id)."""
        return self.predict_many([doc])[0]

    def rank_many(self, docs: Sequence, k: int, threshold: float | None = None,
                  tolerance: float | None = None) -> "Ranking":
        """Top-``k`` class names with their posteriors and the output labels of a batch, in one pass.

        Output labels: in per-label mode the labels with posterior at least ``threshold``, else the top
        label; in powerset mode the labels whose marginal reaches ``threshold`` (default: the model's
        ``label_threshold``; :mod:`model.label_marginals`), or without either the arg-max label set.
        Before any training every list is empty. ``tolerance``: the relative error the posteriors may
        have (``None``: the default, exact to ``e^-40``); the labels are exact whatever it is. This dense
        pass is exact; the pruned top-k of :class:`model.mnb.MNB` uses it (:mod:`model.pruned_topk`).
        """
        check_tolerance(tolerance)
        if len(self) == 0:
            return Ranking([[] for _ in docs], np.empty((len(docs), 0)), [[] for _ in docs])
        classes, log_post = self.predict_log_proba_many(docs)
        top = top_k_indices(log_post, k)
        probs = np.exp(np.take_along_axis(log_post, top, axis=1))
        names = [("+".join(c) if isinstance(c, tuple) else c) for c in classes]
        name_array = np.empty(len(names), dtype=object)
        name_array[:] = names
        top_names = name_array[top].tolist()  # one gather for the batch, not a Python loop per document
        marginal_threshold = self.label_threshold if threshold is None else threshold
        if self.multilabel == "powerset" and marginal_threshold is not None:
            labels = self._marginal_labels(classes, log_post, marginal_threshold)
        elif self.multilabel == "powerset":
            labels = [list(classes[row[0]]) for row in top.tolist()]
        elif threshold is not None:
            above = log_post >= np.log(threshold)
            labels = [[names[i] for i in np.flatnonzero(row).tolist()] for row in above]
        else:
            labels = [row[:1] for row in top_names]
        return Ranking(top_names, probs, labels)

    @staticmethod
    def _marginal_labels(classes: list, log_post: np.ndarray, threshold: float) -> list[list[str]]:
        labels, marginals = label_marginals(classes, np.exp(log_post))
        return labels_at_threshold(labels, marginals, threshold)


def top_k_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """Column indices of the ``k`` largest scores per row, best first (ties: lower index first).

    >>> top_k_indices(np.array([[0.1, 0.5, 0.5, 0.2]]), 3).tolist()
    [[1, 2, 3]]
    >>> top_k_indices(np.array([[0.0] * 5 + [1.0] * 5 + [0.0] * 5]), 1).tolist()
    [[5]]
    """
    n = scores.shape[1]
    k = min(k, n)
    if k * 8 >= n:  # small class sets: a full stable sort is cheapest
        return np.argsort(-scores, axis=1, kind="stable")[:, :k]
    part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    part.sort(axis=1)  # index order, so the stable sort below breaks ties by index
    order = np.argsort(-np.take_along_axis(scores, part, axis=1), axis=1, kind="stable")
    top = np.take_along_axis(part, order, axis=1)
    # argpartition picks arbitrarily among scores tied at the cut: such rows take the full stable sort
    cut = np.take_along_axis(scores, top[:, -1:], axis=1)
    tied = np.flatnonzero((scores >= cut).sum(axis=1) > k)
    if len(tied):
        top[tied] = np.argsort(-scores[tied], axis=1, kind="stable")[:, :k]
    return top
