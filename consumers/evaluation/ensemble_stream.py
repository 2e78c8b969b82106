"""Fitting an ensemble's pool on a stream's development prefix (``sgm ensemble --mode prequential``).

The split protocol's fit is ``sgm.consumers.evaluation.ensemble_fit``; this is its prequential twin. The bases
are fixed configurations, each tuned by ``sgm tune --mode prequential`` on the same dev data: the first
``dev_fraction`` of the stream in evaluation order. Only that prefix is read:

1. every base replays the dev stream test-then-train, exactly as ``sgm tune`` scores it (the same documents,
   order, delay and per-document scoring), and each document's log posteriors are kept. A document's
   posteriors come from a base that has not learned it (prequential), so they are out-of-sample by
   construction; each base's dev score from them is its ``sgm tune`` dev score;
2. pool variants (meta-features or not, per-class bias or not, L2 weight, the floor of a base's log posterior)
   are fitted by maximum likelihood (``ensemble_fit.fit_pool``) and scored by blocked cross-validation:
   the dev stream's scored documents are cut into ``folds`` consecutive blocks; each block is pooled with
   weights fitted on the other blocks. Every base alone is a variant too, scored by its own prequential dev
   score. The bases pooled are chosen on the same scores by greedy forward selection (:func:`choose_pool`):
   from the best base alone, a base is added only where the enlarged subset's best variant beats the current
   choice's dev score, so a pool is kept only where it beats every base, and each base it holds (paid for on
   every message served) earned its place on dev. Subsets reuse the bases' posteriors of step 1: no base
   replays the dev stream twice;
3. the chosen variant is fitted on every scored dev document; a pool is written as an ensemble configuration
   of the chosen bases only, a single base as that base's own configuration (its scores are then the base's).

The rest of the stream is never read: ``sgm eval --config`` of the written configuration replays the whole
stream test-then-train with every base learning online and the pool's weights fixed.

Comparability of the dev scores: each document's pooled score comes from weights fitted without that
document's block, and the bases' scores are the same prequential posteriors that give each base its tune
dev score, so the pool's dev score and the bases' are over the same documents and the same base outputs.
It is optimistic in the way theirs is (the bases' numbers were searched on this dev stream) and in one more:
the best of the pool variants is reported; it is pessimistic in that each block's weights come from three
quarters of the dev stream. ``dev_refit`` (the final pool on the dev stream it was fitted on) is in-sample
and only a check: it equals ``sgm eval --config`` of the written pool over the dev stream.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from sgm.consumers.evaluation import measures as metrics
from sgm.consumers.evaluation.documents import documents as read_as, uses_mail
from sgm.consumers.evaluation.ensemble_fit import VARIANTS, Pool, fit_pool
from sgm.consumers.evaluation.harness import (EvalSetup, is_multilabel, labelled, positive_label, positive_log_odds,
                                              prepare_config, stream_order)
from sgm.model import Ensemble, build_model, model_config
from sgm.model.ensemble import FLOOR, meta_feature_count

#: Floors of a base's log posterior tried with every pool variant: the model's default, and one low enough that
#: long messages' confident log-odds (hundreds of nats) keep their order instead of tying at the floor.
FLOORS = (FLOOR, -1000.0)
#: Objectives of the prequential fit: the dev measures ``sgm tune`` ranks by that a pool can be scored on.
OBJECTIVES = ("roc_auc", "accuracy")


@dataclass
class StreamPasses:
    """Every base's prequential log posteriors over one stream.

    ``log_posts`` (bases, docs, classes) in ``classes`` order, unfloored (a class a base had no posterior for:
    ``-inf``); ``present`` (docs, classes): the classes the models knew when the document was scored (every base
    learned the same documents, so they agree); ``scored``: documents scored (the model had learned something).
    """

    classes: list
    log_posts: np.ndarray
    present: np.ndarray
    scored: np.ndarray
    learn_seconds: float
    score_seconds: float
    learned: int


def prequential_passes(configs: Sequence[Mapping[str, Any]], stream: Sequence, documents: Sequence,
                       delay: int = 0) -> StreamPasses:
    """Each base replays ``stream`` (labelled documents; ``documents``: as the models read them) test-then-train
    as ``harness.evaluate_prequential`` does (one document scored at a time, a label learned ``delay`` documents
    later), keeping every document's log posteriors."""
    # in the order the stream teaches them, not by name: an arg-max tie goes to the first column, the class learned
    # first, as each base's own prequential accuracy and the served pool break it
    classes = list(dict.fromkeys(label for d in stream for label in d.labels))
    column = {c: i for i, c in enumerate(classes)}
    n = len(stream)
    out = np.full((len(configs), n, len(classes)), -np.inf)
    present = np.zeros((n, len(classes)), dtype=bool)
    scored = np.zeros(n, dtype=bool)
    learn_seconds = score_seconds = 0.0
    learned = 0
    for j, config in enumerate(configs):
        model = build_model(config)
        pending: list[int] = []
        for index, doc in enumerate(stream):
            if len(model):
                started = time.perf_counter()
                names, lp = model.predict_log_proba_many([documents[index]])
                score_seconds += time.perf_counter() - started
                columns = [column[c] for c in names]
                out[j, index, columns] = lp[0]
                present[index, columns] = True
                scored[index] = True
            pending.append(index)
            while len(pending) > delay:
                ready = pending.pop(0)
                started = time.perf_counter()
                model.learn_one(documents[ready], stream[ready].labels, ts=stream[ready].ts, id=stream[ready].id)
                learn_seconds += time.perf_counter() - started
                learned += 1
    return StreamPasses(classes, out, present, scored, learn_seconds, score_seconds, learned)


