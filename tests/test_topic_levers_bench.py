"""bench/topic_levers.py: the levers change what they say they change, and nothing at their neutral setting."""
from __future__ import annotations

import json

import numpy as np
import pytest

from types import SimpleNamespace

from scipy.special import logsumexp

from bench.topic_levers_online import Averaged, online_gradient, online_step
from bench.topic_levers import (block_scores, fit_class_scale, learned_side_weighted, main, term_block, tied_objective,
                                with_bigram_weight, with_char_ngrams)
from sgm.model import build_model
from sgm.model.term_class_weights import term_class_weights
from sgm.model.text import CHAR_MARK, Tokenizer

DOCS = [{"cheap": 2, "pills": 1, "cheap pills": 1}, {"meeting": 1, "noon": 1, "meeting noon": 1},
        {"cheap": 1, "meeting": 1, "cheap meeting": 1}]
LABELS = [("spam",), ("ham",), ("spam",)]


def fw_model():
    model = build_model({"model": "uc_pd_jm_dp_fw", "params": {"gamma": 2.0, "kappa": 0.1, "eps": 0.05}})
    model.learn_many(DOCS, LABELS, ids=["a", "b", "c"])
    return model


def test_bigram_weight_scales_bigrams_only():
    assert with_bigram_weight(DOCS, 1.0) == DOCS
    out = with_bigram_weight(DOCS, 3.0)
    for before, after in zip(DOCS, out):
        assert list(after) == list(before)
        for term, count in before.items():
            assert after[term] == (3.0 * count if " " in term else count)


def test_learned_side_weights_are_the_models_fw_weights():
    model = fw_model()
    assert with_bigram_weight(learned_side_weighted(model, DOCS, 0.0), 1.0) == [
        {t: float(c) for t, c in d.items()} for d in DOCS]
    out = learned_side_weighted(model, DOCS, 2.0)
    g = term_class_weights(model.state, np.array([model.state.terms.ids["meeting"], model.state.terms.ids["pills"]]),
                           2.0, 0.1, 0.05)
    assert out[1]["meeting"] == pytest.approx(g[0] ** 2)
    assert out[0]["pills"] == pytest.approx(g[1] ** 2)
    assert out[1]["meeting"] < out[0]["pills"]  # "meeting" is in both labels, "pills" in one


def test_class_scale_is_the_identity_under_a_strong_pull_and_fits_a_needed_bias():
    rng = np.random.default_rng(0)
    log_post = np.log(rng.dirichlet(np.ones(3), size=300))
    truth = log_post.argmax(1)
    a, b = fit_class_scale(log_post, truth, reg=1e9)
    assert np.allclose(a, 1.0, atol=1e-4) and np.allclose(b, 0.0, atol=1e-4)
    shifted = np.where(truth == 2, 0, truth)  # label 2's documents all belong to label 0: a bias moves them
    a, b = fit_class_scale(log_post, shifted, reg=1e-3)
    assert ((log_post * a + b).argmax(1) == shifted).mean() > (log_post.argmax(1) == shifted).mean() + 0.2


def test_char_ngrams_are_marked_counted_and_never_a_word():
    out = with_char_ngrams([{"cat": 2, "cat hat": 1}], (3, 4), 0.5)[0]
    assert out == {"cat": 2, "cat hat": 1, "#<ca": 1.0, "#cat": 1.0, "#at>": 1.0, "#<cat": 1.0, "#cat>": 1.0}
    assert with_char_ngrams([{"cat": 2}], (3, 3), words=False) == [{"#<ca": 2.0, "#cat": 2.0, "#at>": 2.0}]
    words = Tokenizer(ngrams=2)("#cat <cat> c#a#t <<x>> #<ca")  # the marks split words: none can hold them
    assert not any(mark in term for term in words for mark in (CHAR_MARK, "<", ">"))


def toy_data(tmp_path) -> tuple[str, str]:
    """Two topics whose words share stems: a dataset file and a tuned-looking configuration."""
    rng = np.random.default_rng(0)
    stems = {"grain": ["wheat", "wheats", "harvest", "harvested", "crop", "crops"],
             "money": ["rate", "rates", "bank", "banking", "dollar", "dollars"]}
    lines = []
    for i in range(60):
        label = "grain" if i % 2 else "money"
        text = " ".join(rng.choice(stems[label] + ["the", "said", "year"], size=8))
        lines.append(json.dumps({"id": f"d{i}", "text": text, "labels": [label], "split": "train" if i < 50 else "test"}))
    data = tmp_path / "toy.jsonl"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model": "uc_pd_jm_dp_fw_ps", "tokenizer": {"ngrams": 2}, "params": {
        "beta": 0.4, "delta": 0.6, "eps": 0.02, "gamma": 3.0, "kappa": 1e-4, "mu": 0.2, "theta": 1.0, "ups": 1.0}}))
    return str(data), str(config)


