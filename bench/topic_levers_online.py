"""The online form of the tied term weights (issue 19): ``s`` moved by one gradient step per learned document.

    python -m bench.topic_levers --data r52 CONFIG.json --lever tied-online [--etas 0.01,0.03,0.1,0.3]
                                 [--regs 0,0.003] [--epochs 2] [--stream-seed 0]

``bench.topic_levers``' ``tied-weights`` fits ``s`` (one factor ``s_n >= 0`` per term, tied across labels; the
score ``theta log p(l) + sum_n g(n) s_n c_n log p_l(n)``) offline, by L-BFGS-B on out-of-fold likelihoods. The
service learns one document at a time, so here, per outer fold of the same CV folds: the fold's training side is
streamed in a seeded order (``--stream-seed``); each document is scored by the model as it is (learned on the
documents before it: its likelihoods are honest, as in the inner folds) and the current ``s``, one projected
gradient step of its conditional log likelihood moves the ``s_n`` of its known terms,

    s_n <- max(0, s_n + eta (c_n g(n) (log p_y(n) - sum_l p(l|d) log p_l(n)) - 2 (reg / df_n) (s_n - 1))),

and the model then learns it. ``df_n`` is the number of steps that have touched term ``n``, this one included: the
offline penalty ``reg |s - 1|^2`` spread over the documents holding the term, so one pass applies about the
offline penalty's pull (``reg H(df_n)``, H the harmonic number: ``ln df_n + 0.58`` times it). After the stream
the final model scores the held fold with ``r_n = g(n) s_n`` (terms never stepped keep ``s = 1``). A second epoch
(``--epochs 2``, a ceiling: a service sees each document once) replays the same recorded steps' inputs (the
likelihoods each document had before it was learned) with the ``s`` of the first pass. Each document's block is
read once from the model's posting cache (:func:`bench.topic_levers.term_block`) and kept, so every
``(eta, reg)`` runs over the same stream; at ``s = 1`` the blocks' log posteriors are checked against the model's
own (the report's ``check``). "plain" is the streamed model at ``s = 1``; "fixed/broken" are against it.

Measured 2026-11-27 (see the bottom of this docstring; docs/EVALUATION.md has the summary).
"""
from __future__ import annotations

import collections
import time

import numpy as np
from scipy.special import logsumexp

from bench.topic_levers import Folds, block_scores, check_block, merge, scored_settings, term_block
from sgm.model import build_model


def online_gradient(record: dict, s: np.ndarray) -> np.ndarray:
    """The gradient of one document's conditional log likelihood ``log p(y|d)`` in the ``s`` of its terms
    (``record``: ``index`` into ``s``, ``xg`` = ``c_n g(n)``, ``table`` = ``log p_l(n)``, ``prior``, ``y``):
    ``c_n g(n) (log p_y(n) - sum_l p(l|d) log p_l(n))``."""
    table = record["table"]
    scores = record["prior"] + (record["xg"] * s[record["index"]]) @ table
    p = np.exp(scores - logsumexp(scores))
    return record["xg"] * (table[:, record["y"]] - table @ p)


def online_step(s: np.ndarray, df: np.ndarray, record: dict, eta: float, reg: float,
                squares: np.ndarray | None = None) -> None:
    """One projected gradient step on ``s`` (in place) for one document; ``df`` counts the steps per term. With
    ``squares`` (the running sums of each term's squared steps, updated in place) the step is AdaGrad's:
    ``eta`` divided per term by the root of that sum."""
    index = record["index"]
    df[index] += 1
    local = s[index]
    direction = online_gradient(record, s) - 2.0 * reg / df[index] * (local - 1.0)
    if squares is not None:
        squares[index] += direction**2
        direction = direction / np.sqrt(np.maximum(squares[index], 1e-300))
    s[index] = np.maximum(local + eta * direction, 0.0)


class Averaged:
    """The mean of ``s`` over the steps so far (Polyak-Ruppert averaging), kept lazily: a term's running total
    is brought up to date only when a step touches it."""

    def __init__(self, s: np.ndarray) -> None:
        self.total, self.last, self.t = np.zeros(len(s)), np.zeros(len(s)), 0

    def before(self, s: np.ndarray, index: np.ndarray) -> None:
        """Call before the step ``t + 1`` moves ``s[index]``; :meth:`after` after it."""
        self.total[index] += s[index] * (self.t - self.last[index])
        self.last[index] = self.t
        self.t += 1

    def after(self, s: np.ndarray, index: np.ndarray) -> None:
        self.total[index] += s[index]
        self.last[index] = self.t

    def mean(self, s: np.ndarray) -> np.ndarray:
        return (self.total + s * (self.t - self.last)) / max(self.t, 1)


