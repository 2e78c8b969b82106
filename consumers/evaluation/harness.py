"""Offline evaluation of a model configuration on a labelled dataset (``sgm eval``, and ``sgm tune``'s points).

The runner behind ``sgm eval`` and ``sgm tune`` (see ``docs/EVALUATION.md``; the development data a
tuning run scores its points on: :mod:`sgm.consumers.evaluation.dev_task`). Two protocols:

``split``
    Learn the ``train`` documents in one batch (batch TF-IDF, as the thesis
    does), score the ``test`` documents. A dataset without a standard split
    gets a seeded random one (``test_fraction``).
``prequential``
    Test-then-train in stream order: each document is scored by the model as
    it stands, then learned one at a time (so TF-IDF uses the statistics in
    force when a document arrives). With ``delay=N`` a document's label
    becomes available only after the next ``N`` documents have been scored
    (delayed feedback). The order is ``ts`` order (stable; undated documents
    last), or a seeded shuffle for sets without a usable order.

Label sets. Documents without labels cannot be learned or scored for
correctness and are left out (reported as ``dropped_unlabelled``).
Multi-label data is classified in label-powerset mode by default (one class
per label set, arg-max output; the thesis's mapping, MODEL.md section 8);
with ``multilabel="per_label"`` a document is counted under each of its
labels and the output is every label with posterior at least ``threshold``
(the arg-max label when none reaches it). A powerset configuration with a
``label_threshold`` outputs instead the labels whose marginal probability (the
summed posterior of the label sets holding the label) reaches it, or the top
one (:mod:`sgm.model.label_marginals`; chosen on dev by ``sgm tune
--label-threshold auto``, :mod:`sgm.consumers.evaluation.label_thresholds`).

Measures (:mod:`sgm.consumers.evaluation.measures`): accuracy (exact label-set match),
Micro-F1, Macro-F1, log loss (of the true class: the label, or the label set in
powerset mode; ``None`` for per-label multi-label output), and for two-label
data ROC AUC and 1-ROCA% ranked by the positive label's log-odds, the
false-positive and false-negative rates of the decisions (the arg-max, or a
:class:`~sgm.consumers.decision.SpamDecision`: threshold and learn guards, which
then also decides the output labels), and the false-negative rate at 0.1% and 1%
false positives.

Whole messages (``raw_b64`` data) are read by the model itself, as
:class:`sgm.model.mail.Message` (``consumers/evaluation/documents.py``).
"""
from __future__ import annotations

import math
import os
import random
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from sgm.model import build_model, model_config
from sgm.model.label_marginals import label_marginals, labels_at_threshold
from sgm.consumers.decision import SpamDecision
from sgm.consumers.evaluation import measures as metrics
from sgm.consumers.evaluation.documents import documents as read_as, route_mail_params, uses_mail
from sgm.stream.datasets import (LabelledDoc, find_dataset, load_jsonl, missing_dataset_message,
                                 split as split_by_field, time_ordered)

MODES = ("split", "prequential")
OBJECTIVES = ("accuracy", "micro_f1", "macro_f1", "roc_auc", "neg_log_loss")
#: Labels treated as the positive class of a two-label task, if present (else the second label in sort order).
POSITIVE_NAMES = ("spam",)
#: Default posterior threshold of per-label multi-label output.
DEFAULT_THRESHOLD = 0.3
#: Documents scored per model call in split mode (bounds memory; lets the progress bar move).
SCORE_BATCH = 512
#: False-positive rates (fractions) at which the false-negative rate is reported.
FP_TARGETS = (0.001, 0.01)
#: Log-odds are clipped to this magnitude (a posterior of exactly 0 or 1 would be infinite).
MAX_LOG_ODDS = 1e300


# ---------------------------------------------------------------- data
def resolve_data(name_or_path: str | os.PathLike) -> Path:
    """A dataset file from a path or a shared dataset name (``"r8"``).

    >>> resolve_data("no-such-dataset")
    Traceback (most recent call last):
    ...
    FileNotFoundError: no dataset file or shared dataset named 'no-such-dataset'
    ...
    """
    found = find_dataset(str(name_or_path))
    if found is None:
        raise FileNotFoundError(missing_dataset_message(str(name_or_path)))
    return found