def printed_report(capsys) -> dict:
    out = capsys.readouterr().out
    return json.loads(out[out.index("{\n"):])["cv_accuracy"]  # after the per-setting progress lines


def test_the_char_levers_run_and_their_neutral_settings_are_the_plain_model(tmp_path, capsys):
    data, config = toy_data(tmp_path)
    main(["--data", data, config, "--lever", "char-ngrams", "--char-weights", "0,0.5"])
    report = printed_report(capsys)
    assert set(report) == {"plain", "w=0.0", "w=0.5", "chosen on the other folds"}
    assert report["plain"]["cv"] > 0.5 and report["plain"]["fixed"] == report["plain"]["broken"] == 0
    assert report["w=0.0"]["cv"] == report["plain"]["cv"]  # char terms counted 0 times: the plain model
    assert report["w=0.0"]["fixed"] == report["w=0.0"]["broken"] == 0
    assert len(report["chosen on the other folds"]["per fold"]) == 5
    main(["--data", data, config, "--lever", "char-ngrams", "--char-weights", "0.5", "--search", "1x2"])
    assert set(printed_report(capsys)["w=0.5"]["point"]) == {"beta", "delta", "eps", "gamma", "kappa", "mu", "theta", "ups"}
    main(["--data", data, config, "--lever", "char-mix", "--lambdas", "0,1"])
    report = printed_report(capsys)
    assert report["lambda=0.0"]["cv"] == report["plain"]["cv"]  # no char model: the plain decisions
    assert report["lambda=0.0"]["fixed"] == report["lambda=0.0"]["broken"] == 0
    assert 0 <= report["chars alone"]["cv"] <= 1 and report["chars"]["seconds"]["learn"] >= 0


def test_a_term_block_is_the_models_own_score_at_r_equal_g():
    model = fw_model()
    queries = [{"cheap": 1, "noon": 2, "unseen": 5}, {"meeting": 3, "pills": 1, "cheap pills": 1}]
    block = term_block(SimpleNamespace(labels=["ham", "other", "spam"]), model, queries)
    assert block["terms"] and "unseen" not in block["terms"]
    assert block["prior"][1] < -1e8  # a label the model has not learned
    classes, log_post = model.predict_log_proba_many(queries)
    columns = [["ham", "other", "spam"].index(c) for c in classes]
    scores = block_scores(block, block["g"])[:, columns]
    assert np.allclose(scores - logsumexp(scores, axis=1)[:, None], log_post, atol=1e-10)
    other = block_scores(block, np.ones(len(block["g"])))[:, columns]  # without fw: another score
    assert not np.allclose(other - logsumexp(other, axis=1)[:, None], log_post, atol=1e-3)


@pytest.mark.parametrize("loss", ["cll", "hinge"])
def test_the_tied_objective_gradient_is_its_derivative(loss):
    model = fw_model()
    block = term_block(SimpleNamespace(labels=["ham", "spam"]), model, DOCS)
    n = len(block["terms"])
    block.update(index=np.arange(n), base=block["g"], y=np.array([1, 0, 1]))
    objective = tied_objective([block], n, loss, 0.3)
    s = np.linspace(0.5, 1.5, n)
    value, grad = objective(s)
    for j in range(n):
        step = np.zeros(n)
        step[j] = 1e-6
        assert grad[j] == pytest.approx((objective(s + step)[0] - objective(s - step)[0]) / 2e-6, rel=1e-4, abs=1e-6)


def test_tied_weights_run_and_a_strong_pull_keeps_the_plain_model(tmp_path, capsys):
    data, config = toy_data(tmp_path)
    main(["--data", data, config, "--lever", "tied-weights", "--regs", "0.01,1e9"])
    report = printed_report(capsys)
    assert report["check"]["largest log posterior difference at r = g"] < 1e-8
    assert report["plain"]["cv"] > 0.5 and report["plain"]["fixed"] == report["plain"]["broken"] == 0
    for loss in ("cll", "hinge"):
        assert report[f"{loss} reg=1000000000.0"]["fixed"] == report[f"{loss} reg=1000000000.0"]["broken"] == 0
        assert 0 <= report[f"{loss} reg=0.01"]["cv"] <= 1 and len(report[f"{loss} reg=0.01"]["iterations"]) == 5


