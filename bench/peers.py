"""Peer baselines on the same data, splits, dev partitions and tokens as ``sgm eval``/``sgm tune``.

One command per dataset::

    python -m bench.peers --data r8                      # split mode (the data has a split)
    python -m bench.peers --data spamassassin            # prequential, ts order
    python -m bench.peers --data sms-spam --mode prequential --shuffle 0
    python -m bench.peers --data r8 --json peers-r8.json --only sklearn_mnb,linear_svc

Every peer sees the documents as our :class:`model.text.Tokenizer` counts
them (``vw_logistic_bigrams``: with ``ngrams=2``). Hyper-parameters are chosen
(by dev accuracy, or the ``--objective`` given, as ``sgm tune``'s; docs/RESULTS.md's spam
streams: ``roc_auc``) on the same development data ``sgm tune`` uses (split mode: a seeded
``dev_fraction`` of the training documents; prequential: the first
``dev_fraction`` of the stream), then the chosen setting is refit on the
whole training side (or run over the whole stream) and scored.

==========================  ================================================  ===========================
peer                        model                                             chosen on dev from
==========================  ================================================  ===========================
``river_mnb``               River ``naive_bayes.MultinomialNB`` (online)       alpha in {1, 0.1, 0.01}
``sklearn_mnb``             scikit-learn ``MultinomialNB`` on counts           alpha in {1, 0.1, 0.01}
``sklearn_cnb``             scikit-learn ``ComplementNB`` on counts            alpha in {1, 0.1, 0.01}
``linear_svc``              ``LinearSVC`` on sublinear TF-IDF (L2 rows)        C in {0.1, 0.3, 1, 3, 10}
``logistic_regression``     ``LogisticRegression`` on sublinear TF-IDF         C in {1, 10, 100}
``vw_oaa``                  Vowpal Wabbit ``--oaa K`` (logistic, probabilities) -l in {0.1, 0.5, 2, 8}, passes
                                                                              in {1, 3} (split only)
``vw_logistic_bigrams``     VW online logistic regression, words + bigrams    -l in {0.1, 0.5, 2, 8}
                            (two-label data)
==========================  ================================================  ===========================

For scikit-learn's naive Bayes the accuracy of *every* alpha on the test
set is kept too (``test_by_setting``), to set the dev-chosen figure beside
the best-on-test one that published tables often quote (r8 0.9603, r52
0.9065 for MultinomialNB).

Two-label data: ROC measures rank by the positive label's log-odds, as ours: VW logistic's raw
margin (unclipped: VW clips at +-50 by default), River's joint log-likelihoods; the logit of the
probability for VW ``--oaa``.

Label sets (multi-label data): the naive Bayes peers, River and VW use one
class per label set (label powerset, as our model); LinearSVC and logistic
regression are one-vs-rest, outputting every label with a positive margin
(probability >= 0.5) and the top label when none has. Batch peers do not run
prequentially (they are not online learners); VW and River run in both modes,
as test-then-train with the same delay.
"""
from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
import warnings
from typing import Any, Callable, Sequence

import numpy as np

from sgm.consumers.evaluation.harness import (EvalSetup, Outcomes, has_standard_split, is_multilabel, labelled, load_examples,
                                  MAX_LOG_ODDS, measures, objective_value, positive_label, random_partition,
                                  stream_order, train_test)
from sgm.model.text import Tokenizer

NB_ALPHAS = (1.0, 0.1, 0.01)
SVC_CS = (0.1, 0.3, 1.0, 3.0, 10.0)
LR_CS = (1.0, 10.0, 100.0)
VW_RATES = (0.1, 0.5, 2.0, 8.0)
SPLIT_PEERS = ("river_mnb", "sklearn_mnb", "sklearn_cnb", "linear_svc", "logistic_regression", "vw_oaa")
PREQUENTIAL_PEERS = ("river_mnb", "vw_oaa", "vw_logistic_bigrams")
POWERSET_JOIN = " & "


def vw_available() -> bool:
    """True when the vowpalwabbit wheel imports on this machine."""
    try:
        from vowpalwabbit import Workspace  # noqa: F401
    except Exception:  # an ImportError, or a wheel built for another CPU/libc
        return False
    return True


