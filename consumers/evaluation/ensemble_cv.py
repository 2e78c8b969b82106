"""A cross-validated score for a split ensemble, and the pool's choice of bases (issue 19).

The topic sets choose ours by K-fold cross-validation of each tuned single configuration over the whole
training side (``sgm tune --iters 0 --dev-folds K --dev-seed 1``: each fold scored by the configuration fitted
on the other folds, the outcomes pooled). ``sgm ensemble --dev-folds K`` scores a pool the same way, on the
same folds: for each fold k

1. the pool is chosen and fitted on the other folds only: its out-of-fold posteriors there come from each base
   fitted on all folds but two (k and the one it scores), and its bases and variant (:func:`choose_pool`) are
   chosen by cross-validation over those posteriors;
2. each base, with its tuned numbers, is fitted on the other folds and scores fold k, and the pool combines them.

Fold k's labels are read only when its predictions are counted. The fit on all folds but {j, k} serves fold j
of pool k and fold k of pool j, so a base is fitted K(K-1)/2 + K times (15 for K = 5), and every pool variant
reuses the same posteriors. The written pool is the same procedure applied to the whole training side (its
out-of-fold posteriors: step 2's fits), so the score estimates the very configuration ``sgm eval --config``
then scores on test, as a single candidate's cross-validated score does.

:func:`choose_pool` also chooses which bases to pool (greedy forward selection from the best single base,
a base is added only where the cross-validated score rises and the cross-validated log loss falls), and a single
base with a per-class bias: a per-label prior correction of one base fitted on out-of-fold data. K is at least 3:
with 2 the fits on all folds but two would be empty.
"""
from __future__ import annotations

import time
from typing import Any, Mapping, Sequence

import numpy as np

from sgm.consumers.evaluation.documents import documents as read_as, uses_mail
from sgm.consumers.evaluation.ensemble_fit import (VARIANTS, BaseRuns, Pool, fit_pool, score_of,
                                                   training_side)
from sgm.consumers.evaluation.harness import EvalSetup, cross_validation_folds, is_multilabel, prepare_config
from sgm.model import Ensemble, build_model, model_config
from sgm.model.ensemble import FLOOR, meta_feature_count

#: Variants that score a subset of two or more bases during the forward selection (the full grid
#: :data:`VARIANTS` is then tried on the chosen subset): without meta-features, with and without bias, and with
#: meta-features (LSHTC4's per-document weights). Left out for cost while a meta-feature fit ran BLAS on many
#: threads (12-14 s on webkb's dev-train); on one thread, measured over the cached base posteriors of the page's
#: pools (one run each, load 2-6), the choices of the 5-fold score took r8 87 -> 248 s, webkb 19 -> 94 s.
SUBSET_VARIANTS: tuple[tuple[bool, bool, float], ...] = ((False, False, 1.0), (False, True, 1.0), (True, False, 1.0))
#: Variants tried on the chosen subset: the whole grid :data:`VARIANTS`.
POOL_VARIANTS: tuple[tuple[bool, bool, float], ...] = VARIANTS
#: Variants of a single base with a per-class bias (the weight is fitted too: a temperature).
BIAS_VARIANTS: tuple[tuple[bool, bool, float], ...] = ((False, True, 10.0), (False, True, 1.0))


