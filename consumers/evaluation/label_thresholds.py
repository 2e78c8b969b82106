"""Choosing the decision rule of label-powerset output on development data.

A powerset model outputs the arg-max label set, or with a ``label_threshold``
``t`` the labels whose marginal probability reaches ``t``
(:mod:`sgm.model.label_marginals`). ``sgm tune --choose-label-threshold``
decides between the two on the dev data of the tune protocol (the dev-test
share of the training side, or each fold's; the test split is never read):

1. the tuned configuration is fitted on dev-train and scores dev-test (every
   fold's, pooled), giving each dev-test document's posterior over label sets;
2. the rules are compared *cross-fitted*: dev-test is halved at random
   (``seed``); a rule's threshold is chosen on one half and applied to the
   other, both ways, and the pooled decisions are scored by Micro-F1. A
   threshold chosen and scored on the same documents would look better than it
   is (it is fitted to them), while the arg-max has nothing to fit; the
   cross-fitted scores compare the rules as they would do on unseen documents;
3. the rule with the best cross-fitted score wins (ties: the arg-max, the
   simpler); a threshold rule's ``t`` is then chosen on all of dev-test: the
   grid value (:data:`THRESHOLD_GRID`) with the best Micro-F1 (ties: nearest
   0.5, then the lower).

One threshold per label is scored too, for the record (it is not a product
option): coordinate ascent over the labels with at least ``min_support`` true
dev documents, the rarer labels keeping the global threshold.

Examples
--------
>>> truth = [{"a"}, {"a", "b"}, {"b"}]
>>> marginals = np.array([[0.9, 0.2], [0.8, 0.4], [0.3, 0.6]])
>>> [round(f, 3) for f in micro_f1_by_threshold(truth, ["a", "b"], marginals, (0.3, 0.5))]
[0.889, 0.857]
>>> best_threshold(truth, ["a", "b"], marginals, (0.3, 0.4, 0.5))
0.4
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from sgm.model import build_model
from sgm.model.label_marginals import chosen_by_threshold, label_marginals

from .dev_task import DevTask
from .harness import learn_split, log_posteriors_in_batches, prepare_config, random_partition

#: Thresholds a choice considers: 0.05, 0.10, ..., 0.95.
THRESHOLD_GRID = tuple(round(0.05 * i, 2) for i in range(1, 20))
#: Per-label thresholds: only labels with at least this many true dev documents get their own.
DEFAULT_MIN_SUPPORT = 10
RULES = ("arg-max", "threshold", "per-label")


@dataclass
class DevMarginals:
    """Pooled dev-test outcomes of a powerset configuration: truth, label marginals, arg-max label sets."""

    true_sets: list[frozenset]
    labels: list
    marginals: np.ndarray
    argmax_sets: list[frozenset]

    def subset(self, index: Sequence[int]) -> "DevMarginals":
        return DevMarginals([self.true_sets[i] for i in index], self.labels, self.marginals[list(index)],
                            [self.argmax_sets[i] for i in index])


def dev_marginals(task: DevTask, config: Mapping[str, Any]) -> DevMarginals:
    """Fit ``config`` (its arg-max output: a ``label_threshold`` in it is left out) on each fold's dev-train of
    ``task`` (split mode) and pool its dev-test marginals.

    The labels are the union over folds; a label a fold's model never learned has marginal 0 there.
    """
    if task.setup.mode != "split" or not task.folds or task.read is None:
        raise ValueError("choosing a label threshold needs a split-mode development task")
    config = prepare_config({k: v for k, v in config.items() if k != "label_threshold"}, task.dev_train + task.dev_test)
    parts = []
    for train, test, (train_index, test_index) in task.folds:
        model = build_model(config)
        if model.multilabel != "powerset":
            raise ValueError("a label threshold applies to multilabel='powerset' configurations")
        learn_split(model, task.read.for_config(config, train_index), train)
        classes, log_post = log_posteriors_in_batches(model, task.read.for_config(config, test_index))
        post = np.exp(log_post)
        labels, marginals = label_marginals(classes, post)
        argmax = [frozenset(classes[j]) for j in np.argmax(post, axis=1).tolist()]
        parts.append(([frozenset(d.labels) for d in test], labels, marginals, argmax))
    every = sorted({label for _, labels, _, _ in parts for label in labels})
    column = {label: k for k, label in enumerate(every)}
    pooled = np.zeros((sum(len(p[0]) for p in parts), len(every)))
    row = 0
    for truth, labels, marginals, _ in parts:
        pooled[row : row + len(truth), [column[label] for label in labels]] = marginals
        row += len(truth)
    return DevMarginals([t for p in parts for t in p[0]], every, pooled, [a for p in parts for a in p[3]])


def _indicator(true_sets: Sequence, labels: Sequence) -> tuple[np.ndarray, int]:
    """Truth as a boolean document x label matrix, and the count of true labels outside ``labels``
    (always missed: false negatives of every rule)."""
    column = {label: k for k, label in enumerate(labels)}
    truth = np.zeros((len(true_sets), len(labels)), dtype=bool)
    outside = 0
    for i, labels_of in enumerate(true_sets):
        for label in labels_of:
            if label in column:
                truth[i, column[label]] = True
            else:
                outside += 1
    return truth, outside


def _micro_f1(truth: np.ndarray, chosen: np.ndarray, outside: int) -> float:
    tp = int((truth & chosen).sum())
    fp = int((chosen & ~truth).sum())
    fn = int((truth & ~chosen).sum()) + outside
    return 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0


def micro_f1_by_threshold(true_sets: Sequence, labels: Sequence, marginals: np.ndarray,
                          grid: Sequence[float] = THRESHOLD_GRID) -> list[float]:
    """Micro-F1 of the thresholded output (:func:`~sgm.model.label_marginals.chosen_by_threshold`) at each
    threshold of ``grid``; equal to :func:`~sgm.consumers.evaluation.measures.micro_f1` of its label sets."""
    truth, outside = _indicator(true_sets, labels)
    return [_micro_f1(truth, chosen_by_threshold(marginals, t), outside) for t in grid]


def best_threshold(true_sets: Sequence, labels: Sequence, marginals: np.ndarray,
                   grid: Sequence[float] = THRESHOLD_GRID) -> float:
    """The grid threshold with the best Micro-F1 (ties: nearest 0.5, then the lower)."""
    scores = micro_f1_by_threshold(true_sets, labels, marginals, grid)
    top = max(scores)
    return min((t for t, s in zip(grid, scores) if s == top), key=lambda t: (abs(t - 0.5), t))


def per_label_thresholds(true_sets: Sequence, labels: Sequence, marginals: np.ndarray, start: float,
                         grid: Sequence[float] = THRESHOLD_GRID, min_support: int = DEFAULT_MIN_SUPPORT,
                         rounds: int = 2) -> np.ndarray:
    """One threshold per label, by coordinate ascent on Micro-F1 from ``start`` for every label: labels with
    at least ``min_support`` true documents, most frequent first, each move to the grid value that raises
    Micro-F1 the most (only a strict gain moves it); the rarer labels keep ``start``.

    >>> truth = [{"a"}, {"a"}, {"b"}, {"a", "b"}]
    >>> m = np.array([[0.9, 0.1], [0.6, 0.3], [0.2, 0.7], [0.7, 0.35]])
    >>> per_label_thresholds(truth, ["a", "b"], m, 0.5, grid=(0.3, 0.5, 0.8), min_support=1).tolist()
    [0.5, 0.3]
    """
    truth, outside = _indicator(true_sets, labels)
    thresholds = np.full(len(labels), float(start))
    support = truth.sum(axis=0)
    for _ in range(rounds):
        for k in np.argsort(-support, kind="stable").tolist():
            if support[k] < min_support:
                continue
            best_value = thresholds[k]
            best_score = _micro_f1(truth, chosen_by_threshold(marginals, thresholds), outside)
            for value in grid:
                trial = thresholds.copy()
                trial[k] = value
                score = _micro_f1(truth, chosen_by_threshold(marginals, trial), outside)
                if score > best_score:
                    best_value, best_score = value, score
            thresholds[k] = best_value
    return thresholds


def _decisions(rule: str, fit: DevMarginals, apply: DevMarginals, grid, min_support) -> np.ndarray:
    if rule == "arg-max":
        return _indicator(apply.argmax_sets, apply.labels)[0]
    threshold = best_threshold(fit.true_sets, fit.labels, fit.marginals, grid)
    if rule == "per-label":
        threshold = per_label_thresholds(fit.true_sets, fit.labels, fit.marginals, threshold, grid, min_support)
    return chosen_by_threshold(apply.marginals, threshold)


def cross_fitted_scores(dev: DevMarginals, seed: int = 0, grid: Sequence[float] = THRESHOLD_GRID,
                        min_support: int = DEFAULT_MIN_SUPPORT) -> dict[str, float]:
    """Micro-F1 of each rule of :data:`RULES` with its thresholds chosen on one seeded half of ``dev`` and
    applied to the other, both ways, pooled."""
    first, second = random_partition(list(range(len(dev.true_sets))), 0.5, seed)
    truth, outside = _indicator(dev.true_sets, dev.labels)
    scores = {}
    for rule in RULES:
        chosen = np.zeros_like(truth)
        for fit, apply in ((first, second), (second, first)):
            chosen[apply] = _decisions(rule, dev.subset(fit), dev.subset(apply), grid, min_support)
        scores[rule] = _micro_f1(truth, chosen, outside)
    return scores


def choose_label_threshold(dev: DevMarginals, seed: int = 0, grid: Sequence[float] = THRESHOLD_GRID,
                           min_support: int = DEFAULT_MIN_SUPPORT) -> dict[str, Any]:
    """The dev choice between the arg-max label set and a label threshold (module docstring).

    Returns a report: ``label_threshold`` (the chosen threshold, or ``None`` for the arg-max), the
    cross-fitted scores, and the Micro-F1 of every rule fitted and scored on all of ``dev`` (optimistic
    for the threshold rules, shown for reference).
    """
    crossed = cross_fitted_scores(dev, seed, grid, min_support)
    winner = "threshold" if crossed["threshold"] > crossed["arg-max"] else "arg-max"
    truth, outside = _indicator(dev.true_sets, dev.labels)
    threshold = best_threshold(dev.true_sets, dev.labels, dev.marginals, grid)
    per_label = per_label_thresholds(dev.true_sets, dev.labels, dev.marginals, threshold, grid, min_support)
    return {
        "label_threshold": threshold if winner == "threshold" else None,
        "rule": winner,
        "cross_fitted": crossed,
        "in_sample": {"arg-max": _micro_f1(truth, _indicator(dev.argmax_sets, dev.labels)[0], outside),
                      "threshold": _micro_f1(truth, chosen_by_threshold(dev.marginals, threshold), outside),
                      "per-label": _micro_f1(truth, chosen_by_threshold(dev.marginals, per_label), outside)},
        "best_threshold": threshold,
        "per_label_changed": int((per_label != threshold).sum()),
        "grid": list(grid),
        "min_support": min_support,
        "seed": seed,
        "docs": len(dev.true_sets),
    }
