"""Fitting an ensemble's pool on development data (``sgm ensemble``; the model is ``sgm.model.Ensemble``).

The bases are fixed configurations (each tuned on the same dev data by ``sgm tune``). Only the training side
is read, split as ``sgm tune`` splits it (a seeded ``dev_fraction`` of it is dev-test, the rest dev-train):

1. out-of-fold posteriors: each base is fitted on all but one of ``folds`` parts of dev-train and scores
   the part left out, so every dev-train document has posteriors from bases that never saw it;
2. the pool (weights, optionally meta-features and per-class biases) is fitted on those posteriors by
   maximum likelihood, L2-regularized towards equal weights: convex (multinomial logistic regression
   over the bases' floored log posteriors times the meta-features), solved by L-BFGS;
3. the pool's variant (meta-features or not, biases or not, the regularization) is chosen by
   cross-validation over the same out-of-fold posteriors (dev-train only); a single base (weight 1, the others
   0) is a variant too, scored by its out-of-fold posteriors, so the pool is kept only where it beats every base
   there;
4. the dev score: every base fitted on the whole of dev-train scores dev-test, and the chosen pool
   combines them. These are the very fits and documents behind each base's ``sgm tune`` dev score, so
   the ensemble's dev score and the single candidates' compare like with like.

The test split is never read: ``sgm eval --config`` of the written configuration then learns the whole
training side in every base and scores the test split through the same pool.
"""
from __future__ import annotations

import time
import contextlib
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
from scipy.optimize import minimize

from sgm.consumers.evaluation import measures as metrics
from sgm.consumers.evaluation.documents import documents as read_as, uses_mail
from sgm.consumers.evaluation.harness import (EvalSetup, cross_validation_folds, is_multilabel, labelled, learn_split,
                                              log_posteriors_in_batches, prepare_config, random_partition, train_test)
from sgm.model import Ensemble, build_model, model_config
from sgm.model.ensemble import FLOOR, meta_feature_count, meta_features, pool

try:  # installed with scikit-learn (the dev extra); without it the pool fits run as before, only slower
    from threadpoolctl import threadpool_limits
except ImportError:  # pragma: no cover
    threadpool_limits = None

#: Pool variants tried, simplest first (ties go to the earlier one): (meta-features, per-class bias, L2 weight).
VARIANTS: tuple[tuple[bool, bool, float], ...] = tuple(
    (meta, bias, reg) for meta in (False, True) for bias in (False, True) for reg in (10.0, 1.0, 0.1))