def choose_pool(oof: np.ndarray, lengths: np.ndarray, truth: np.ndarray, classes: list, docs: Sequence,
                objective: str, seed: int = 0, log=None) -> tuple[list[int], Pool, dict, list[dict]]:
    """Choose the bases and the variant of a pool from out-of-fold posteriors ``oof`` (bases, docs, classes) of
    the training documents ``docs`` (true columns ``truth``), and fit it there.

    Tried, each scored by cross-validation over ``oof`` (a base alone: its out-of-fold score, nothing fitted):
    every base alone; every base with a per-class bias (:data:`BIAS_VARIANTS`); then, from the best of those,
    the base whose addition scores best under :data:`SUBSET_VARIANTS`, as long as the score rises and the
    cross-validated log loss falls; the
    grid :data:`POOL_VARIANTS` on the chosen subset. The first of ties wins (fewer bases, simpler variants).
    Returns ``(bases, pool, chosen, tried)``; the pool's weights have one row per chosen base.

    >>> rng = np.random.default_rng(0)
    >>> truth = rng.integers(0, 2, 60)
    >>> good = np.log(np.where(np.eye(2)[truth] > 0, 0.8, 0.2))
    >>> noise = np.log(rng.dirichlet([1, 1], 60))
    >>> bases, fitted, chosen, _ = choose_pool(np.stack([noise, good]), np.ones(60), truth, [0, 1],
    ...                                        [type("D", (), {"labels": [t]}) for t in truth], "accuracy")
    >>> bases
    [1]
    """
    say = log or (lambda message: None)
    tried: list[dict] = []
    rows = np.arange(len(truth))

    def score(subset: list[int], variant) -> tuple[float, float]:
        """(the objective, the mean log loss) of the subset's pool, cross-validated over ``oof``."""
        if variant is None:
            out = oof[subset[0]] - np.logaddexp.reduce(oof[subset[0]], axis=1, keepdims=True)
        else:
            out = np.zeros(oof.shape[1:])
            for fit_index, held_index in cross_validation_folds(len(truth), min(5, len(truth)), seed):
                fitted = fit_pool(oof[subset][:, fit_index], lengths[fit_index], truth[fit_index], *variant)
                out[held_index] = fitted.log_posteriors(oof[subset][:, held_index], lengths[held_index])
        value, loss = score_of(out, classes, docs, objective), float(-out[rows, truth].mean())
        tried.append({"bases": list(subset), "meta": variant[0] if variant else False,
                      "bias": variant[1] if variant else False, "reg": variant[2] if variant else None, "cv": value,
                      "log_loss": loss})
        say(f"  bases {subset} {('alone' if variant is None else 'meta=%s bias=%s reg=%g' % variant)}: "
            f"{value:.4f} (log loss {loss:.4f})")
        return value, loss

    best = max(((*score([j], None), [j], None) for j in range(len(oof))), key=lambda t: t[0])
    for j in range(len(oof)):
        for variant in BIAS_VARIANTS:
            value, loss = score([j], variant)
            if value > best[0]:
                best = (value, loss, [j], variant)
    current = best
    while len(current[2]) < len(oof):
        step = None
        for j in (j for j in range(len(oof)) if j not in current[2]):
            subset = sorted(current[2] + [j])
            for variant in SUBSET_VARIANTS:
                value, loss = score(subset, variant)
                if step is None or (value, -loss) > (step[0], -step[1]):
                    step = (value, loss, subset, variant)
        # a base joins only where the objective rises and the log loss falls: an accuracy gain of a document or
        # two alone is what a noise base's fitted weight can buy by chance
        if step is None or step[0] <= current[0] or step[1] >= current[1]:
            break
        current = step
    if len(current[2]) > 1:
        for variant in POOL_VARIANTS:
            if variant not in SUBSET_VARIANTS:
                value, loss = score(current[2], variant)
                if value > current[0]:
                    current = (value, loss, current[2], variant)
    value, _, subset, variant = current
    if variant is None:
        fitted = Pool(False, np.ones((1, 1)), np.zeros(len(classes)))
    else:
        fitted = fit_pool(oof[subset], lengths, truth, *variant)
    chosen = {"bases": subset, "meta": fitted.meta, "bias": variant[1] if variant else False,
              "reg": variant[2] if variant else None, "cv": value}
    return subset, fitted, chosen, tried


def fold_posteriors(runs: BaseRuns, parts: Sequence[tuple[list[int], list[int]]]) -> tuple[np.ndarray, list]:
    """The base posteriors behind a K-fold score of the pool, each base fitted K(K-1)/2 + K times.

    Returns ``(outer, inner)``: ``outer`` (bases, docs, classes) holds each fold scored by the bases fitted on the
    other folds; ``inner[k]`` holds every fold j != k scored by the bases fitted on the folds other than j and k
    (fold k's rows stay at the floor: pool k never reads them).
    """
    n_docs = sum(len(held) for _, held in parts)
    shape = (len(runs.configs), n_docs, len(runs.classes))
    outer = np.full(shape, FLOOR)
    inner = [np.full(shape, FLOOR) for _ in parts]
    for k, (fit, held) in enumerate(parts):
        outer[:, held] = runs.log_posteriors(fit, held)
        for j in range(k):
            left_out = set(parts[j][1]) | set(held)
            both = parts[j][1] + held
            lp = runs.log_posteriors([i for i in range(n_docs) if i not in left_out], both)
            inner[k][:, parts[j][1]] = lp[:, : len(parts[j][1])]
            inner[j][:, held] = lp[:, len(parts[j][1]):]
    return outer, inner


