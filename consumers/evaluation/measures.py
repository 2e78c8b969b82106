"""Evaluation measures (MODEL.md section 9). Pure functions: no I/O, no model.

A *label set* is what one document is labelled with, or what a classifier
outputs for it. Every measure here accepts, per document, either one label
(a string, or any hashable that is not a list/tuple/set) or a collection of
labels; single labels are treated as one-element sets, so the same functions
serve single-label and multi-label data:

============================  ==================================================
measure                       definition
============================  ==================================================
:func:`accuracy`              share of documents whose predicted label set equals
                              the true one (exact match; for single-label data the
                              usual accuracy)
:func:`micro_f1`              ``2 TP / (2 TP + FP + FN)`` with TP, FP, FN summed
                              over all (document, label) pairs; equals accuracy
                              when every document has one true and one predicted
                              label
:func:`macro_f1`              unweighted mean over labels of the per-label F1
:func:`log_loss`              mean of ``-log p(true class)``, ``p`` clipped to
                              ``[eps, 1 - eps]`` with ``eps = 1e-15``
:func:`roc_auc`               area under the ROC curve of a two-label task
                              (ties between a positive and a negative score
                              count one half: the Mann-Whitney statistic)
:func:`one_minus_roca_pct`    the TREC spam track's ``100 * (1 - AUC)``
:func:`error_rates`           two labels: false-positive rate (negatives called
                              positive) and false-negative rate (positives
                              missed) of given decisions, in percent
:func:`fn_rate_at_fp_rate`    two labels: the false-negative rate at the best
                              threshold whose false-positive rate is at most a
                              target (0.1%, 1%: how spam filters are compared)
:func:`windowed_accuracy`     accuracy per window of consecutive documents
:func:`time_window_accuracy`  accuracy per window of event time
============================  ==================================================

Examples
--------
>>> accuracy(["a", "b", "a"], ["a", "a", "a"])
0.6666666666666666
>>> micro_f1([{"x", "y"}, {"x"}], [{"x"}, {"x", "z"}])
0.6666666666666666
>>> roc_auc([1, 0, 1, 0], [0.9, 0.8, 0.7, 0.1])
0.75
"""
from __future__ import annotations

import math
from collections import Counter
from typing import Any, Hashable, Iterable, Sequence

import numpy as np

#: Probabilities are clipped to ``[LOG_LOSS_EPS, 1 - LOG_LOSS_EPS]`` before the log, so that one
#: confident mistake costs at most ``-log(1e-15) = 34.5`` nats instead of infinity.
LOG_LOSS_EPS = 1e-15


def label_set(labels: Any) -> frozenset:
    """One document's labels as a frozenset (a lone label becomes a one-element set).

    >>> sorted(label_set("spam")), sorted(label_set(["b", "a"])), label_set(None)
    (['spam'], ['a', 'b'], frozenset())
    """
    if labels is None:
        return frozenset()
    if isinstance(labels, (list, tuple, set, frozenset)):
        return frozenset(labels)
    return frozenset([labels])


def _paired_sets(y_true: Iterable, y_pred: Iterable) -> tuple[list[frozenset], list[frozenset]]:
    true_sets = [label_set(y) for y in y_true]
    pred_sets = [label_set(y) for y in y_pred]
    if len(true_sets) != len(pred_sets):
        raise ValueError(f"y_true has {len(true_sets)} documents, y_pred {len(pred_sets)}")
    return true_sets, pred_sets


def accuracy(y_true: Iterable, y_pred: Iterable) -> float | None:
    """Share of documents whose predicted label set equals the true label set.

    ``None`` for no documents.

    >>> accuracy([("a", "b"), "c"], [("b", "a"), "d"])
    0.5
    >>> accuracy([], []) is None
    True
    """
    true_sets, pred_sets = _paired_sets(y_true, y_pred)
    if not true_sets:
        return None
    return sum(t == p for t, p in zip(true_sets, pred_sets)) / len(true_sets)


