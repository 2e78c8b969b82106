"""Choosing the powerset decision rule on dev (consumers/evaluation/label_thresholds.py), and its CLI flags."""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from sgm.consumers.cli import main
from sgm.consumers.evaluation.dev_task import development_task
from sgm.consumers.evaluation.harness import EvalSetup, evaluate_split
from sgm.consumers.evaluation.label_thresholds import (DevMarginals, THRESHOLD_GRID, best_threshold,
                                                       choose_label_threshold, cross_fitted_scores, dev_marginals,
                                                       micro_f1_by_threshold, per_label_thresholds)
from sgm.consumers.evaluation.measures import micro_f1
from sgm.model import build_model
from sgm.model.label_marginals import labels_at_threshold
from sgm.stream.datasets import LabelledDoc

from .test_eval_cli import make_docs, write_jsonl

LABELS = ["a", "b", "c", "d"]


@st.composite
def dev_cases(draw):
    n = draw(st.integers(2, 12))
    truth = [frozenset(draw(st.lists(st.sampled_from(LABELS + ["z"]), min_size=1, max_size=3))) for _ in range(n)]
    marginals = np.array(draw(st.lists(st.floats(0.0, 1.0), min_size=n * 4, max_size=n * 4))).reshape(n, 4)
    return truth, marginals


@settings(max_examples=150, deadline=None)
@given(dev_cases())
def test_grid_scores_are_the_micro_f1_of_the_output_label_sets(case):
    truth, marginals = case  # "z" is a true label the model does not know: always a false negative
    scores = micro_f1_by_threshold(truth, LABELS, marginals, THRESHOLD_GRID)
    for t, score in zip(THRESHOLD_GRID, scores):
        output = labels_at_threshold(LABELS, marginals, t)
        assert score == pytest.approx(micro_f1(truth, [set(o) for o in output]), abs=1e-12)
    chosen = best_threshold(truth, LABELS, marginals)
    assert scores[THRESHOLD_GRID.index(chosen)] == max(scores)  # the choice maximises dev Micro-F1


@settings(max_examples=60, deadline=None)
@given(dev_cases(), st.integers(1, 3))
def test_per_label_thresholds_never_lower_dev_micro_f1_and_rare_labels_keep_the_global_one(case, min_support):
    truth, marginals = case
    start = best_threshold(truth, LABELS, marginals)
    thresholds = per_label_thresholds(truth, LABELS, marginals, start, min_support=min_support)
    score = micro_f1(truth, [set(o) for o in labels_at_threshold(LABELS, marginals, thresholds)])
    assert score >= micro_f1(truth, [set(o) for o in labels_at_threshold(LABELS, marginals, start)]) - 1e-12
    for label, threshold in zip(LABELS, thresholds):
        if sum(label in t for t in truth) < min_support:
            assert threshold == start


def test_best_threshold_by_hand():
    # doc 1 is {a}, doc 2 {a, b}: b's marginal is 0.45 on doc 2 and 0.40 on doc 1
    truth = [{"a"}, {"a", "b"}]
    marginals = np.array([[0.9, 0.40], [0.8, 0.45]])
    # t <= 0.40: b on both (TP 3, FP 1: 6/7); 0.40 < t <= 0.45: b on doc 2 only (perfect); t > 0.45: b missed (4/5)
    assert micro_f1_by_threshold(truth, ["a", "b"], marginals, (0.4, 0.45, 0.5)) == pytest.approx([6 / 7, 1.0, 0.8])
    assert best_threshold(truth, ["a", "b"], marginals, (0.4, 0.45, 0.5)) == 0.45
    # ties go to the threshold nearest 0.5
    assert best_threshold([{"a"}], ["a", "b"], np.array([[0.9, 0.1]]), (0.2, 0.45, 0.7)) == 0.45


def dev_of(rows, truth):
    """Dev outcomes of a two-label powerset model whose marginals are ``rows`` and arg-max the top label."""
    marginals = np.array(rows, dtype=float)
    argmax = [frozenset([["a", "b"][int(np.argmax(r))]]) for r in marginals]
    return DevMarginals([frozenset(t) for t in truth], ["a", "b"], marginals, argmax)


def test_the_threshold_rule_wins_only_when_it_helps_on_held_out_halves():
    # every document carries both labels and both marginals are high: a threshold recovers the second label
    both = dev_of([[0.7, 0.6]] * 20, [{"a", "b"}] * 20)
    choice = choose_label_threshold(both)
    assert choice["rule"] == "threshold" and choice["label_threshold"] is not None
    assert choice["cross_fitted"]["threshold"] > choice["cross_fitted"]["arg-max"]
    # single-label truth with a confident, right arg-max: nothing to gain, the arg-max stays
    sharp = dev_of([[0.99, 0.01]] * 10 + [[0.02, 0.98]] * 10, [{"a"}] * 10 + [{"b"}] * 10)
    choice = choose_label_threshold(sharp)
    assert choice["rule"] == "arg-max" and choice["label_threshold"] is None
    assert choice["cross_fitted"]["arg-max"] == 1.0