def pooled(fitted: Pool, log_posts: np.ndarray, present: np.ndarray, lengths: np.ndarray,
           floor: float) -> np.ndarray:
    """The pool's log posteriors per document (docs, classes), over the classes the models knew then (the others
    ``-inf``), as ``Ensemble.predict_log_proba_many`` computes them with that floor."""
    out = np.full(log_posts.shape[1:], -np.inf)
    floored = np.maximum(np.nan_to_num(log_posts, nan=floor, neginf=floor), floor)
    for pattern in {tuple(row) for row in present.tolist()}:
        rows = np.flatnonzero((present == np.array(pattern)).all(axis=1))
        cols = np.flatnonzero(pattern)
        if not len(cols):
            continue
        bias = fitted.bias[cols]
        out[np.ix_(rows, cols)] = Pool(fitted.meta, fitted.weights, bias).log_posteriors(
            floored[:, rows][:, :, cols], lengths[rows])
    return out


def dev_value(log_post: np.ndarray, classes: list, truth: np.ndarray, objective: str) -> float:
    """``objective`` of per-document log posteriors (docs, classes) against true columns ``truth``: ROC AUC of
    the positive label's log-odds (two labels), or arg-max accuracy, as ``harness.measures`` computes them."""
    if objective == "roc_auc":
        positive = classes.index(positive_label(classes))
        value = metrics.roc_auc(truth == positive, positive_log_odds(log_post, positive))
    else:
        value = float((log_post.argmax(axis=1) == truth).mean()) if len(truth) else None
    return float("-inf") if value is None else float(value)


def blocks(n: int, folds: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``folds`` consecutive blocks of ``range(n)``: ``(fit, held-out)`` index arrays, each block held out once.

    >>> [held.tolist() for _, held in blocks(7, 3)]
    [[0, 1], [2, 3], [4, 5, 6]]
    """
    if not 2 <= folds <= n:
        raise ValueError(f"need 2 <= folds <= {n} scored dev documents")
    edges = np.linspace(0, n, folds + 1).astype(int)
    every = np.arange(n)
    return [(np.concatenate([every[: edges[k]], every[edges[k + 1]:]]), every[edges[k]: edges[k + 1]])
            for k in range(folds)]


@dataclass
class PoolChoice:
    """What :func:`choose_pool` chose: every variant's dev score (``"bases"``: the subset a pool variant pools), the
    chosen one, every subset tried with its best variant's dev score (``subsets``), the chosen subset ``bases`` (a
    single base: ``[j]``), and (a pool) its fit on every scored document with its in-sample dev score ``refit``;
    ``uniform``: the equal-weight pool of every base's dev score (nothing fitted, the default floor)."""

    variants: list
    chosen: dict
    truth: np.ndarray
    fitted: Pool | None
    refit: float
    uniform: float
    subsets: list
    bases: list