def label_counts(y_true: Iterable, y_pred: Iterable) -> dict[Hashable, tuple[int, int, int]]:
    """Per label ``(TP, FP, FN)`` over the union of true and predicted labels.

    >>> sorted(label_counts([{"a"}, {"a", "b"}], [{"a", "b"}, {"a"}]).items())
    [('a', (2, 0, 0)), ('b', (0, 1, 1))]
    """
    true_sets, pred_sets = _paired_sets(y_true, y_pred)
    tp: Counter = Counter()
    fp: Counter = Counter()
    fn: Counter = Counter()
    for t, p in zip(true_sets, pred_sets):
        tp.update(t & p)
        fp.update(p - t)
        fn.update(t - p)
    labels = set(tp) | set(fp) | set(fn)
    return {label: (tp[label], fp[label], fn[label]) for label in labels}


def _f1(tp: int, fp: int, fn: int) -> float:
    denominator = 2 * tp + fp + fn
    return 2 * tp / denominator if denominator else 0.0


def micro_f1(y_true: Iterable, y_pred: Iterable) -> float | None:
    """F1 of the (document, label) decisions pooled over all labels.

    ``None`` when there are no documents; ``0.0`` when no document has a true or
    predicted label.

    >>> micro_f1(["a", "b"], ["a", "a"])  # single-label: equals accuracy
    0.5
    """
    true_sets, pred_sets = _paired_sets(y_true, y_pred)
    if not true_sets:
        return None
    tp = sum(len(t & p) for t, p in zip(true_sets, pred_sets))
    fp = sum(len(p - t) for t, p in zip(true_sets, pred_sets))
    fn = sum(len(t - p) for t, p in zip(true_sets, pred_sets))
    return _f1(tp, fp, fn)


def macro_f1(y_true: Iterable, y_pred: Iterable, labels: Sequence | None = None) -> float | None:
    """Unweighted mean of the per-label F1.

    ``labels`` defaults to every label that is true or predicted for some
    document (as scikit-learn does); a label that is never true nor predicted
    but listed in ``labels`` scores F1 = 0. ``None`` when there is no label.

    >>> round(macro_f1(["a", "a", "b"], ["a", "b", "b"]), 4)  # F1(a)=2/3, F1(b)=2/3
    0.6667
    """
    y_true, y_pred = list(y_true), list(y_pred)
    counts = label_counts(y_true, y_pred)
    chosen = list(counts) if labels is None else list(labels)
    if not chosen:
        return None
    return float(np.mean([_f1(*counts.get(label, (0, 0, 0))) for label in chosen]))


def log_loss(true_classes: Sequence, classes: Sequence, probabilities: np.ndarray,
             eps: float = LOG_LOSS_EPS) -> float | None:
    """Mean negative log probability of each document's true class.

    Parameters
    ----------
    true_classes : sequence
        The true class of each document (a label, or a label-set class).
    classes : sequence
        Column names of ``probabilities``.
    probabilities : ndarray of shape (n_docs, n_classes)
        Posterior of each document over ``classes``.
    eps : float
        Clipping: ``p`` is taken as ``min(max(p, eps), 1 - eps)``. A true class
        missing from ``classes`` (never seen in training) gets ``p = eps``.

    Returns
    -------
    float or None
        In nats; ``None`` for no documents.

    >>> round(log_loss(["a", "b"], ["a", "b"], np.array([[0.8, 0.2], [0.4, 0.6]])), 6)
    0.366985
    >>> round(log_loss(["c"], ["a", "b"], np.array([[0.5, 0.5]])), 3)  # unseen class: -log(1e-15)
    34.539
    """
    probabilities = np.asarray(probabilities, dtype=np.float64)
    if len(true_classes) == 0:
        return None
    if probabilities.shape != (len(true_classes), len(classes)):
        raise ValueError(f"probabilities must have shape {(len(true_classes), len(classes))}, got {probabilities.shape}")
    column = {c: i for i, c in enumerate(classes)}
    index = np.array([column.get(c, -1) for c in true_classes])
    picked = np.where(index >= 0, probabilities[np.arange(len(index)), np.maximum(index, 0)], 0.0)
    return mean_log_loss(picked, eps)