def test_cross_fitted_arg_max_is_the_plain_arg_max_score():
    rng = np.random.default_rng(3)
    marginals = rng.random((30, 2))
    truth = [{"a"} if rng.random() < 0.5 else {"a", "b"} for _ in range(30)]
    dev = dev_of(marginals, truth)
    assert cross_fitted_scores(dev)["arg-max"] == pytest.approx(micro_f1(dev.true_sets, dev.argmax_sets))


@pytest.fixture()
def multi_split(tmp_path):
    docs = make_docs(["spam", "ham", "sport"], 300, seed=5, split=lambda i: "train" if i < 220 else "test",
                     multilabel=True)
    return docs, write_jsonl(tmp_path / "multi.jsonl", docs)


def as_labelled(docs):
    return [LabelledDoc(d["id"], d["text"], tuple(d["labels"]), d["ts"], d["split"]) for d in docs]


def test_dev_marginals_follow_the_tune_protocol(multi_split):
    docs = as_labelled(multi_split[0])
    config = {"model": "u_jm", "params": {"beta": 0.5}}
    for folds in (1, 3):
        task = development_task(docs, config, EvalSetup(), dev_folds=folds)
        dev = dev_marginals(task, config)
        assert len(dev.true_sets) == sum(len(f[1]) for f in task.folds)
        # the arg-max sets score exactly what the search's dev objective measured
        assert micro_f1(dev.true_sets, dev.argmax_sets) == pytest.approx(task.run({"beta": 0.5})["micro_f1"], abs=1e-12)


def test_evaluation_scores_the_models_thresholded_output(multi_split):
    docs = as_labelled(multi_split[0])
    train, test = [d for d in docs if d.split == "train"], [d for d in docs if d.split == "test"]
    config = {"model": "u_jm", "params": {"beta": 0.5}, "multilabel": "powerset", "label_threshold": 0.3}
    report = evaluate_split(config, train, test)
    model = build_model(config)
    model.learn_many([d.text for d in train], [d.labels for d in train], ids=[d.id for d in train])
    output = model.predict_labels_many([d.text for d in test])
    assert report["label_threshold"] == 0.3
    assert report["micro_f1"] == pytest.approx(micro_f1([set(d.labels) for d in test], [set(o) for o in output]))
    classes, log_post = model.predict_log_proba_many([d.text for d in test])
    assert output != [list(classes[j]) for j in np.argmax(log_post, axis=1)]  # not the arg-max here


def test_tune_chooses_the_rule_on_dev_and_eval_applies_it(multi_split, tmp_path, capsys):
    data = multi_split[1]
    config, search = tmp_path / "best.json", tmp_path / "search.json"
    assert main(["tune", "--data", str(data), "--model", "u_jm", "--iters", "1", "--points", "3", "--workers", "1",
                 "--choose-label-threshold", "--no-test", "--out", str(config), "--json", str(search)]) == 0
    choice = json.loads(search.read_text())["label_threshold"]
    best = json.loads(config.read_text())
    assert set(choice["cross_fitted"]) == {"arg-max", "threshold", "per-label"}
    assert best.get("label_threshold") == choice["label_threshold"]
    assert (choice["rule"] == "threshold") == (choice["cross_fitted"]["threshold"] > choice["cross_fitted"]["arg-max"])
    assert "label rule on dev" in capsys.readouterr().out
    report = tmp_path / "eval.json"
    assert main(["eval", "--data", str(data), "--model", "u_jm", "--label-threshold", "0.3",
                 "--json", str(report)]) == 0
    shown = json.loads(report.read_text())
    assert shown["label_threshold"] == 0.3 and shown["config"]["label_threshold"] == 0.3
    assert shown["multilabel"] == "powerset"


def test_tune_rejects_the_rule_on_single_label_data(tmp_path, capsys):
    docs = make_docs(["spam", "ham"], 60, seed=1, split=lambda i: "train" if i < 40 else "test")
    data = write_jsonl(tmp_path / "single.jsonl", docs)
    assert main(["tune", "--data", str(data), "--model", "u_jm", "--iters", "0", "--points", "1",
                 "--choose-label-threshold", "--out", str(tmp_path / "x.json")]) == 2
    assert "multi-label" in capsys.readouterr().err
    assert main(["eval", "--data", str(data), "--model", "u_jm", "--multilabel", "per_label",
                 "--label-threshold", "0.3"]) == 2