# ---------------------------------------------------------------- targets
class Targets:
    """Maps documents' label tuples to peer classes and back.

    ``powerset``: one class string per label set (single-label data: the label).

    >>> t = Targets([("b",), ("a", "c")], powerset=True)
    >>> t.key(("c", "a")), sorted(t.labels_of("a & c"))
    ('a & c', ['a', 'c'])
    """

    def __init__(self, label_tuples: Sequence[tuple[str, ...]], powerset: bool) -> None:
        self.powerset = powerset
        self.labels = sorted({label for labels in label_tuples for label in labels})

    def key(self, labels: tuple[str, ...]) -> str:
        return POWERSET_JOIN.join(sorted(labels)) if self.powerset else labels[0]

    def labels_of(self, key: str) -> frozenset:
        return frozenset(key.split(POWERSET_JOIN)) if self.powerset else frozenset([key])


def _record(outcomes: Outcomes, truth: tuple[str, ...], predicted: frozenset, p_true: float,
            p_positive: float | None, ts: float | None, odds: float | None = None) -> None:
    """One scored document. ROC measures rank by the positive label's log-odds (harness.positive_log_odds):
    ``odds`` where the peer has them unsaturated (VW's margin, River's joint log-likelihoods), else the
    logit of ``p_positive`` (which ties confident documents once ``p`` rounds to 1.0)."""
    outcomes.true_sets.append(frozenset(truth))
    outcomes.predicted_sets.append(predicted)
    outcomes.p_true.append(p_true)
    if p_positive is not None:
        outcomes.p_positive.append(p_positive)
        if odds is None:
            p = min(max(float(p_positive), 0.0), 1.0)
            odds = MAX_LOG_ODDS if p >= 1.0 else -MAX_LOG_ODDS if p <= 0.0 else math.log(p) - math.log1p(-p)
        outcomes.positive_odds.append(min(max(float(odds), -MAX_LOG_ODDS), MAX_LOG_ODDS))
    outcomes.ts.append(ts)