def load_examples(path: str | os.PathLike, limit: int | None = None) -> list[LabelledDoc]:
    """All documents of a dataset file (``.jsonl`` or ``.jsonl.gz``), in file order."""
    return list(load_jsonl(resolve_data(path), limit=limit))


def has_standard_split(docs: Sequence[LabelledDoc]) -> bool:
    """True when the data has both ``train`` and ``test`` documents."""
    parts = split_by_field(docs)
    return bool(parts.train) and bool(parts.test)


def is_multilabel(docs: Iterable[LabelledDoc]) -> bool:
    """True when some document has more than one label."""
    return any(len(d.labels) > 1 for d in docs)


def labelled(docs: Iterable[LabelledDoc]) -> list[LabelledDoc]:
    return [d for d in docs if d.labels]


def train_test(docs: Sequence[LabelledDoc], test_fraction: float = 0.2, seed: int = 0) -> tuple[list, list]:
    """The standard split, or (no ``train``/``test`` documents) a seeded random one.

    >>> docs = [LabelledDoc(str(i), "", ("x",), None, None) for i in range(10)]
    >>> [len(p) for p in train_test(docs, 0.3, seed=1)]
    [7, 3]
    """
    parts = split_by_field(docs)
    if parts.train and parts.test:
        return parts.train, parts.test
    return random_partition(list(docs), test_fraction, seed)


def random_partition(docs: list, second_fraction: float, seed: int) -> tuple[list, list]:
    """Seeded random partition keeping input order within each part."""
    if not 0 < second_fraction < 1:
        raise ValueError("the held-out fraction must be in (0, 1)")
    order = list(range(len(docs)))
    random.Random(seed).shuffle(order)
    cut = round(len(docs) * second_fraction)
    held = set(order[:cut])
    return [d for i, d in enumerate(docs) if i not in held], [d for i, d in enumerate(docs) if i in held]


def cross_validation_folds(n: int, folds: int, seed: int) -> list[tuple[list[int], list[int]]]:
    """``folds`` seeded ``(fit, held-out)`` index partitions of ``range(n)``, each index held out once.

    >>> [held for _, held in cross_validation_folds(6, 3, seed=0)]
    [[0, 4], [2, 5], [1, 3]]
    """
    if not 2 <= folds <= n:
        raise ValueError(f"need 2 <= folds <= {n}")
    order = list(range(n))
    random.Random(seed).shuffle(order)
    out = []
    for k in range(folds):
        held = set(order[k::folds])
        out.append(([i for i in range(n) if i not in held], [i for i in range(n) if i in held]))
    return out


def stream_order(docs: Sequence[LabelledDoc], shuffle_seed: int | None = None) -> list[LabelledDoc]:
    """Prequential order: by ``ts`` (stable, undated last), or a seeded shuffle."""
    if shuffle_seed is None:
        return time_ordered(docs)
    shuffled = list(docs)
    random.Random(shuffle_seed).shuffle(shuffled)
    return shuffled


def positive_label(labels: Iterable[str]) -> str | None:
    """The positive label of a two-label task (``spam`` if present), else ``None``.

    >>> positive_label(["ham", "spam"]), positive_label(["neg", "pos"]), positive_label(["a", "b", "c"])
    ('spam', 'pos', None)
    """
    names = sorted(set(labels))
    if len(names) != 2:
        return None
    for name in POSITIVE_NAMES:
        if name in names:
            return name
    return names[1]


# ---------------------------------------------------------------- progress
class Progress:
    """A one-line progress bar on stderr (only when enabled, e.g. stderr is a terminal).

    >>> bar = Progress(10, "demo", enabled=False); bar.update(5); bar.close()
    """

    def __init__(self, total: int, label: str, enabled: bool | None = None, stream=None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.total, self.label = max(int(total), 1), label
        self.done, self.started, self.drawn = 0, time.perf_counter(), 0.0

    def update(self, count: int = 1) -> None:
        self.done += count
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self.drawn < 0.2 and self.done < self.total:
            return
        self.drawn = now
        share = min(self.done / self.total, 1.0)
        filled = int(share * 30)
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (30 - filled)}] {share:6.1%} "
                          f"{self.done}/{self.total} {now - self.started:6.1f}s")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