def subset_variants(log_posts: np.ndarray, present: np.ndarray, lengths: np.ndarray, truth: np.ndarray,
                    classes: list, objective: str, folds: int, fit_rows: np.ndarray, subset: list,
                    say=lambda message: None) -> list[dict]:
    """Every pool variant of the bases ``subset`` (rows of ``log_posts``, the scored dev documents' posteriors),
    each scored by blocked cross-validation (module docstring, step 2). The bases' posteriors are read, never
    recomputed: a subset costs pool fits only."""
    chosen_posts = log_posts[subset]
    variants = []
    for floor in FLOORS:
        for meta, with_bias, reg in VARIANTS:
            out = np.full(chosen_posts.shape[1:], -np.inf)
            for fit_index, held_index in blocks(len(truth), folds):
                fit_index = fit_index[fit_rows[fit_index]]
                fitted = fit_pool(np.maximum(chosen_posts[:, fit_index], floor), lengths[fit_index],
                                  truth[fit_index], meta, with_bias, reg)
                out[held_index] = pooled(fitted, chosen_posts[:, held_index], present[held_index],
                                         lengths[held_index], floor)
            value = dev_value(out, classes, truth, objective)
            variants.append({"bases": list(subset), "meta": meta, "bias": with_bias, "reg": reg, "floor": floor,
                             "cv": value})
            say(f"  pool of bases {subset} floor={floor:g} meta={meta} bias={with_bias} reg={reg:g}: blocked "
                f"cross-validated {objective} {value:.6f}")
    return variants


def choose_pool(passes: StreamPasses, lengths: np.ndarray, labels: Sequence, objective: str, folds: int,
                say=lambda message: None) -> PoolChoice:
    """Step 2 and 3 of the module docstring over prequential ``passes`` of a dev stream (``lengths``: the length
    meta-feature of every document (docs,), or as each base reads it (bases, docs): a pool reads its first base's;
    ``labels`` their single labels).

    The bases pooled are chosen by greedy forward selection on the same blocked cross-validation: start from the
    best base alone; at each step try adding each remaining base (every pool variant of each enlarged subset) and
    keep the best enlarged subset only if its dev score beats the current one's, else stop. A base costs its
    learning and scoring on every message served, so a larger pool has to earn its place on dev.
    """
    column = {c: i for i, c in enumerate(passes.classes)}
    rows = np.flatnonzero(passes.scored)
    truth = np.array([column[labels[i]] for i in rows])
    log_posts, present = passes.log_posts[:, rows], passes.present[rows]
    n_bases = log_posts.shape[0]
    lengths = np.asarray(lengths, dtype=np.float64)
    per_base = [lengths[j][rows] if lengths.ndim == 2 else lengths[rows] for j in range(n_bases)]
    fit_rows = present.all(axis=1)  # documents scored before every class was seen tell the pool nothing
    variants = []
    for j in range(n_bases):  # each base alone: its own prequential dev score, nothing fitted
        value = dev_value(log_posts[j], passes.classes, truth, objective)
        variants.append({"meta": False, "bias": False, "reg": None, "floor": None, "base": j, "cv": value})
        say(f"  base {j} alone: prequential dev {objective} {value:.6f}")
    chosen = max(variants, key=lambda v: v["cv"])  # the first of ties
    current = [chosen["base"]]
    subsets = [{"bases": list(current), "cv": chosen["cv"]}]
    while len(current) < n_bases:
        step = None
        for j in (j for j in range(n_bases) if j not in current):
            subset = sorted(current + [j])
            tried = subset_variants(log_posts, present, per_base[subset[0]], truth, passes.classes, objective, folds,
                                    fit_rows, subset, say)
            variants += tried
            best = max(tried, key=lambda v: v["cv"])  # the first of ties: the simplest pool
            subsets.append({"bases": subset, "cv": best["cv"]})
            if step is None or best["cv"] > step["cv"]:
                step = best
        if step["cv"] <= chosen["cv"]:  # a larger pool is kept only where it beats the smaller one on dev
            break
        chosen, current = step, step["bases"]
        say(f"  kept bases {current}: blocked cross-validated {objective} {chosen['cv']:.6f}")
    lengths_all = per_base[0]
    equal = Pool(False, np.full((n_bases, 1), 1.0 / n_bases), np.zeros(len(passes.classes)))
    uniform = dev_value(pooled(equal, log_posts, present, lengths_all, FLOOR), passes.classes, truth, objective)
    if "base" in chosen:
        return PoolChoice(variants, chosen, truth, None, chosen["cv"], uniform, subsets, current)
    fit_index = np.flatnonzero(fit_rows)
    floor, chosen_posts, chosen_lengths = chosen["floor"], log_posts[current], per_base[current[0]]
    fitted = fit_pool(np.maximum(chosen_posts[:, fit_index], floor), chosen_lengths[fit_index], truth[fit_index],
                      chosen["meta"], chosen["bias"], chosen["reg"])
    refit = dev_value(pooled(fitted, chosen_posts, present, chosen_lengths, floor), passes.classes, truth, objective)
    return PoolChoice(variants, chosen, truth, fitted, refit, uniform, subsets, current)