def mean_log_loss(p_true: Sequence[float], eps: float = LOG_LOSS_EPS) -> float | None:
    """Mean ``-log p`` of the true classes' probabilities, clipped to ``[eps, 1 - eps]``.

    >>> round(mean_log_loss([0.5, 1.0]), 6)  # (log 2 + 1e-15) / 2
    0.346574
    """
    p = np.asarray(p_true, dtype=np.float64)
    if not len(p):
        return None
    return float(-np.mean(np.log(np.clip(p, eps, 1.0 - eps))))


def roc_auc(is_positive: Sequence, scores: Sequence[float]) -> float | None:
    """Area under the ROC curve: the probability that a random positive scores
    above a random negative, ties counting one half.

    ``None`` when only one of the two labels occurs (the area is undefined).

    >>> roc_auc([True, False, True], [0.5, 0.5, 0.9])
    0.75
    >>> roc_auc([1, 1], [0.2, 0.3]) is None
    True
    """
    positive = np.asarray(is_positive, dtype=bool)
    scores = np.asarray(scores, dtype=np.float64)
    if positive.shape != scores.shape:
        raise ValueError("is_positive and scores differ in length")
    n_pos = int(positive.sum())
    n_neg = len(positive) - n_pos
    if n_pos == 0 or n_neg == 0:
        return None
    # average ranks (ties share the mean rank), then the Mann-Whitney U statistic
    order = np.argsort(scores, kind="mergesort")
    sorted_scores = scores[order]
    ranks = np.empty(len(scores))
    boundaries = np.flatnonzero(np.diff(sorted_scores)) + 1
    starts = np.concatenate(([0], boundaries))
    ends = np.concatenate((boundaries, [len(scores)]))
    for start, end in zip(starts, ends):
        ranks[order[start:end]] = (start + end + 1) / 2.0  # mean of 1-based ranks start+1..end
    u_statistic = ranks[positive].sum() - n_pos * (n_pos + 1) / 2.0
    return float(u_statistic / (n_pos * n_neg))


def one_minus_roca_pct(auc: float | None) -> float | None:
    """The TREC spam track's ``1-ROCA%``: ``100 * (1 - AUC)``; lower is better.

    >>> one_minus_roca_pct(0.9975)
    0.25
    """
    if auc is None:
        return None
    return round(100.0 * (1.0 - auc), 12)


