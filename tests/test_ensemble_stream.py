"""``sgm ensemble --mode prequential`` (consumers/evaluation/ensemble_stream.py): the bases' dev scores are
``sgm tune``'s, nothing after the dev prefix reaches the fit, and the pool scored in the fit is the pool
``sgm eval --config`` replays."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest

from sgm.consumers.cli import main as sgm
from sgm.consumers.evaluation.ensemble_fit import Pool
from sgm.consumers.evaluation.ensemble_stream import (choose_pool, dev_value, fit_stream_ensemble, pooled,
                                                      prequential_passes)
from sgm.consumers.evaluation.documents import documents as read_as
from sgm.consumers.evaluation.dev_task import development_task
from sgm.consumers.evaluation.harness import EvalSetup, evaluate_prequential, stream_order
from sgm.model import Ensemble, build_model, model_config
from sgm.stream.datasets import LabelledDoc

SPAM = "cash prize win offer free click now winner".split()
HAM = "meeting lunch report project team notes call tomorrow".split()
SHARED = "the a of and to you your this today new".split()


def spam_stream(n: int = 240, seed: int = 0) -> list[LabelledDoc]:
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        label = "spam" if rng.random() < 0.4 else "ham"
        own = SPAM if label == "spam" else HAM
        other = HAM if label == "spam" else SPAM
        words = rng.choices(own, k=rng.randint(1, 4)) + rng.choices(other, k=rng.randint(0, 2)) + \
            rng.choices(SHARED, k=rng.randint(1, 4))
        rng.shuffle(words)
        docs.append(LabelledDoc(f"m{i}", " ".join(words), (label,), float(i), None))
    return docs


BASES = [{"model": "u_jm_ps", "params": {"beta": 0.4}},
         {"model": "uc_pd_jm_dp_ps", "tokenizer": {"ngrams": 2}}]
SETUP = EvalSetup(mode="prequential")


def without_timings(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if not k.endswith("seconds")}


def test_each_bases_dev_score_is_its_sgm_tune_dev_score():
    docs = spam_stream()
    summary = fit_stream_ensemble(docs, BASES, SETUP, "roc_auc", folds=4)
    for config, dev in zip(BASES, summary["dev_bases"]):
        assert dev == development_task(docs, config, SETUP, "roc_auc")(({}))
    assert summary["dev"]["stream_docs"] == 60 and summary["dev"]["scored_docs"] == 59  # the first is unscored
    assert summary["chosen"] in summary["variants"] and summary["dev_tuned"] == summary["chosen"]["cv"]
    assert summary["dev_tuned"] >= summary["dev_default"]  # a pool is kept only where it beats every base


def test_nothing_after_the_dev_prefix_reaches_the_fit():
    docs = spam_stream()
    rng = random.Random(1)
    changed = docs[:60] + [LabelledDoc(d.id, " ".join(rng.choices(SPAM + HAM, k=4)), ("ham" if d.labels == ("spam",)
                                       else "spam",), d.ts, None) for d in docs[60:]]
    first = fit_stream_ensemble(docs, BASES, SETUP, "roc_auc", folds=4)
    assert without_timings(fit_stream_ensemble(changed, BASES, SETUP, "roc_auc", folds=4)) == without_timings(first)
    longer = fit_stream_ensemble(docs, BASES, SETUP, "roc_auc", dev_fraction=0.5, folds=4)  # a control: it can move
    assert longer["dev"]["stream_docs"] == 120 and longer["variants"] != first["variants"]


def test_the_scored_pool_is_the_pool_the_written_configuration_replays():
    stream = stream_order(spam_stream(120))
    read = read_as(stream, False)
    passes = prequential_passes(BASES, stream, read)
    lengths = Ensemble([build_model(BASES[0])], [1.0]).lengths(read)
    weights = np.array([[0.7, 0.1, -0.2, 0.3, 0.05, 0.4, -0.1], [0.5, -0.05, 0.2, 0.1, -0.3, 0.2, 0.3]])
    for meta, floor in ((True, -1000.0), (False, -5.0)):
        fitted = Pool(meta, weights if meta else weights[:, :1], np.array([0.3, -0.1]))
        rows = np.flatnonzero(passes.scored)
        truth = np.array([passes.classes.index(stream[i].labels[0]) for i in rows])
        ours = dev_value(pooled(fitted, passes.log_posts[:, rows], passes.present[rows], lengths[rows], floor),
                         passes.classes, truth, "roc_auc")
        config = Ensemble([build_model(c) for c in BASES], fitted.weights, {"ham": 0.3, "spam": -0.1}, meta=meta,
                          floor=floor).model_config()
        assert evaluate_prequential(config, stream)["roc_auc"] == pytest.approx(ours, abs=1e-12)


def test_a_pool_is_chosen_only_where_it_beats_every_base_on_dev():
    rng = np.random.default_rng(0)
    n = 240
    truth = rng.integers(0, 2, n)
    signal = np.where(truth == 1, 1.0, -1.0)
    odds = np.stack([signal + rng.normal(0, 1.5, n), signal + rng.normal(0, 1.5, n)])  # independent errors
    log_posts = np.stack([-np.logaddexp(0, -odds), -np.logaddexp(0, odds)], axis=2)[:, :, ::-1]  # [ham, spam]
    from sgm.consumers.evaluation.ensemble_stream import StreamPasses

    passes = StreamPasses(["ham", "spam"], log_posts, np.ones((n, 2), bool), np.ones(n, bool), 0.0, 0.0, 0)
    labels = ["spam" if t else "ham" for t in truth]
    choice = choose_pool(passes, np.ones(n), labels, "roc_auc", folds=4)
    assert "base" not in choice.chosen and choice.chosen["cv"] > max(v["cv"] for v in choice.variants if "base" in v)
    assert choice.refit == dev_value(pooled(choice.fitted, log_posts, passes.present, np.ones(n),
                                            choice.chosen["floor"]), passes.classes, truth, "roc_auc")
    worse = StreamPasses(["ham", "spam"], log_posts[:1] * 0.0 + np.log(0.5), passes.present, passes.scored, 0.0, 0.0,
                         0)  # no information: every pool of it ties with it, and a tie goes to the single base
    nothing = choose_pool(worse, np.ones(n), labels, "roc_auc", folds=4)
    assert nothing.chosen.get("base") == 0 and nothing.fitted is None


def informative_and_noise_passes(n: int = 240, seed: int = 0):
    """Prequential-like passes of three bases over ``n`` two-label documents: bases 0 and 2 carry the signal with
    independent errors, base 1 is pure noise (its log-odds ignore the label)."""
    from sgm.consumers.evaluation.ensemble_stream import StreamPasses

    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n)
    signal = np.where(truth == 1, 1.0, -1.0)
    odds = np.stack([signal + rng.normal(0, 1.5, n), rng.normal(0, 1.5, n), signal + rng.normal(0, 1.5, n)])
    log_posts = np.stack([-np.logaddexp(0, odds), -np.logaddexp(0, -odds)], axis=2)  # [ham, spam]
    passes = StreamPasses(["ham", "spam"], log_posts, np.ones((n, 2), bool), np.ones(n, bool), 0.0, 0.0, 0)
    return passes, ["spam" if t else "ham" for t in truth], truth


def test_a_base_of_pure_noise_is_left_out_of_the_pool():
    passes, labels, truth = informative_and_noise_passes()
    lengths = np.ones(len(labels))
    choice = choose_pool(passes, lengths, labels, "roc_auc", folds=4)
    assert choice.bases == [0, 2] and choice.chosen["bases"] == [0, 2]  # the full pool would hold base 1 too
    tried = {tuple(s["bases"]): s["cv"] for s in choice.subsets}
    assert set(tried) == {(0,), (0, 1), (0, 2), (0, 1, 2)}  # greedy: from the best single base, one base a step
    assert tried[(0, 2)] > tried[(0,)] and tried[(0, 1, 2)] <= tried[(0, 2)]  # kept only where it beats on dev
    assert choice.chosen["cv"] == max(v["cv"] for v in choice.variants if v.get("bases") == [0, 2])
    assert choice.fitted.weights.shape == (2, 1 if not choice.chosen["meta"] else 7)  # weights of the chosen two
    assert choice.refit == dev_value(pooled(choice.fitted, passes.log_posts[[0, 2]], passes.present, lengths,
                                            choice.chosen["floor"]), passes.classes, truth, "roc_auc")


NOISE = list("xyzqkvw")
NOISE_BASE = {"model": "u_jm_ps", "tokenizer": {"max_token_length": 1}}  # reads only the one-letter tokens


def noisy_stream(n: int = 200, seed: int = 1) -> list[LabelledDoc]:
    """Spam and ham messages with two label-blind one-letter tokens each: noise to a base that reads only those."""
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        label = "spam" if rng.random() < 0.4 else "ham"
        own, other = (SPAM, HAM) if label == "spam" else (HAM, SPAM)
        words = rng.choices(own, k=rng.randint(1, 3)) + rng.choices(other, k=rng.randint(0, 3)) + \
            rng.choices(SHARED, k=rng.randint(1, 4)) + [rng.choice(NOISE), rng.choice(NOISE)]
        rng.shuffle(words)
        docs.append(LabelledDoc(f"m{i}", " ".join(words), (label,), float(i), None))
    return docs


def test_the_written_pool_holds_only_the_chosen_bases_and_replays_as_fitted(monkeypatch):
    from sgm.consumers.evaluation import ensemble_stream

    replays = []  # the subsets reuse the bases' dev replays: one pass of every base per fit, however many subsets
    monkeypatch.setattr(ensemble_stream, "prequential_passes",
                        lambda configs, *rest: replays.append(len(configs)) or prequential_passes(configs, *rest))
    docs, bases = noisy_stream(), [BASES[0], NOISE_BASE, BASES[1]]
    summary = fit_stream_ensemble(docs, bases, SETUP, "roc_auc", dev_fraction=0.4, folds=4)
    assert replays == [3] and len(summary["subsets"]) == 4  # [0]; [0, 1], [0, 2]; [0, 1, 2]
    assert summary["chosen_bases"] == [0, 2] == summary["chosen"]["bases"]  # a pool without the noise base
    assert summary["tuned_config"]["bases"] == [summary["bases"][0], summary["bases"][2]]
    assert np.shape(summary["tuned_config"]["weights"])[0] == 2 and summary["dev_tuned"] > summary["dev_default"]
    dev = stream_order(docs)[:80]
    assert evaluate_prequential(summary["tuned_config"], dev)["roc_auc"] == pytest.approx(summary["dev_refit"],
                                                                                           abs=1e-12)
    rng = random.Random(1)
    changed = docs[:80] + [LabelledDoc(d.id, " ".join(rng.choices(SPAM + HAM + NOISE, k=5)), (
        "ham" if d.labels == ("spam",) else "spam",), d.ts, None) for d in docs[80:]]
    again = fit_stream_ensemble(changed, bases, SETUP, "roc_auc", dev_fraction=0.4, folds=4)
    assert without_timings(again) == without_timings(summary)  # nothing after the dev prefix moves the subset


def test_sgm_ensemble_prequential_then_sgm_eval(tmp_path, capsys):
    data = tmp_path / "spam.jsonl"
    data.write_text("".join(json.dumps({"id": d.id, "text": d.text, "labels": list(d.labels), "ts": d.ts}) + "\n"
                            for d in spam_stream()), encoding="utf-8")
    bases = []
    for i, config in enumerate(BASES):
        (tmp_path / f"b{i}.json").write_text(json.dumps(config), encoding="utf-8")
        bases += ["--base", str(tmp_path / f"b{i}.json")]
    out, fit = tmp_path / "ens.json", tmp_path / "fit.json"
    assert sgm(["ensemble", "--data", str(data), "--mode", "prequential", *bases, "--objective", "roc_auc",
                "--out", str(out), "--json", str(fit)]) == 0
    assert "dev roc_auc" in capsys.readouterr().out
    summary = json.loads(fit.read_text())
    assert summary["mode"] == "prequential" and json.loads(out.read_text()) == summary["tuned_config"]
    assert sgm(["eval", "--data", str(data), "--config", str(out), "--mode", "prequential",
                "--json", str(tmp_path / "eval.json")]) == 0
    report = json.loads((tmp_path / "eval.json").read_text())
    assert report["docs"] == 239 and report["config"] == model_config(build_model(summary["tuned_config"]))
    assert sgm(["ensemble", "--data", str(data), *bases, "--shuffle", "0", "--out", str(out)]) == 2  # split mode
    assert sgm(["ensemble", "--data", str(data), "--mode", "prequential", *bases, "--objective", "micro_f1",
                "--out", str(out)]) == 2


def test_a_base_scores_tied_documents_as_its_own_prequential_accuracy_does():
    # a document whose classes tie (no known term, no prior: theta = 0) goes to the first class learned, in the
    # base's own prequential accuracy and in the served pool; the stream fit broke the tie by the class name. The
    # stream starts with a spam message (learned first, last by name: the two tie rules differ), then ties of spam
    first = LabelledDoc("first", "cash prize win", ("spam",), None, None)
    ties = [LabelledDoc(f"u{i}", f"unseen{i} never{i}", ("spam",), None, None) for i in range(12)]
    rest = spam_stream()
    order = [first, *[d for pair in zip(rest[:12], ties) for d in pair], *rest[12:]]
    docs = [LabelledDoc(d.id, d.text, d.labels, float(i), None) for i, d in enumerate(order)]
    bases = [{"model": "u_jm_ps", "params": {"beta": 0.4, "theta": 0.0}}, BASES[1]]
    summary = fit_stream_ensemble(docs, bases, SETUP, "accuracy", folds=4)
    assert summary["dev_bases"][0] == development_task(docs, bases[0], SETUP, "accuracy")({})