@dataclass
class Pool:
    """A fitted pool: weights (bases, F) and a bias per class column."""

    meta: bool
    weights: np.ndarray
    bias: np.ndarray

    def log_posteriors(self, log_posts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        return pool(log_posts, meta_features(log_posts, lengths, self.meta), self.weights, self.bias)


def one_blas_thread():
    """A context in which BLAS runs on one thread. A pool fit is a small L-BFGS problem (tens of parameters);
    OpenBLAS's threads made each fit 9x slower on this shared 2-core machine (0.57 s vs 0.064 s at 1,500
    documents, 3 bases, most of it inside scipy's L-BFGS-B step), with the same result."""
    return threadpool_limits(1, user_api="blas") if threadpool_limits else contextlib.nullcontext()


def fit_pool(log_posts: np.ndarray, lengths: np.ndarray, truth: np.ndarray, meta: bool, with_bias: bool,
             reg: float) -> Pool:
    """Maximum-likelihood pool over floored base log posteriors (bases, docs, classes) and true columns.

    The penalty ``reg * (|v - v0|^2 + |b|^2)`` pulls towards the equal-weight pool ``v0`` (1 / bases).

    >>> lp = np.log(np.array([[[0.9, 0.1], [0.2, 0.8]], [[0.5, 0.5], [0.5, 0.5]]]))
    >>> fitted = fit_pool(lp, np.ones(2), np.array([0, 1]), meta=False, with_bias=False, reg=0.01)
    >>> bool(fitted.weights[0, 0] > fitted.weights[1, 0])
    True
    """
    n_bases, n_docs, n_classes = log_posts.shape
    columns = meta_features(log_posts, lengths, meta)
    width = columns.shape[1]
    start = np.zeros((n_bases, width))
    start[:, 0] = 1.0 / n_bases
    rows = np.arange(n_docs)

    def unpack(theta):
        v = theta[: n_bases * width].reshape(n_bases, width)
        return v, (theta[n_bases * width:] if with_bias else np.zeros(n_classes))

    def loss(theta):
        v, b = unpack(theta)
        alpha = columns @ v.T
        scores = np.einsum("dj,jdl->dl", alpha, log_posts) + b[None, :]
        top = scores.max(axis=1, keepdims=True)
        log_norm = top[:, 0] + np.log(np.exp(scores - top).sum(axis=1))
        value = float((log_norm - scores[rows, truth]).sum()) + reg * float(((v - start) ** 2).sum())
        residual = np.exp(scores - log_norm[:, None])
        residual[rows, truth] -= 1.0
        grad_v = np.einsum("dl,jdl->dj", residual, log_posts).T @ columns + 2 * reg * (v - start)
        grads = [grad_v.ravel()]
        if with_bias:
            value += reg * float((b ** 2).sum())
            grads.append(residual.sum(axis=0) + 2 * reg * b)
        return value, np.concatenate(grads)

    # L-BFGS runs in preconditioned coordinates u_j = v_j L_j (L_j L_j^T: base j's block of the objective's
    # curvature at the start, likelihood and penalty; see preconditioners): the same objective and optimum. On the
    # raw meta-features (correlated, scales 0.2-1) it stopped 0.5-1% above the optimum on r8's pools, at a point
    # that moved with the last bits of its input; whitening the columns alone made the penalty-dominated fits
    # (reg 10, a thousand documents) take hundreds of iterations instead of a dozen.
    maps = preconditioners(columns, log_posts, reg)  # v_j = u_j maps[j]
    size = n_bases * width

    def loss_preconditioned(theta):
        u = theta[:size].reshape(n_bases, width)
        v = np.einsum("jf,jfg->jg", u, maps)
        value, grad = loss(np.concatenate([v.ravel(), theta[size:]]))
        grad_u = np.einsum("jg,jfg->jf", grad[:size].reshape(n_bases, width), maps)
        return value, np.concatenate([grad_u.ravel(), grad[size:]])

    u_start = np.einsum("jg,jfg->jf", start, np.linalg.inv(maps).transpose(0, 2, 1)).ravel()
    theta = np.concatenate([u_start, np.zeros(n_classes if with_bias else 0)])
    with one_blas_thread():  # a small problem: 7-11x slower with OpenBLAS's threads on shared cores
        result = minimize(loss_preconditioned, theta, jac=True, method="L-BFGS-B", options={"maxiter": 2000})
    u, b = result.x[:size].reshape(n_bases, width), result.x[size:]
    v = np.einsum("jf,jfg->jg", u, maps)
    return Pool(meta, v, np.array(b if with_bias else np.zeros(n_classes), dtype=np.float64))


def preconditioners(columns: np.ndarray, log_posts: np.ndarray, reg: float) -> np.ndarray:
    """Per base ``j``, the map ``M_j = L_j^-1`` with ``L_j L_j^T = C^T diag(s_j) C + 2 reg I``: the Gauss-Newton
    curvature of base ``j``'s weights at the equal-weight start (``s_j(d)``: the variance of base ``j``'s log
    posteriors over the classes under the start pool's posterior) plus the penalty's. ``v_j = u_j M_j`` turns that
    block into the identity, whichever of the two dominates.

    >>> maps = preconditioners(np.ones((4, 1)), np.log(np.full((2, 4, 2), 0.5)), reg=0.5)
    >>> maps.round(4).tolist()  # equal log posteriors: no likelihood curvature, the penalty's 2 reg = 1 alone
    [[[1.0]], [[1.0]]]
    """
    n_bases, width = log_posts.shape[0], columns.shape[1]
    start_scores = log_posts.mean(axis=0)
    start_post = np.exp(start_scores - start_scores.max(axis=1, keepdims=True))
    start_post /= start_post.sum(axis=1, keepdims=True)
    maps = np.empty((n_bases, width, width))
    for j in range(n_bases):
        mean = (start_post * log_posts[j]).sum(axis=1)
        spread = np.maximum((start_post * log_posts[j] ** 2).sum(axis=1) - mean**2, 0.0)
        curvature = (columns * spread[:, None]).T @ columns + (2 * reg + 1e-9) * np.eye(width)
        maps[j] = np.linalg.inv(np.linalg.cholesky(curvature))
    return maps


def score_of(log_post: np.ndarray, classes: list, docs: Sequence, objective: str) -> float:
    """``objective`` (accuracy or micro_f1) of the arg-max classes of ``log_post`` against ``docs``' labels."""
    predicted = [frozenset(c) if isinstance(c, tuple) else frozenset([c]) for c in
                 (classes[i] for i in log_post.argmax(axis=1).tolist())]
    truth = [frozenset(d.labels) for d in docs]
    value = metrics.micro_f1(truth, predicted) if objective == "micro_f1" else metrics.accuracy(truth, predicted)
    return float(value or 0.0)


def cross_validated(log_posts, lengths, truth, classes, docs, objective, variant, folds: int = 5,
                    seed: int = 0) -> float:
    """The objective of a pool variant fitted on all but one part, scored on the part left out, pooled."""
    meta, with_bias, reg = variant
    out = np.zeros(log_posts.shape[1:])
    for fit_index, held_index in cross_validation_folds(log_posts.shape[1], folds, seed):
        fitted = fit_pool(log_posts[:, fit_index], lengths[fit_index], truth[fit_index], meta, with_bias, reg)
        out[held_index] = fitted.log_posteriors(log_posts[:, held_index], lengths[held_index])
    return score_of(out, classes, docs, objective)


class BaseRuns:
    """Fits and scores of the base configurations on parts of one set of documents."""

    def __init__(self, configs: Sequence[Mapping[str, Any]], docs: Sequence, read: Sequence, classes: list) -> None:
        self.configs, self.docs, self.read, self.classes = list(configs), docs, read, classes
        self.column = {c: i for i, c in enumerate(classes)}
        self.learn_seconds = self.score_seconds = 0.0

    def log_posteriors(self, fit_index: Sequence[int], score_index: Sequence[int]) -> np.ndarray:
        """(bases, len(score_index), classes): each base fitted on ``fit_index``, floored at :data:`FLOOR`."""
        out = np.full((len(self.configs), len(score_index), len(self.classes)), FLOOR)
        fit_docs = [self.docs[i] for i in fit_index]
        for j, config in enumerate(self.configs):
            model = build_model(config)
            started = time.perf_counter()
            learn_split(model, [self.read[i] for i in fit_index], fit_docs)
            self.learn_seconds += time.perf_counter() - started
            started = time.perf_counter()
            names, lp = log_posteriors_in_batches(model, [self.read[i] for i in score_index])
            if len(lp):
                columns = [self.column[c] for c in names]
                out[j][:, columns] = np.maximum(np.nan_to_num(lp, nan=FLOOR, neginf=FLOOR), FLOOR)
            self.score_seconds += time.perf_counter() - started
        return out


def training_side(docs: Sequence, base_configs: Sequence, setup: EvalSetup, needs: str) -> list:
    """The labelled training side of a split ``setup`` (the test split is never read); ``needs`` says why a split
    is needed when ``setup`` is not one."""
    if setup.mode != "split":
        raise ValueError(f"{needs} (--mode split)")
    if not base_configs:
        raise ValueError("an ensemble needs at least one base configuration (--base)")
    train, _ = train_test(docs, setup.test_fraction, setup.split_seed)
    return labelled(train)


def fit_ensemble(docs: Sequence, base_configs: Sequence[Mapping[str, Any]], setup: EvalSetup,
                 objective: str | None = None, dev_fraction: float = 0.25, dev_seed: int = 0,
                 folds: int = 4, log=None) -> dict[str, Any]:
    """Fit the pool of ``base_configs`` on the dev data of ``docs`` (module docstring); the summary, with
    ``tuned_config`` (the ensemble's configuration) and ``dev_tuned`` (its dev score)."""
    started = time.perf_counter()
    say = log or (lambda message: None)
    train = training_side(docs, base_configs, setup, "sgm ensemble fits on the split protocol's development data")
    multi = is_multilabel(train)
    if objective is None:
        objective = "micro_f1" if multi else "accuracy"
    if objective not in ("accuracy", "micro_f1"):
        raise ValueError("the ensemble's objective is accuracy or micro_f1")
    configs = [prepare_config(c, train) for c in base_configs]
    modes = {build_model(c).multilabel for c in configs}
    if len(modes) != 1:
        raise ValueError("the base configurations must share one multilabel mode")
    powerset = modes == {"powerset"}
    if multi and not powerset:
        raise ValueError("multi-label data: the ensemble pools label-powerset bases (one class per label set)")
    class_of = (lambda d: tuple(sorted(set(d.labels)))) if powerset else (lambda d: d.labels[0])  # noqa: E731
    fit_index, held_index = random_partition(list(range(len(train))), dev_fraction, dev_seed)
    # in the order dev-train teaches them (then dev-test's others), not by name: an arg-max tie (no known term, no
    # prior) goes to the first column, the class learned first, as each base's sgm tune dev score and the served
    # pool break it (ensemble_cv does the same)
    classes = list(dict.fromkeys(class_of(train[i]) for i in [*fit_index, *held_index]))
    column = {c: i for i, c in enumerate(classes)}
    runs = BaseRuns(configs, train, read_as(train, uses_mail(train, setup.mail)), classes)
    dev_train = [train[i] for i in fit_index]
    truth = np.array([column[class_of(d)] for d in dev_train])
    lengths_of = Ensemble([build_model(configs[0])], [1.0]).lengths  # the length meta-feature, as the model reads it

    say(f"out-of-fold posteriors of {len(configs)} bases over dev-train ({len(fit_index)} documents, {folds} folds)")
    oof = np.full((len(configs), len(fit_index), len(classes)), FLOOR)
    for part_fit, part_held in cross_validation_folds(len(fit_index), folds, dev_seed):
        oof[:, part_held] = runs.log_posteriors([fit_index[i] for i in part_fit], [fit_index[i] for i in part_held])
    oof_lengths = lengths_of([runs.read[i] for i in fit_index])
    variants = []
    for j in range(len(configs)):  # each base alone: its out-of-fold score, nothing fitted
        value = score_of(oof[j], classes, dev_train, objective)
        variants.append({"meta": False, "bias": False, "reg": None, "base": j, "cv": value})
        say(f"  base {j} alone: out-of-fold {objective} {value:.4f}")
    for variant in VARIANTS:
        value = cross_validated(oof, oof_lengths, truth, classes, dev_train, objective, variant)
        variants.append({"meta": variant[0], "bias": variant[1], "reg": variant[2], "cv": value})
        say(f"  pool meta={variant[0]} bias={variant[1]} reg={variant[2]:g}: cross-validated {objective} {value:.4f}")
    chosen = max(variants, key=lambda v: v["cv"])  # the first of ties: single bases, then the simplest pools
    if "base" in chosen:
        weights = np.zeros((len(configs), 1))
        weights[chosen["base"], 0] = 1.0
        fitted = Pool(False, weights, np.zeros(len(classes)))
    else:
        fitted = fit_pool(oof, oof_lengths, truth, chosen["meta"], chosen["bias"], chosen["reg"])

    say(f"dev score: bases fitted on dev-train score dev-test ({len(held_index)} documents)")
    dev_test = [train[i] for i in held_index]
    dev_posts = runs.log_posteriors(fit_index, held_index)
    dev_lengths = lengths_of([runs.read[i] for i in held_index])
    dev_score = score_of(fitted.log_posteriors(dev_posts, dev_lengths), classes, dev_test, objective)
    uniform = Pool(False, np.full((len(configs), 1), 1.0 / len(configs)), np.zeros(len(classes)))
    uniform_score = score_of(uniform.log_posteriors(dev_posts, dev_lengths), classes, dev_test, objective)
    base_scores = [score_of(lp, classes, dev_test, objective) for lp in dev_posts]
    bias = {("\x1f".join(c) if isinstance(c, tuple) else c): float(b) for c, b in zip(classes, fitted.bias) if b}
    ensemble = Ensemble([build_model(c) for c in configs], fitted.weights, bias, meta=fitted.meta)
    tuned = model_config(ensemble)
    return {
        "mode": "split",
        "objective": objective,
        "search": "ensemble",
        "bases": [model_config(build_model(c)) for c in configs],
        "dev": {"fraction": dev_fraction, "seed": dev_seed, "folds": folds, "train_docs": len(fit_index),
                "test_docs": len(held_index)},
        "variants": variants,
        "chosen": chosen,
        "dev_bases": base_scores,
        "dev_uniform": uniform_score,
        "dev_default": max(base_scores),  # the best single base: what the pool starts from
        "dev_tuned": dev_score,
        "evaluations": len(variants),
        "search_seconds": round(time.perf_counter() - started, 1),
        "learn_seconds": round(runs.learn_seconds, 1),
        "score_seconds": round(runs.score_seconds, 1),
        "tuned_config": tuned,
        "meta_features": meta_feature_count(len(configs), fitted.meta),
    }