def test_the_online_step_is_the_offline_cll_gradient_of_one_document():
    model = fw_model()
    truth = [1, 0, 1]  # spam, ham, spam over ["ham", "spam"]
    s = np.linspace(0.6, 1.4, 9)
    df = np.zeros(9)
    for j, doc in enumerate(DOCS):
        block = term_block(SimpleNamespace(labels=["ham", "spam"]), model, [doc])
        n = len(block["terms"])
        index = np.arange(n) + j  # the document's terms somewhere in a longer s
        block.update(index=np.arange(n), base=block["g"], y=np.array([truth[j]]))
        record = {"index": index, "xg": block["x"].toarray()[0] * block["g"], "table": block["table"],
                  "prior": block["prior"], "y": truth[j]}
        _, offline = tied_objective([block], n, "cll", 0.0)(s[index])  # minus the document's CLL, reg 0
        assert np.allclose(online_gradient(record, s), -offline, rtol=1e-9, atol=1e-12)
        assert np.abs(offline).max() > 1e-3  # a real step
        before = s.copy()
        online_step(s, df, record, 0.5, 0.0)
        assert np.allclose(s[index], np.maximum(before[index] - 0.5 * offline, 0.0))
        untouched = np.setdiff1d(np.arange(9), index)
        assert np.array_equal(s[untouched], before[untouched])
    s, squares = np.full(len(index), 5.0), np.zeros(len(index))
    record["index"] = np.arange(len(index))
    online_step(s, np.zeros(len(index)), record, 0.1, 0.0, squares)  # AdaGrad's first step: eta per term
    assert np.allclose(np.abs(s - 5.0), 0.1) and np.allclose(squares, online_gradient(record, np.full(len(index), 5.0)) ** 2)
    s, df = np.full(3, 2.0), np.zeros(3)
    record = {"index": np.arange(3), "xg": np.zeros(3), "table": np.zeros((3, 2)), "prior": np.zeros(2), "y": 0}
    online_step(s, df, record, 0.1, 5.0)  # no likelihood gradient: the pull alone, reg / df_n with df_n = 1
    assert np.allclose(s, 2.0 - 0.1 * 2 * 5.0 * 1.0) and np.array_equal(df, [1, 1, 1])


def test_tied_online_runs_and_eta_zero_is_the_plain_streamed_model(tmp_path, capsys):
    data, config = toy_data(tmp_path)
    main(["--data", data, config, "--lever", "tied-online", "--etas", "0,0.5", "--regs", "0,0.1", "--epochs", "2",
          "--variants", "sgd,adagrad"])
    report = printed_report(capsys)
    assert report["check"]["largest log posterior difference at s = 1"] < 1e-8
    assert report["stream"]["steps"] > 100  # 5 folds of ~40 documents, each a step once its label is known
    for name in ("eta=0.0 reg=0.0", "eta=0.0 reg=0.1", "eta=0.0 reg=0.0 epochs=2", "eta=0.0 reg=0.0 averaged",
                 "adagrad eta=0.0 reg=0.1", "adagrad eta=0.0 reg=0.0 averaged epochs=2"):
        assert report[name]["cv"] == report["plain"]["cv"] and report[name]["fixed"] == report[name]["broken"] == 0
        assert report[name]["mean s"] == [1.0] * 5 and report[name]["moved"] == [0] * 5
    assert min(report["eta=0.5 reg=0.0"]["moved"]) > 0  # a step moves s
    assert min(report["adagrad eta=0.5 reg=0.0 averaged"]["moved"]) > 0


def test_the_lazy_average_is_the_mean_of_s_over_the_steps():
    rng = np.random.default_rng(0)
    s, df, squares = np.ones(6), np.zeros(6), np.zeros(6)
    average, history = Averaged(s), []
    for _ in range(40):
        index = np.sort(rng.choice(6, size=rng.integers(1, 4), replace=False))
        record = {"index": index, "xg": rng.random(len(index)), "table": rng.normal(size=(len(index), 3)),
                  "prior": np.zeros(3), "y": int(rng.integers(3))}
        average.before(s, index)
        online_step(s, df, record, 0.3, 0.01, squares)
        average.after(s, index)
        history.append(s.copy())
    assert np.allclose(average.mean(s), np.mean(history, axis=0), rtol=1e-12)
    assert np.ptp(np.mean(history, axis=0)) > 0.01