def base_lengths(configs: Sequence[Mapping[str, Any]], read: Sequence) -> np.ndarray:
    """The length meta-feature of every document as a pool whose first base is each of ``configs`` reads it
    (bases, docs): a text's word tokens whatever the base (counted once); a whole message's terms as that base's
    mail options and tokenizer read it."""
    if all(isinstance(doc, str) for doc in read):
        once = Ensemble([build_model(configs[0])], [1.0]).lengths(read)
        return np.tile(once, (len(configs), 1))
    return np.stack([Ensemble([build_model(config)], [1.0]).lengths(read) for config in configs])


def fit_stream_ensemble(docs: Sequence, base_configs: Sequence[Mapping[str, Any]], setup: EvalSetup,
                        objective: str | None = None, dev_fraction: float = 0.25, folds: int = 4,
                        log=None) -> dict[str, Any]:
    """Fit the pool of ``base_configs`` on the dev prefix of ``docs``' stream (module docstring); the summary, with
    ``tuned_config`` (the ensemble's configuration, or the chosen base's) and ``dev_tuned`` (its dev score)."""
    if setup.mode != "prequential":
        raise ValueError("the stream fit is for the prequential protocol (--mode prequential)")
    if not base_configs:
        raise ValueError("an ensemble needs at least one base configuration (--base)")
    started = time.perf_counter()
    say = log or (lambda message: None)
    stream = labelled(stream_order(docs, setup.shuffle_seed))
    dev = stream[: max(2, round(len(stream) * dev_fraction))]  # the dev stream sgm tune --mode prequential reads
    if is_multilabel(dev):
        raise ValueError("the stream fit pools single-label streams")
    classes = list(dict.fromkeys(d.labels[0] for d in dev))
    if objective is None:
        objective = "roc_auc" if len(classes) == 2 else "accuracy"
    if objective not in OBJECTIVES:
        raise ValueError(f"the stream ensemble's objective is one of {OBJECTIVES}")
    if objective == "roc_auc" and len(classes) != 2:
        raise ValueError("roc_auc needs two-label data")
    configs = [prepare_config(c, dev) for c in base_configs]
    read = read_as(dev, uses_mail(dev, setup.mail))
    say(f"prequential passes of {len(configs)} bases over the dev stream ({len(dev)} documents)")
    passes = prequential_passes(configs, dev, read, setup.delay)
    choice = choose_pool(passes, base_lengths(configs, read), [d.labels[0] for d in dev], objective, folds, say)
    variants, chosen, kept = choice.variants, choice.chosen, choice.bases
    base_scores = [v["cv"] for v in variants if "base" in v]
    summary: dict[str, Any] = {
        "mode": "prequential",
        "objective": objective,
        "search": "ensemble",
        "bases": [model_config(build_model(c)) for c in configs],
        "dev": {"fraction": dev_fraction, "folds": folds, "stream_docs": len(dev), "scored_docs": len(choice.truth),
                "delay": setup.delay, "order": "ts" if setup.shuffle_seed is None else
                f"shuffled(seed={setup.shuffle_seed})"},
        "variants": variants,
        "subsets": choice.subsets,
        "chosen_bases": kept,
        "chosen": chosen,
        "dev_bases": base_scores,
        "dev_default": max(base_scores),  # the best single base: what the pool has to beat
        "dev_uniform": choice.uniform,
        "dev_tuned": chosen["cv"],
        "evaluations": len(variants),
        "learn_seconds": round(passes.learn_seconds, 1),
        "score_seconds": round(passes.score_seconds, 1),
    }
    if "base" in chosen:
        summary["tuned_config"] = summary["bases"][chosen["base"]]
        summary["dev_refit"] = chosen["cv"]
        summary["meta_features"] = None
    else:
        fitted, floor = choice.fitted, chosen["floor"]
        summary["dev_refit"] = choice.refit
        bias = {str(c): float(b) for c, b in zip(passes.classes, fitted.bias) if b}
        ensemble = Ensemble([build_model(configs[j]) for j in kept], fitted.weights, bias, meta=fitted.meta,
                            floor=floor)
        summary["tuned_config"] = model_config(ensemble)
        summary["meta_features"] = meta_feature_count(len(kept), fitted.meta)
    summary["search_seconds"] = round(time.perf_counter() - started, 1)
    return summary