# ---------------------------------------------------------------- scoring
@dataclass
class Outcomes:
    """Per scored document: truth, output and the probabilities the measures need."""

    true_sets: list[frozenset] = field(default_factory=list)
    predicted_sets: list[frozenset] = field(default_factory=list)
    p_true: list[float] = field(default_factory=list)  # posterior of the true class (NaN: undefined)
    p_positive: list[float] = field(default_factory=list)  # posterior of the positive label (two-label data)
    ts: list[float | None] = field(default_factory=list)
    positive_odds: list[float] = field(default_factory=list)  # its log-odds, what ROC measures rank by
    verdicts: list[str] = field(default_factory=list)  # the SpamDecision's, when one is set

    def __len__(self) -> int:
        return len(self.true_sets)

    @property
    def correct(self) -> list[bool]:
        return [t == p for t, p in zip(self.true_sets, self.predicted_sets)]


class Scorer:
    """Turns a model's posteriors into outputs for one labelling scheme.

    ``multilabel`` is the model's mode; ``threshold`` applies to per-label
    output on multi-label data (``None``: single-label data, arg-max output);
    ``decision`` (two-label data) replaces the arg-max by a spam verdict;
    ``label_threshold`` (powerset mode) outputs the labels whose marginal reaches it, as the model does.
    """

    def __init__(self, multilabel: str, threshold: float | None, positive: str | None,
                 decision: SpamDecision | None = None, label_threshold: float | None = None) -> None:
        self.multilabel, self.threshold, self.positive = multilabel, threshold, positive
        self.decision, self.label_threshold = decision, label_threshold

    def true_class(self, labels: tuple[str, ...]):
        if self.multilabel == "powerset":
            return tuple(sorted(labels))
        if len(labels) == 1:
            return labels[0]
        return None  # per-label output of a multi-label document: no single true class

    def score(self, model, documents: Sequence, docs: Sequence[LabelledDoc], outcomes: Outcomes) -> None:
        classes, log_post = model.predict_log_proba_many(documents)
        post = np.exp(log_post)
        column = {c: i for i, c in enumerate(classes)}
        best = np.argmax(log_post, axis=1)  # ties: the first (lowest class id), as predict_one
        positive_col = column.get(self.positive) if self.positive is not None else None
        if self.positive is not None:
            outcomes.positive_odds.extend(positive_log_odds(log_post, positive_col).tolist())
        decision, learned, shift = self.decision, None, None
        if decision is not None:
            learned, shift = decision.learned_from(model), decision.prior_shift(model)
            shown = [("+".join(c) if isinstance(c, tuple) else c) for c in classes]
        marginal_sets = None
        if self.multilabel == "powerset" and self.label_threshold is not None and decision is None:
            marginal_sets = labels_at_threshold(*label_marginals(classes, post), self.label_threshold)
        for index, (row, doc, top) in enumerate(zip(post, docs, best.tolist())):
            if decision is not None:
                p_spam = decision.posterior(shown, row.tolist(), shift)
                verdict = decision.verdict(p_spam, learned)
                outcomes.verdicts.append(verdict)
                ranked = [classes[i] for i in np.argsort(-row, kind="stable").tolist()]
                predicted = frozenset(decision.labels(verdict, ranked))
            elif marginal_sets is not None:
                predicted = frozenset(marginal_sets[index])
            elif self.multilabel == "powerset":
                predicted = frozenset(classes[top])
            elif self.threshold is None:
                predicted = frozenset([classes[top]])
            else:
                chosen = [classes[i] for i in np.flatnonzero(row >= self.threshold).tolist()]
                predicted = frozenset(chosen or [classes[top]])
            truth = self.true_class(doc.labels)
            outcomes.true_sets.append(frozenset(doc.labels))
            outcomes.predicted_sets.append(predicted)
            if truth is None:
                outcomes.p_true.append(math.nan)
            else:
                outcomes.p_true.append(float(row[column[truth]]) if truth in column else 0.0)
            if self.positive is not None:
                outcomes.p_positive.append(float(row[positive_col]) if positive_col is not None else 0.0)
            outcomes.ts.append(doc.ts)


