"""Label marginals of a label-powerset posterior, and the thresholded multi-label output.

A label-powerset model (``multilabel="powerset"``) has one class per label set
(MODEL.md section 8) and by default outputs the arg-max label set. Its
posterior over label sets also gives each label's marginal probability

    p(l | d) = sum over label sets S containing l of p(S | d),

and so a second decision rule: output every label whose marginal is at least
a threshold ``t``, or, when none reaches it, the label with the largest
marginal (no document is left without a label). The rule can output label
sets never seen in training, which the arg-max cannot. ``t`` is a number of
the configuration (``label_threshold``), chosen on development data
(``consumers/evaluation/label_thresholds.py``; docs/EVALUATION.md).

Examples
--------
>>> classes = [("a",), ("a", "b"), ("c",)]
>>> labels, marginals = label_marginals(classes, np.array([[0.5, 0.3, 0.2]]))
>>> labels, marginals.round(3).tolist()
(['a', 'b', 'c'], [[0.8, 0.3, 0.2]])
>>> labels_at_threshold(labels, marginals, 0.25)
[['a', 'b']]
"""
from __future__ import annotations

from typing import Hashable, Sequence

import numpy as np


def class_labels(cls: Hashable) -> tuple:
    """The labels of one class: a label-set tuple as it is, a lone label as a one-element tuple.

    >>> class_labels(("a", "b")), class_labels("spam")
    (('a', 'b'), ('spam',))
    """
    return tuple(cls) if isinstance(cls, (tuple, list, frozenset, set)) else (cls,)


def label_marginals(classes: Sequence, posteriors: np.ndarray) -> tuple[list, np.ndarray]:
    """Each label's marginal probability from a posterior over label sets.

    Parameters
    ----------
    classes : sequence
        Column names of ``posteriors``: label-set tuples (a lone label counts as a one-label set).
    posteriors : ndarray of shape (n_docs, n_classes)
        Posterior of each document over ``classes`` (rows summing to 1).

    Returns
    -------
    labels : list
        Every label of ``classes``, sorted.
    marginals : ndarray of shape (n_docs, n_labels)
        ``marginals[i, k]`` = the sum of ``posteriors[i, j]`` over the classes ``j`` containing ``labels[k]``.
        Each row lies in ``[0, 1]`` per label and sums to the expected number of labels of the document.

    >>> labels, m = label_marginals([("x",), ("x", "y")], np.array([[0.25, 0.75], [1.0, 0.0]]))
    >>> labels, m.tolist()
    (['x', 'y'], [[1.0, 0.75], [1.0, 0.0]])
    """
    posteriors = np.asarray(posteriors, dtype=np.float64)
    if posteriors.ndim != 2 or posteriors.shape[1] != len(classes):
        raise ValueError(f"posteriors must have shape (n_docs, {len(classes)}), got {posteriors.shape}")
    sets = [class_labels(c) for c in classes]
    labels = sorted({label for labels_of in sets for label in labels_of})
    column = {label: k for k, label in enumerate(labels)}
    membership = np.zeros((len(classes), len(labels)))
    for j, labels_of in enumerate(sets):
        membership[j, [column[label] for label in labels_of]] = 1.0
    return labels, posteriors @ membership


def chosen_by_threshold(marginals: np.ndarray, threshold: float | np.ndarray) -> np.ndarray:
    """The thresholded decisions as a boolean matrix: marginal ``>= threshold`` (one number, or one per
    label column), and in a row where no label reaches it, the largest marginal (ties: the first column).

    >>> chosen_by_threshold(np.array([[0.6, 0.5], [0.2, 0.3]]), 0.5).tolist()
    [[True, True], [False, True]]
    >>> chosen_by_threshold(np.array([[0.6, 0.5]]), np.array([0.7, 0.4])).tolist()
    [[False, True]]
    """
    marginals = np.asarray(marginals, dtype=np.float64)
    chosen = marginals >= np.asarray(threshold, dtype=np.float64)
    empty = np.flatnonzero(~chosen.any(axis=1))
    if len(empty) and marginals.shape[1]:
        chosen[empty, np.argmax(marginals[empty], axis=1)] = True
    return chosen


def labels_at_threshold(labels: Sequence, marginals: np.ndarray, threshold: float | np.ndarray) -> list[list]:
    """Output label lists of :func:`chosen_by_threshold`, largest marginal first (ties: label order).

    >>> labels_at_threshold(["a", "b", "c"], np.array([[0.3, 0.9, 0.3], [0.1, 0.2, 0.15]]), 0.3)
    [['b', 'a', 'c'], ['b']]
    """
    marginals = np.asarray(marginals, dtype=np.float64)
    chosen = chosen_by_threshold(marginals, threshold)
    out = []
    for row, keep in zip(marginals, chosen):
        picked = np.flatnonzero(keep)
        order = picked[np.lexsort((picked, -row[picked]))]
        out.append([labels[k] for k in order.tolist()])
    return out


def check_label_threshold(value: float | None) -> float | None:
    """A label threshold as a float in ``(0, 1]``, or ``None`` (the arg-max label set).

    >>> check_label_threshold(0.4), check_label_threshold(None)
    (0.4, None)
    >>> check_label_threshold(0)
    Traceback (most recent call last):
    ...
    ValueError: label_threshold must be in (0, 1], got 0
    """
    if value is None:
        return None
    number = float(value)
    if not 0.0 < number <= 1.0:
        raise ValueError(f"label_threshold must be in (0, 1], got {value!r}")
    return number