def cross_validate_ensemble(docs: Sequence, base_configs: Sequence[Mapping[str, Any]], setup: EvalSetup,
                            objective: str | None = None, folds: int = 5, seed: int = 1,
                            log=None) -> dict[str, Any]:
    """The ``folds``-fold cross-validated score of the pool of ``base_configs`` over the training side of
    ``docs`` (module docstring) and the pool the same procedure fits on the whole training side; the summary,
    with ``tuned_config`` and ``dev_tuned`` (the cross-validated score). The test split is never read."""
    started = time.perf_counter()
    say = log or (lambda message: None)
    train = training_side(docs, base_configs, setup, "a cross-validated ensemble score needs the split protocol")
    if is_multilabel(train):
        raise ValueError("the cross-validated ensemble score is for single-label data")
    objective = objective or "accuracy"
    if objective not in ("accuracy", "micro_f1"):
        raise ValueError("the ensemble's objective is accuracy or micro_f1")
    if not 3 <= folds <= len(train):  # K = 2 leaves the fits on all folds but two no document
        raise ValueError(f"--dev-folds {folds}: the cross-validated ensemble score needs 3 <= K <= {len(train)} "
                         f"(the training documents; each fold's pool is chosen on bases fitted on all folds but two)")
    configs = [prepare_config(c, train) for c in base_configs]
    # in the order learned: an arg-max tie (no known term, no prior) goes to the first column, the class learned
    # first, as the served pool breaks it and the single's CV does where a fold's fit learns the classes in this
    # order (by name: webkb's tXiX base 0.8559 against its single's CV 0.8594; in this order 0.8601)
    classes = list(dict.fromkeys(d.labels[0] for d in train))
    column = {c: i for i, c in enumerate(classes)}
    truth = np.array([column[d.labels[0]] for d in train])
    runs = BaseRuns(configs, train, read_as(train, uses_mail(train, setup.mail)), classes)
    lengths = Ensemble([build_model(configs[0])], [1.0]).lengths(runs.read)
    parts = cross_validation_folds(len(train), folds, seed)
    say(f"base posteriors: {len(configs)} bases x {folds * (folds - 1) // 2 + folds} fits over {len(train)} documents")
    outer, inner = fold_posteriors(runs, parts)
    base_seconds = time.perf_counter() - started

    pooled = np.zeros((len(train), len(classes)))
    per_fold = []
    for k, (fit, held) in enumerate(parts):
        say(f"fold {k}: pool chosen on the other folds ({len(fit)} documents)")
        subset, fitted, chosen, _ = choose_pool(inner[k][:, fit], lengths[fit], truth[fit], classes,
                                                [train[i] for i in fit], objective, log=say)
        pooled[held] = fitted.log_posteriors(outer[subset][:, held], lengths[held])
        # the fitted per-class biases as "bias_vector": "bias" is the chosen variant's flag, as in "chosen"
        per_fold.append({**chosen, "weights": fitted.weights.tolist(), "bias_vector": fitted.bias.tolist(),
                         "held_score": score_of(pooled[held], classes, [train[i] for i in held], objective)})
    cv_score = score_of(pooled, classes, train, objective)
    base_scores = [score_of(lp, classes, train, objective) for lp in outer]
    uniform = Pool(False, np.full((len(configs), 1), 1.0 / len(configs)), np.zeros(len(classes)))
    uniform_score = score_of(uniform.log_posteriors(outer, lengths), classes, train, objective)
    say(f"cross-validated {objective}: pool {cv_score:.4f}, bases {[round(s, 4) for s in base_scores]}")

    say("the pool on the whole training side (its out-of-fold posteriors: the folds above)")
    subset, fitted, chosen, tried = choose_pool(outer, lengths, truth, classes, train, objective, log=say)
    bias = {(str(c)): float(b) for c, b in zip(classes, fitted.bias) if b}
    ensemble = Ensemble([build_model(configs[j]) for j in subset], fitted.weights, bias, meta=fitted.meta)
    return {
        "mode": "split",
        "objective": objective,
        "search": "ensemble",
        "bases": [model_config(build_model(c)) for c in configs],
        "dev": {"folds": folds, "seed": seed, "train_docs": len(train), "test_docs": len(train)},
        "variants": tried,
        "chosen": chosen,
        "folds": per_fold,
        "dev_bases": base_scores,  # each base's own cross-validated score on the same folds
        "dev_default": max(base_scores),
        "dev_uniform": uniform_score,  # equal weights over every base, on the same folds (nothing fitted)
        "dev_tuned": cv_score,
        "evaluations": len(tried),
        "search_seconds": round(time.perf_counter() - started, 1),
        "base_seconds": round(base_seconds, 1),
        "learn_seconds": round(runs.learn_seconds, 1),
        "score_seconds": round(runs.score_seconds, 1),
        "tuned_config": model_config(ensemble),
        "meta_features": meta_feature_count(len(subset), fitted.meta),
    }