def positive_log_odds(log_post: np.ndarray, column: int | None) -> np.ndarray:
    """``log p(positive) - log p(not positive)`` per row, clipped to +-:data:`MAX_LOG_ODDS`.

    What two-label ROC measures rank by: posteriors saturate at 1.0 in floating point and
    would tie confident documents; log-odds keep them apart.

    >>> positive_log_odds(np.log(np.array([[0.9, 0.1], [0.5, 0.5]])), 0).round(6).tolist()
    [2.197225, 0.0]
    """
    n = log_post.shape[0]
    if column is None:
        return np.full(n, -MAX_LOG_ODDS)
    rest = np.delete(log_post, column, axis=1)
    others = np.logaddexp.reduce(rest, axis=1) if rest.shape[1] else np.full(n, -np.inf)
    return np.clip(np.nan_to_num(log_post[:, column] - others, nan=0.0), -MAX_LOG_ODDS, MAX_LOG_ODDS)


def measures(outcomes: Outcomes, positive: str | None, decision: SpamDecision | None = None) -> dict[str, Any]:
    """The report's measures from per-document outcomes (``None`` where one does not apply)."""
    p_true = np.array(outcomes.p_true, dtype=np.float64)
    log_loss = None
    if len(p_true) and not np.isnan(p_true).any():
        log_loss = metrics.mean_log_loss(p_true)
    auc = fp_rate = fn_rate = None
    fn_at_fp: dict[str, float | None] | None = None
    if positive is not None and len(outcomes):
        truth = [positive in t for t in outcomes.true_sets]
        auc = metrics.roc_auc(truth, outcomes.positive_odds)
        said = [v == "spam" for v in outcomes.verdicts] if decision is not None else \
            [positive in p for p in outcomes.predicted_sets]
        fp_rate, fn_rate = metrics.error_rates(truth, said)
        fn_at_fp = {f"{100 * target:g}": metrics.fn_rate_at_fp_rate(truth, outcomes.positive_odds, target)
                    for target in FP_TARGETS}
    return {
        "accuracy": metrics.accuracy(outcomes.true_sets, outcomes.predicted_sets),
        "micro_f1": metrics.micro_f1(outcomes.true_sets, outcomes.predicted_sets),
        "macro_f1": metrics.macro_f1(outcomes.true_sets, outcomes.predicted_sets),
        "log_loss": log_loss,
        "roc_auc": auc,
        "one_minus_roca_pct": metrics.one_minus_roca_pct(auc),
        "fp_rate_pct": fp_rate,
        "fn_rate_pct": fn_rate,
        "fn_at_fp_pct": fn_at_fp,
        "decision": None if decision is None else {**decision.to_dict(),
                                                   "not_ready": outcomes.verdicts.count("not_ready")},
    }


def objective_value(report: Mapping[str, Any], objective: str) -> float:
    """The number a search maximizes, read from a report (``neg_log_loss`` = minus log loss)."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    if objective == "neg_log_loss":
        value = report.get("log_loss")
        return -math.inf if value is None else -float(value)
    value = report.get(objective)
    return -math.inf if value is None else float(value)


# ---------------------------------------------------------------- protocols
@dataclass
class EvalSetup:
    """How a configuration is applied to a dataset (everything but the model numbers)."""

    mode: str = "split"
    delay: int = 0
    shuffle_seed: int | None = None
    test_fraction: float = 0.2
    split_seed: int = 0
    threshold: float | None = DEFAULT_THRESHOLD
    window: str | int | None = None
    positive: str | None = None
    decision: SpamDecision | None = None  # spam verdicts: threshold and learn guards (two-label data)
    mail: bool | None = None  # read raw_b64 messages (None: when the data has them)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.delay < 0:
            raise ValueError("delay must be a non-negative number of documents")


def prepare_config(config: Mapping[str, Any], docs: Sequence[LabelledDoc]) -> dict[str, Any]:
    """``config`` completed for this data: multi-label data defaults to powerset mode; mail numbers
    given as params (``meta_weight``) move into the ``"mail"`` options."""
    out = route_mail_params(config)
    if is_multilabel(docs) and "multilabel" not in out:
        out["multilabel"] = "powerset"
    return out


def _scorer(model, docs: Sequence[LabelledDoc], setup: EvalSetup) -> tuple[Scorer, str | None]:
    all_labels = {label for d in docs for label in d.labels}
    decision = setup.decision
    positive = setup.positive if setup.positive is not None else \
        decision.label if decision is not None else positive_label(all_labels)
    if positive is not None and positive not in all_labels:
        raise ValueError(f"positive label {positive!r} does not occur in the data")
    multi = is_multilabel(docs)
    if positive is not None and multi:
        positive = None
    if decision is not None and (positive != decision.label or len(all_labels) > 2):  # (a slice may lack ham)
        raise ValueError(f"a spam decision needs two-label data with the label {decision.label!r}, got "
                         f"{sorted(all_labels)[:5]}{' (multi-label)' if multi else ''}")
    threshold = setup.threshold if (multi and model.multilabel == "per_label") else None
    return Scorer(model.multilabel, threshold, positive, decision, getattr(model, "label_threshold", None)), positive


def learn_split(model, documents: Sequence, train: Sequence[LabelledDoc]) -> None:
    """``model`` learns a split's training side as every split evaluation does: one batch, in order, with the
    documents' labels, timestamps and ids (``documents``: ``train`` as the model reads it)."""
    model.learn_many(documents, [d.labels for d in train], ts=[d.ts for d in train], ids=[d.id for d in train])