def streamed(folds: Folds, train, fit_idx, seed: int, check_every: int = 500) -> tuple[list, dict, object, float, float]:
    """The fold's training side learned one document at a time in a seeded order, each read as a step record
    before it is learned; the records (documents whose label the model had not learned yet have none), the
    global term index, the final model, the largest block-vs-model difference and the seconds."""
    started = time.perf_counter()
    order = np.random.default_rng(seed).permutation(len(fit_idx))
    documents = folds.documents(np.asarray(fit_idx)[order])
    truth = folds.truth(train)
    model = build_model(folds.config)
    records, index, worst = [], {}, 0.0
    for k, (i, doc) in enumerate(zip(order, documents)):
        y = int(truth[i])
        if k:
            block = term_block(folds, model, [doc])
            if block["prior"][y] > -1e8 and block["terms"]:
                if k % check_every == 0:
                    worst = max(worst, check_block(folds, model, [doc], block))
                records.append({"index": np.array([index.setdefault(t, len(index)) for t in block["terms"]],
                                                  dtype=np.int64),
                                "xg": np.asarray(block["x"].toarray()[0] * block["g"]), "table": block["table"],
                                "prior": block["prior"], "y": y})
        d = train[i]
        model.learn_many([doc], [d.labels], ts=[d.ts], ids=[d.id])
    return records, index, model, worst, time.perf_counter() - started


def tied_online(folds: Folds, etas: list[float], regs: list[float], epochs: int = 1, seed: int = 0,
                variants: tuple[str, ...] = ("sgd",)) -> dict:
    """Per outer fold: the stream of :func:`streamed`, then per variant (``sgd``: a constant step; ``adagrad``)
    and ``(eta, reg)`` the steps over it (``epochs`` passes, each pass scored), and the held fold scored by the
    final model with ``r = g s``: ``s`` the last one, and ``averaged``, its mean over the steps."""
    settings: dict[str, list[np.ndarray]] = collections.defaultdict(list)
    report: dict[str, dict] = collections.defaultdict(lambda: {"seconds": 0.0, "mean s": [], "moved": []})
    worst, stream_seconds, steps = 0.0, 0.0, 0
    for train, test, (fit_idx, held_idx) in folds.task.folds:
        records, index, model, diff, seconds = streamed(folds, train, fit_idx, seed)
        worst, stream_seconds, steps = max(worst, diff), stream_seconds + seconds, steps + len(records)
        held_docs = folds.documents(held_idx)
        outer = term_block(folds, model, held_docs)
        worst = max(worst, check_block(folds, model, held_docs, outer))
        settings["plain"].append(block_scores(outer, outer["g"]))
        seen = np.array([index.get(t, -1) for t in outer["terms"]], dtype=np.int64)
        for variant in variants:
            for eta in etas:
                for reg in regs:
                    started = time.perf_counter()
                    s, df = np.ones(len(index)), np.zeros(len(index))
                    squares = np.zeros(len(index)) if variant == "adagrad" else None
                    average = Averaged(s)
                    for epoch in range(1, epochs + 1):
                        for record in records:
                            average.before(s, record["index"])
                            online_step(s, df, record, eta, reg, squares)
                            average.after(s, record["index"])
                        for kind, value in (("", s), (" averaged", average.mean(s))):
                            r = outer["g"].copy()
                            r[seen >= 0] *= value[seen[seen >= 0]]
                            name = (f"{'' if variant == 'sgd' else variant + ' '}eta={eta} reg={reg}{kind}"
                                    + (f" epochs={epoch}" if epoch > 1 else ""))
                            settings[name].append(block_scores(outer, r))
                            report[name]["mean s"].append(round(float(value.mean()), 3))
                            report[name]["moved"].append(int((value != 1.0).sum()))  # terms whose s left 1
                            report[name]["seconds"] += time.perf_counter() - started  # cumulative over epochs
                    print(f"  fold {len(settings['plain'])} {variant} eta={eta} reg={reg}: mean s {s.mean():.3f}, "
                          f"max {s.max():.2f}, zero {(s == 0).mean():.3f}, {time.perf_counter() - started:.1f} s",
                          flush=True)
        print(f"  fold {len(settings['plain'])}: {len(records)} steps, stream {seconds:.1f} s", flush=True)
    scores = scored_settings(folds, dict(settings))
    scores["chosen on the other folds, epochs=2 too"] = scores.pop("chosen on the other folds")
    one_pass = {k: v for k, v in settings.items() if "epochs=" not in k}  # what a service sees: one pass
    scores["chosen on the other folds"] = scored_settings(folds, one_pass)["chosen on the other folds"]
    out = merge(scores, {k: {**v, "seconds": round(v["seconds"], 1)} for k, v in report.items()})
    out["check"] = {"largest log posterior difference at s = 1": worst}
    out["stream"] = {"seconds (score + learn, one document at a time)": round(stream_seconds, 1), "steps": steps}
    return out