# ---------------------------------------------------------------- batch peers (scikit-learn)
def _sklearn_fit_score(name: str, setting: float, train_x, train_labels, test_x, test_labels, targets: Targets,
                       positive: str | None, test_ts) -> Outcomes:
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.naive_bayes import ComplementNB, MultinomialNB
    from sklearn.preprocessing import MultiLabelBinarizer
    from sklearn.svm import LinearSVC

    outcomes = Outcomes()
    multi = not all(len(labels) == 1 for labels in list(train_labels) + list(test_labels))
    if name in ("sklearn_mnb", "sklearn_cnb") or not multi:
        y = [targets.key(labels) for labels in train_labels]
        if name == "sklearn_mnb":
            clf = MultinomialNB(alpha=setting)
        elif name == "sklearn_cnb":
            clf = ComplementNB(alpha=setting)
        elif name == "linear_svc":
            clf = LinearSVC(C=setting)
        else:
            clf = LogisticRegression(C=setting, max_iter=2000)
        clf.fit(train_x, y)
        classes = list(clf.classes_)
        column = {c: i for i, c in enumerate(classes)}
        if hasattr(clf, "predict_proba") and name != "sklearn_cnb":  # CNB's "probabilities" are not calibrated
            scores = clf.predict_proba(test_x)
            probabilistic = True
        elif name == "sklearn_cnb":
            scores = clf.predict_joint_log_proba(test_x)
            probabilistic = False
        else:
            scores = clf.decision_function(test_x)
            if scores.ndim == 1:  # two classes: margin of classes[1]
                scores = np.stack([-scores, scores], axis=1)
            probabilistic = False
        best = np.argmax(scores, axis=1)
        pos_col = column.get(targets.key((positive,))) if positive is not None else None
        for row, top, labels, ts in zip(scores, best.tolist(), test_labels, test_ts):
            truth_col = column.get(targets.key(labels))
            p_true = (float(row[truth_col]) if truth_col is not None else 0.0) if probabilistic else math.nan
            _record(outcomes, labels, targets.labels_of(classes[top]), p_true,
                    float(row[pos_col]) if pos_col is not None else None, ts)
        return outcomes
    # one-vs-rest over labels for multi-label data
    binarizer = MultiLabelBinarizer(classes=targets.labels)
    y = binarizer.fit_transform(train_labels)
    base = LinearSVC(C=setting) if name == "linear_svc" else LogisticRegression(C=setting, max_iter=2000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # labels absent from the training side
        clf = OneVsRestClassifier(base).fit(train_x, y)
        margins = clf.decision_function(test_x)
    for row, labels, ts in zip(margins, test_labels, test_ts):
        chosen = [targets.labels[i] for i in np.flatnonzero(row > 0).tolist()]
        _record(outcomes, labels, frozenset(chosen or [targets.labels[int(np.argmax(row))]]), math.nan, None, ts)
    return outcomes


def _features(name: str, train_counts, test_counts):
    """Count matrices (naive Bayes) or sublinear TF-IDF rows (linear models), fit on the training side."""
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.feature_extraction.text import TfidfTransformer

    vectorizer = DictVectorizer()
    train_x, test_x = vectorizer.fit_transform(train_counts), vectorizer.transform(test_counts)
    if name in ("linear_svc", "logistic_regression"):
        tfidf = TfidfTransformer(sublinear_tf=True)
        train_x, test_x = tfidf.fit_transform(train_x), tfidf.transform(test_x)
    return train_x, test_x


# ---------------------------------------------------------------- online peers
def _vw_line(counts: dict[str, float], label: str = "") -> str:
    # VW's text format splits on spaces, ':' and '|': our tokens hold none of them, except the
    # space joining a bigram, which becomes '_' (the tokenizer never emits '_').
    features = " ".join(f"{term.replace(' ', '_')}:{count:g}" for term, count in counts.items())
    return f"{label} | {features}"


class OnlinePeer:
    """An online learner with learn/score of one document at a time."""

    def __init__(self, name: str, setting: dict[str, float], targets: Targets, positive: str | None) -> None:
        self.name, self.setting, self.targets, self.positive = name, setting, targets, positive
        self.classes: list[str] = []
        if name == "river_mnb":
            from river.naive_bayes import MultinomialNB

            self.model = MultinomialNB(alpha=setting["alpha"])
        elif name == "vw_oaa":
            from vowpalwabbit import Workspace

            self.classes = [targets.key(k) for k in setting["_class_keys"]]
            self.model = Workspace(f"--oaa {max(len(self.classes), 2)} --loss_function logistic --probabilities "
                                   f"-l {setting['l']} -b 22 --quiet")
        elif name == "vw_logistic_bigrams":
            from vowpalwabbit import Workspace

            if positive is None:
                raise ValueError("vw_logistic_bigrams is for two-label data")
            # no --link logistic: predict gives the raw margin (the log-odds), p = sigmoid(margin); VW clips
            # margins to +-50 by default, which would tie confident messages as p = 1.0 does: unclipped
            self.model = Workspace(f"--loss_function logistic -l {setting['l']} -b 24 --quiet "
                                   "--min_prediction -1e30 --max_prediction 1e30")
        else:
            raise ValueError(f"unknown online peer {name!r}")
        self.learned = 0

    def learn(self, counts: dict[str, float], labels: tuple[str, ...]) -> None:
        key = self.targets.key(labels)
        if self.name == "river_mnb":
            self.model.learn_one(counts, key)
        elif self.name == "vw_oaa":
            if key not in self.classes:
                return  # a class unseen in the dev/training data: VW's class count is fixed up front
            self.model.learn(_vw_line(counts, str(self.classes.index(key) + 1)))
        else:
            self.model.learn(_vw_line(counts, "1" if self.positive in labels else "-1"))
        self.learned += 1

    def score(self, counts: dict[str, float]) -> tuple[dict[str, float], float | None]:
        """Class probabilities, and the positive label's log-odds where the peer gives them unsaturated
        (``None``: rank by the probability's logit)."""
        if self.name == "river_mnb":
            probs = dict(self.model.predict_proba_one(counts))
            odds = None
            if self.positive is not None and probs:
                joint = self.model.joint_log_likelihood(counts)  # log p(c) + log p(x | c), unnormalized
                rest = [v for c, v in joint.items() if c != self.positive]
                if self.positive in joint and rest:
                    odds = joint[self.positive] - float(np.logaddexp.reduce(rest))
            return probs, odds
        if self.name == "vw_oaa":
            probs = self.model.predict(_vw_line(counts))
            if not isinstance(probs, list):
                probs = [1.0 if i + 1 == probs else 0.0 for i in range(len(self.classes))]
            return dict(zip(self.classes, probs)), None
        margin = float(self.model.predict(_vw_line(counts)))
        p_spam = 1.0 / (1.0 + math.exp(-min(max(margin, -700.0), 700.0)))
        other = next(label for label in self.targets.labels if label != self.positive)
        return {self.positive: p_spam, other: 1.0 - p_spam}, margin

    def record(self, outcomes: Outcomes, counts, labels: tuple[str, ...], ts) -> None:
        probs, odds = self.score(counts)
        key = self.targets.key(labels)
        if probs:
            top = max(probs, key=lambda c: (probs[c], c))  # ties: deterministic by name
            predicted = self.targets.labels_of(top)
        else:
            predicted = frozenset()
        p_positive = probs.get(self.targets.key((self.positive,)), 0.0) if self.positive is not None else None
        _record(outcomes, labels, predicted, float(probs.get(key, 0.0)), p_positive, ts, odds)


def _online_split(name: str, setting: dict, train_counts, train_labels, test_counts, test_labels, targets, positive,
                  test_ts, seed: int) -> Outcomes:
    peer = OnlinePeer(name, setting, targets, positive)
    order = list(range(len(train_counts)))
    for epoch in range(int(setting.get("passes", 1))):
        # online learners are order-sensitive and the source files are grouped: shuffle, seeded
        random.Random(seed + epoch).shuffle(order)
        for i in order:
            peer.learn(train_counts[i], train_labels[i])
    outcomes = Outcomes()
    for counts, labels, ts in zip(test_counts, test_labels, test_ts):
        peer.record(outcomes, counts, labels, ts)
    return outcomes


def _online_prequential(name: str, setting: dict, counts_seq, labels_seq, ts_seq, targets, positive,
                        delay: int) -> tuple[Outcomes, int]:
    peer = OnlinePeer(name, setting, targets, positive)
    outcomes, pending, unscored = Outcomes(), [], 0
    for index, (counts, labels, ts) in enumerate(zip(counts_seq, labels_seq, ts_seq)):
        if peer.learned:
            peer.record(outcomes, counts, labels, ts)
        else:
            unscored += 1
        pending.append(index)
        while len(pending) > delay:
            ready = pending.pop(0)
            peer.learn(counts_seq[ready], labels_seq[ready])
    return outcomes, unscored


# ---------------------------------------------------------------- settings
def settings_for(name: str, mode: str) -> list[dict[str, float]]:
    """The hyper-parameter settings a peer chooses from on dev.

    >>> settings_for("sklearn_mnb", "split")
    [{'alpha': 1.0}, {'alpha': 0.1}, {'alpha': 0.01}]
    """
    if name in ("river_mnb", "sklearn_mnb", "sklearn_cnb"):
        return [{"alpha": a} for a in NB_ALPHAS]
    if name == "linear_svc":
        return [{"C": c} for c in SVC_CS]
    if name == "logistic_regression":
        return [{"C": c} for c in LR_CS]
    if name == "vw_oaa" and mode == "split":
        return [{"l": rate, "passes": passes} for passes in (1, 3) for rate in VW_RATES]
    if name in ("vw_oaa", "vw_logistic_bigrams"):
        return [{"l": rate} for rate in VW_RATES]
    raise ValueError(f"unknown peer {name!r}")


def _tokens(docs, ngrams: int = 1) -> list[dict[str, int]]:
    tokenizer = Tokenizer(ngrams=ngrams)
    return [tokenizer(d.text) for d in docs]


# ---------------------------------------------------------------- protocols
def run_split(docs, setup: EvalSetup, peers: Sequence[str] = SPLIT_PEERS, dev_fraction: float = 0.25,
              dev_seed: int = 0, objective: str | None = None, log: Callable[[str], None] | None = None) -> list[dict]:
    """Every peer in split mode: choose on dev, refit on train, score test. One row per peer."""
    train, test = train_test(docs, setup.test_fraction, setup.split_seed)
    train, test = labelled(train), labelled(test)
    dev_train, dev_test = random_partition(train, dev_fraction, dev_seed)
    all_docs = train + test
    multi = is_multilabel(all_docs)
    objective = objective or ("micro_f1" if multi else "accuracy")
    targets = Targets([d.labels for d in all_docs], powerset=multi)
    positive = None if multi else (setup.positive or positive_label(targets.labels))
    counts = {id(d): c for d, c in zip(all_docs, _tokens(all_docs))}
    rows = []
    for name in peers:
        if name.startswith("vw_") and not vw_available():
            rows.append({"peer": name, "skipped": "vowpalwabbit does not import"})
            continue
        if name == "vw_logistic_bigrams":
            if positive is None:
                continue
            bigram_counts = {id(d): c for d, c in zip(all_docs, _tokens(all_docs, ngrams=2))}
        started = time.perf_counter()
        source = bigram_counts if name == "vw_logistic_bigrams" else counts

        def fit_score(setting, fit_docs, score_docs):
            fit_c = [source[id(d)] for d in fit_docs]
            score_c = [source[id(d)] for d in score_docs]
            if name.startswith(("river", "vw")):
                local = dict(setting)
                if name == "vw_oaa":
                    local["_class_keys"] = sorted({tuple(sorted(d.labels)) for d in fit_docs})
                return _online_split(name, local, fit_c, [d.labels for d in fit_docs], score_c,
                                     [d.labels for d in score_docs], targets, positive, [d.ts for d in score_docs],
                                     dev_seed)
            fit_x, score_x = _features(name, fit_c, score_c)
            (value,) = setting.values()
            return _sklearn_fit_score(name, value, fit_x, [d.labels for d in fit_docs], score_x,
                                      [d.labels for d in score_docs], targets, positive, [d.ts for d in score_docs])

        dev_scores = []
        for setting in settings_for(name, "split"):
            dev_report = measures(fit_score(setting, dev_train, dev_test), positive)
            dev_scores.append((objective_value(dev_report, objective), setting))
        best_dev = max(s for s, _ in dev_scores)
        chosen = next(setting for s, setting in dev_scores if s == best_dev)  # ties: the first listed
        report = measures(fit_score(chosen, train, test), positive)
        row = {"peer": name, "setting": chosen, "dev": best_dev, **report, "docs": len(test)}
        if name in ("sklearn_mnb", "sklearn_cnb"):
            by_setting = []
            for setting in settings_for(name, "split"):
                other = report if setting == chosen else measures(fit_score(setting, train, test), positive)
                by_setting.append({"setting": setting, objective: other[objective]})
            row["test_by_setting"] = by_setting
        row["seconds"] = round(time.perf_counter() - started, 1)
        rows.append(row)
        if log:
            log(f"  {name}: {setting_text(chosen)} dev {objective} {best_dev:.4f} -> test {report[objective]:.4f} "
                f"({row['seconds']}s)")
    return rows


def run_prequential(docs, setup: EvalSetup, peers: Sequence[str] = PREQUENTIAL_PEERS, dev_fraction: float = 0.25,
                    objective: str | None = None, log: Callable[[str], None] | None = None) -> list[dict]:
    """Online peers test-then-train over the stream (same order and delay as ``sgm eval``).
    Settings are chosen by a prequential run over the first ``dev_fraction`` of the stream."""
    stream = labelled(stream_order(docs, setup.shuffle_seed))
    dev = stream[: max(2, round(len(stream) * dev_fraction))]
    multi = is_multilabel(stream)
    objective = objective or ("micro_f1" if multi else "accuracy")
    targets = Targets([d.labels for d in stream], powerset=multi)
    positive = None if multi else (setup.positive or positive_label(targets.labels))
    unigram = _tokens(stream)
    rows = []
    for name in peers:
        if name.startswith("vw_") and not vw_available():
            rows.append({"peer": name, "skipped": "vowpalwabbit does not import"})
            continue
        if name == "vw_logistic_bigrams" and positive is None:
            continue
        started = time.perf_counter()
        counts = _tokens(stream, ngrams=2) if name == "vw_logistic_bigrams" else unigram
        labels = [d.labels for d in stream]
        ts = [d.ts for d in stream]

        def run(setting, n):
            local = dict(setting)
            if name == "vw_oaa":
                # VW fixes its class count up front: give it every label set of the stream
                # (a streaming deployment would reserve spare classes instead)
                local["_class_keys"] = sorted({tuple(sorted(lab)) for lab in labels})
            outcomes, unscored = _online_prequential(name, local, counts[:n], labels[:n], ts[:n], targets, positive,
                                                     setup.delay)
            return measures(outcomes, positive), unscored

        dev_reports = [(run(s, len(dev))[0], s) for s in settings_for(name, "prequential")]
        dev_scores = [(objective_value(r, objective), s) for r, s in dev_reports]
        best_dev = max(s for s, _ in dev_scores)
        chosen_at = next(i for i, (s, _) in enumerate(dev_scores) if s == best_dev)  # ties: the first listed
        chosen, dev_report = dev_scores[chosen_at][1], dev_reports[chosen_at][0]
        report, unscored = run(chosen, len(stream))
        row = {"peer": name, "setting": chosen, "objective": objective, "dev": best_dev,
               "dev_measures": {k: dev_report[k] for k in ("accuracy", "micro_f1", "roc_auc", "one_minus_roca_pct")},
               **report, "docs": len(stream) - unscored,
               "unscored": unscored, "seconds": round(time.perf_counter() - started, 1)}
        rows.append(row)
        if log:
            log(f"  {name}: {setting_text(chosen)} dev {objective} {best_dev:.4f} -> stream {report[objective]:.4f}"
                f" ({row['seconds']}s)")
    return rows


def setting_text(setting: dict) -> str:
    """``{'alpha': 0.1}`` -> ``'alpha=0.1'``.

    >>> setting_text({"l": 0.5, "passes": 3})
    'l=0.5 passes=3'
    """
    return " ".join(f"{k}={v:g}" for k, v in setting.items() if not k.startswith("_"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="dataset file or shared dataset name")
    parser.add_argument("--mode", choices=("split", "prequential"), default=None)
    parser.add_argument("--shuffle", type=int, default=None, metavar="SEED", help="prequential: seeded shuffle")
    parser.add_argument("--delay", type=int, default=0)
    parser.add_argument("--test-fraction", type=float, default=0.2)
    parser.add_argument("--split-seed", type=int, default=0)
    parser.add_argument("--dev-fraction", type=float, default=0.25)
    parser.add_argument("--dev-seed", type=int, default=0)
    parser.add_argument("--objective", default=None, choices=("accuracy", "micro_f1", "macro_f1", "roc_auc"),
                        help="dev measure that chooses each peer's setting (default: accuracy; micro_f1 for "
                             "multi-label data), as sgm tune's --objective")
    parser.add_argument("--only", default=None, help="comma-separated peers")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--json", default=None, metavar="OUT")
    args = parser.parse_args(argv)
    docs = load_examples(args.data, limit=args.limit)
    mode = args.mode or ("split" if has_standard_split(docs) else "prequential")
    setup = EvalSetup(mode=mode, delay=args.delay, shuffle_seed=args.shuffle, test_fraction=args.test_fraction,
                      split_seed=args.split_seed)
    only = [p.strip() for p in args.only.split(",")] if args.only else None
    log = lambda line: print(line, file=sys.stderr)  # noqa: E731
    log(f"peers on {args.data} ({mode})")
    if mode == "split":
        rows = run_split(docs, setup, only or SPLIT_PEERS, args.dev_fraction, args.dev_seed, args.objective, log=log)
    else:
        rows = run_prequential(docs, setup, only or PREQUENTIAL_PEERS, args.dev_fraction, args.objective, log=log)
    text = json.dumps(rows, indent=2, sort_keys=True, default=str)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            out.write(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