def log_posteriors_in_batches(model, documents: Sequence) -> tuple[list, np.ndarray]:
    """``model``'s class names and its log posteriors of ``documents`` (one row each), scored
    :data:`SCORE_BATCH` at a time as a split evaluation scores."""
    classes, rows = [], []
    for start in range(0, len(documents), SCORE_BATCH):
        classes, log_post = model.predict_log_proba_many(documents[start : start + SCORE_BATCH])
        rows.append(log_post)
    return list(classes), (np.vstack(rows) if rows else np.empty((0, 0)))


def evaluate_split(config: Mapping[str, Any], train: Sequence[LabelledDoc], test: Sequence[LabelledDoc],
                   setup: EvalSetup | None = None, documents: tuple[Sequence, Sequence] | None = None,
                   progress: bool | None = False, keep_outcomes: bool = False) -> dict[str, Any]:
    """Learn ``train`` in one batch, score ``test``; the report dict (see ``sgm eval --json``).

    ``documents`` optionally replaces the texts of ``(train, test)`` (e.g. pre-tokenized counts).

    >>> train = [LabelledDoc(str(i), t, (l,), None, "train") for i, (t, l) in
    ...          enumerate([("good fun", "pos"), ("bad dull", "neg"), ("fun great", "pos"), ("dull boring", "neg")])]
    >>> test = [LabelledDoc("t1", "great fun", ("pos",), None, "test"), LabelledDoc("t2", "boring", ("neg",), None, "test")]
    >>> report = evaluate_split({"model": "u_jm", "params": {"beta": 0.5}}, train, test)
    >>> report["accuracy"], report["docs"], round(report["roc_auc"], 3)
    (1.0, 2, 1.0)
    """
    setup = setup or EvalSetup()
    train, test = labelled(train), labelled(test)
    if not train or not test:
        raise ValueError("split evaluation needs labelled train and test documents")
    config = prepare_config(config, list(train) + list(test))
    model = build_model(config)
    scorer, positive = _scorer(model, list(train) + list(test), setup)
    if documents is None:
        mail = uses_mail(list(train) + list(test), setup.mail)
        documents = (read_as(train, mail), read_as(test, mail))
    train_docs, test_docs = documents

    started = time.perf_counter()
    learn_split(model, train_docs, train)
    learn_seconds = time.perf_counter() - started

    outcomes = Outcomes()
    bar = Progress(len(test), "score", enabled=progress)
    started = time.perf_counter()
    for start in range(0, len(test), SCORE_BATCH):
        scorer.score(model, test_docs[start : start + SCORE_BATCH], test[start : start + SCORE_BATCH], outcomes)
        bar.update(min(SCORE_BATCH, len(test) - start))
    score_seconds = time.perf_counter() - started
    bar.close()

    report = measures(outcomes, positive, setup.decision)
    report.update({
        "mode": "split",
        "docs": len(outcomes),
        "train_docs": len(train),
        "test_docs": len(test),
        "learn_docs_per_s": _rate(len(train), learn_seconds),
        "score_docs_per_s": _rate(len(test), score_seconds),
        "positive_label": positive,
        "multilabel": model.multilabel,
        "threshold": scorer.threshold,
        "label_threshold": scorer.label_threshold,
        "config": model_config(model),
    })
    if keep_outcomes:
        report["_outcomes"] = outcomes
    return report