def roc_curve(is_positive: Sequence, scores: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """ROC points ``(false positive rate, true positive rate)``, from (0, 0) to (1, 1),
    one point per distinct score threshold (highest first).

    >>> fpr, tpr = roc_curve([1, 0, 1, 0], [0.9, 0.8, 0.7, 0.1])
    >>> fpr.tolist(), tpr.tolist()
    ([0.0, 0.0, 0.5, 0.5, 1.0], [0.0, 0.5, 0.5, 1.0, 1.0])
    """
    positive = np.asarray(is_positive, dtype=bool)
    scores = np.asarray(scores, dtype=np.float64)
    order = np.argsort(-scores, kind="mergesort")
    sorted_scores, sorted_positive = scores[order], positive[order]
    last_of_tie = np.r_[np.flatnonzero(np.diff(sorted_scores)), len(scores) - 1] if len(scores) else np.zeros(0, int)
    tps = np.cumsum(sorted_positive)[last_of_tie]
    fps = (last_of_tie + 1) - tps
    n_pos, n_neg = max(int(positive.sum()), 1), max(len(positive) - int(positive.sum()), 1)
    return np.r_[0.0, fps / n_neg], np.r_[0.0, tps / n_pos]


def error_rates(is_positive: Sequence, said_positive: Sequence) -> tuple[float | None, float | None]:
    """``(FP%, FN%)`` of two-label decisions: negatives said positive per 100 negatives, positives
    not said positive per 100 positives (``None`` when there is no negative / no positive).

    >>> error_rates([1, 1, 0, 0, 0, 0], [1, 0, 1, 0, 0, 0])
    (25.0, 50.0)
    """
    truth = np.asarray(is_positive, dtype=bool)
    said = np.asarray(said_positive, dtype=bool)
    if truth.shape != said.shape:
        raise ValueError("is_positive and said_positive differ in length")
    negatives, positives = int((~truth).sum()), int(truth.sum())
    fp = 100.0 * float((said & ~truth).sum()) / negatives if negatives else None
    fn = 100.0 * float((~said & truth).sum()) / positives if positives else None
    return fp, fn


def fn_rate_at_fp_rate(is_positive: Sequence, scores: Sequence[float], fp_rate: float) -> float | None:
    """FN% at the best score threshold whose FP rate is at most ``fp_rate`` (a fraction, 0.01 = 1%).

    A point of the ROC curve (:func:`roc_curve`), chosen with hindsight on the scored data, as spam
    filters are compared ("misses at 0.1% / 1% false positives"); ties in the scores are not split.
    ``None`` when only one of the two labels occurs.

    >>> fn_rate_at_fp_rate([1, 0, 1, 1, 0], [0.9, 0.8, 0.7, 0.3, 0.1], 0.0)  # above 0.8: one of 3 positives
    66.66666666666667
    >>> fn_rate_at_fp_rate([1, 0, 1, 1, 0], [0.9, 0.8, 0.7, 0.3, 0.1], 0.5)
    0.0
    """
    positive = np.asarray(is_positive, dtype=bool)
    if not positive.any() or positive.all():
        return None
    fpr, tpr = roc_curve(positive, scores)
    return 100.0 * (1.0 - float(tpr[fpr <= fp_rate + 1e-12].max()))


def windowed_accuracy(correct: Sequence[bool], window: int) -> list[dict]:
    """Accuracy over consecutive windows of ``window`` documents (the last may be shorter).

    >>> windowed_accuracy([1, 1, 0, 1, 0], 2)
    [{'start': 0, 'end': 2, 'docs': 2, 'accuracy': 1.0}, {'start': 2, 'end': 4, 'docs': 2, 'accuracy': 0.5}, \
{'start': 4, 'end': 5, 'docs': 1, 'accuracy': 0.0}]
    """
    if window < 1:
        raise ValueError("window must be at least 1 document")
    flags = np.asarray(correct, dtype=np.float64)
    out = []
    for start in range(0, len(flags), window):
        part = flags[start : start + window]
        out.append({"start": start, "end": start + len(part), "docs": len(part), "accuracy": float(part.mean())})
    return out


def time_window_accuracy(correct: Sequence[bool], ts: Sequence[float], seconds: float) -> list[dict]:
    """Accuracy per window of event time ``[t0 + k * seconds, t0 + (k+1) * seconds)``,
    ``t0`` the first timestamp; windows without documents are left out.

    ``ts`` must be non-decreasing (a stream in event-time order).

    >>> time_window_accuracy([1, 0, 1, 1], [0, 5, 10, 31], 10)
    [{'ts_start': 0.0, 'ts_end': 10.0, 'docs': 2, 'accuracy': 0.5}, {'ts_start': 10.0, 'ts_end': 20.0, 'docs': 1, \
'accuracy': 1.0}, {'ts_start': 30.0, 'ts_end': 40.0, 'docs': 1, 'accuracy': 1.0}]
    """
    if not seconds > 0:
        raise ValueError("seconds must be positive")
    flags = np.asarray(correct, dtype=np.float64)
    times = np.asarray(ts, dtype=np.float64)
    if flags.shape != times.shape:
        raise ValueError("correct and ts differ in length")
    if not len(times):
        return []
    if np.any(np.diff(times) < 0):
        raise ValueError("ts must be non-decreasing")
    slot = np.floor((times - times[0]) / seconds).astype(np.int64)
    out = []
    for k in np.unique(slot).tolist():
        part = flags[slot == k]
        start = float(times[0] + k * seconds)
        out.append({"ts_start": start, "ts_end": start + seconds, "docs": int(len(part)), "accuracy": float(part.mean())})
    return out


def relative_error_reduction(new_score: float, base_score: float) -> float:
    """``RER = 1 - (1 - new) / (1 - base)``: the share of the baseline's errors removed.

    >>> round(relative_error_reduction(0.97, 0.96), 4)
    0.25
    """
    if base_score >= 1.0:
        return 0.0 if new_score >= 1.0 else -math.inf
    return 1.0 - (1.0 - new_score) / (1.0 - base_score)