def evaluate_prequential(config: Mapping[str, Any], stream: Sequence[LabelledDoc], setup: EvalSetup | None = None,
                         documents: Sequence | None = None, progress: bool | None = False,
                         keep_outcomes: bool = False) -> dict[str, Any]:
    """Test-then-train over ``stream`` in the given order; the report dict.

    Documents arriving before the model has learned anything are not scored
    (``unscored``). With ``setup.delay = N`` the label of a document is learned
    after the next ``N`` documents have been scored.

    >>> stream = [LabelledDoc(str(i), t, (l,), float(i), None) for i, (t, l) in
    ...           enumerate([("win cash", "spam"), ("lunch today", "ham"), ("cash prize", "spam"),
    ...                       ("lunch menu", "ham"), ("win prize", "spam")])]
    >>> report = evaluate_prequential({"model": "u_jm", "params": {"beta": 0.5}}, stream)
    >>> report["docs"], report["unscored"], report["accuracy"]
    (4, 1, 0.75)
    """
    setup = setup or EvalSetup(mode="prequential")
    indices = [i for i, d in enumerate(stream) if d.labels]
    stream = [stream[i] for i in indices]
    if documents is None:
        documents = read_as(stream, uses_mail(stream, setup.mail))
    else:
        documents = [documents[i] for i in indices]
    if not stream:
        raise ValueError("prequential evaluation needs labelled documents")
    config = prepare_config(config, stream)
    model = build_model(config)
    scorer, positive = _scorer(model, stream, setup)

    outcomes = Outcomes()
    pending: deque[int] = deque()
    learn_seconds = score_seconds = 0.0
    learned = unscored = 0
    bar = Progress(len(stream), "prequential", enabled=progress)
    for index, doc in enumerate(stream):
        if len(model):
            started = time.perf_counter()
            scorer.score(model, [documents[index]], [doc], outcomes)
            score_seconds += time.perf_counter() - started
        else:
            unscored += 1
        pending.append(index)
        while len(pending) > setup.delay:
            ready = pending.popleft()
            started = time.perf_counter()
            model.learn_one(documents[ready], stream[ready].labels, ts=stream[ready].ts, id=stream[ready].id)
            learn_seconds += time.perf_counter() - started
            learned += 1
        bar.update()
    bar.close()

    report = measures(outcomes, positive, setup.decision)
    report.update({
        "mode": "prequential",
        "docs": len(outcomes),
        "unscored": unscored,
        "delay": setup.delay,
        "order": "ts" if setup.shuffle_seed is None else f"shuffled(seed={setup.shuffle_seed})",
        "learn_docs_per_s": _rate(learned, learn_seconds),
        "score_docs_per_s": _rate(len(outcomes), score_seconds),
        "positive_label": positive,
        "multilabel": model.multilabel,
        "threshold": scorer.threshold,
        "label_threshold": scorer.label_threshold,
        "windows": stream_windows(outcomes, setup.window),
        "config": model_config(model),
    })
    if keep_outcomes:
        report["_outcomes"] = outcomes
    return report


def evaluate(config: Mapping[str, Any], docs: Sequence[LabelledDoc], setup: EvalSetup, progress: bool | None = False,
             keep_outcomes: bool = False) -> dict[str, Any]:
    """Evaluate ``config`` on a whole dataset with ``setup`` (its mode, order and split)."""
    if setup.mode == "split":
        train, test = train_test(docs, setup.test_fraction, setup.split_seed)
        report = evaluate_split(config, train, test, setup, progress=progress, keep_outcomes=keep_outcomes)
        report["split"] = "standard" if has_standard_split(docs) else \
            f"random(test_fraction={setup.test_fraction}, seed={setup.split_seed})"
    else:
        report = evaluate_prequential(config, stream_order(docs, setup.shuffle_seed), setup, progress=progress,
                                      keep_outcomes=keep_outcomes)
    report["dropped_unlabelled"] = sum(1 for d in docs if not d.labels)
    return report


def _rate(count: int, seconds: float) -> float | None:
    return round(count / seconds, 1) if seconds > 0 and count else None


# ---------------------------------------------------------------- windows
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_window(text: str | int | None) -> tuple[str, float] | None:
    """``"500"`` -> 500 documents; ``"7d"`` / ``"12h"`` -> seconds of event time.

    >>> parse_window("500"), parse_window("7d"), parse_window(None)
    (('docs', 500.0), ('seconds', 604800.0), None)
    """
    if text is None:
        return None
    raw = str(text).strip().lower()
    if raw and raw[-1] in _UNITS:
        return "seconds", float(raw[:-1]) * _UNITS[raw[-1]]
    return "docs", float(int(raw))


def stream_windows(outcomes: Outcomes, window: str | int | None = None) -> list[dict[str, Any]]:
    """Accuracy per window of the stream (default: 20 windows of equal document count),
    each with its event-time range (ISO, UTC) where the documents have timestamps."""
    n = len(outcomes)
    if not n:
        return []
    parsed = parse_window(window) or ("docs", float(max(1, math.ceil(n / 20))))
    correct = outcomes.correct
    if parsed[0] == "seconds" and all(t is not None for t in outcomes.ts):
        return [{**w, "ts_start": _iso(w["ts_start"]), "ts_end": _iso(w["ts_end"])}
                for w in metrics.time_window_accuracy(correct, outcomes.ts, parsed[1])]
    size = int(parsed[1]) if parsed[0] == "docs" else max(1, math.ceil(n / 20))
    out = []
    for w in metrics.windowed_accuracy(correct, size):
        times = [t for t in outcomes.ts[w["start"] : w["end"]] if t is not None]
        out.append({**w, "ts_start": _iso(min(times)) if times else None, "ts_end": _iso(max(times)) if times else None})
    return out


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat(timespec="seconds")


# ---------------------------------------------------------------- plots
def plot_report(report: Mapping[str, Any], outcomes: Outcomes, path: str | os.PathLike, title: str = "") -> None:
    """Accuracy over the stream (cumulative and per window) and, for two labels, the ROC curve (ranked by
    the positive label's log-odds) with the operating point of the decisions (FP and FN rates)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    two_labels = report.get("roc_auc") is not None
    fig, axes = plt.subplots(1, 2 if two_labels else 1, figsize=(11 if two_labels else 7, 4.2), squeeze=False)
    ax = axes[0][0]
    correct = np.array(outcomes.correct, dtype=np.float64)
    if len(correct):
        position = np.arange(1, len(correct) + 1)
        ax.plot(position, np.cumsum(correct) / position, label="cumulative accuracy", color="tab:blue")
        windows = report.get("windows") or metrics.windowed_accuracy(correct, max(1, math.ceil(len(correct) / 20)))
        if windows and "start" in windows[0]:
            centres = [(w["start"] + w["end"]) / 2 for w in windows]
            ax.plot(centres, [w["accuracy"] for w in windows], "o-", label="accuracy per window", color="tab:orange")
    ax.set_xlabel("documents scored (stream order)" if report.get("mode") == "prequential" else "test documents")
    ax.set_ylabel("accuracy")
    ax.set_title(f"{title} {report.get('mode', '')}: accuracy {report.get('accuracy') or 0:.4f}".strip())
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    if two_labels:
        is_positive = [report["positive_label"] in t for t in outcomes.true_sets]
        fpr, tpr = metrics.roc_curve(is_positive, outcomes.positive_odds)
        roc = axes[0][1]
        roc.plot(fpr, tpr, color="tab:green")
        if report.get("fp_rate_pct") is not None and report.get("fn_rate_pct") is not None:
            decision = report.get("decision")
            where = f"threshold {decision['threshold']:g}" if decision else "arg-max"
            roc.plot([report["fp_rate_pct"] / 100], [1 - report["fn_rate_pct"] / 100], "o", color="tab:red",
                     label=f"decisions ({where}): FP {report['fp_rate_pct']:.2f}%, FN {report['fn_rate_pct']:.2f}%")
            roc.legend(loc="lower right")
        roc.plot([0, 1], [0, 1], ":", color="grey")
        roc.set_xscale("symlog", linthresh=0.01)
        roc.set_xlabel("false positive rate")
        roc.set_ylabel("true positive rate")
        roc.set_title(f"ROC ({report['positive_label']}): AUC {report['roc_auc']:.5f}, "
                      f"1-ROCA% {report['one_minus_roca_pct']:.3f}")
        roc.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
