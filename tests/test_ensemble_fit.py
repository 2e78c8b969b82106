"""``sgm ensemble``'s fit (consumers/evaluation/ensemble_fit.py): dev scores comparable with ``sgm tune``'s, a
configuration that ``sgm eval`` evaluates, and the bench page's ensemble rows."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest

from sgm.consumers.cli import main as sgm
from sgm.consumers.evaluation.ensemble_fit import fit_ensemble, fit_pool
from sgm.consumers.evaluation.dev_task import development_task
from sgm.consumers.evaluation.harness import EvalSetup, evaluate_split, random_partition, train_test
from sgm.model import Ensemble, build_model
from sgm.stream.datasets import LabelledDoc

TOPICS = {"sport": "goal match team score league", "money": "bank rate stock market price",
          "food": "recipe cook dinner taste bread"}
NOISE = "the a of and to in report news today new"


def toy_docs(n: int = 160, seed: int = 0) -> list[LabelledDoc]:
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        label = rng.choice(sorted(TOPICS))
        words = rng.choices(TOPICS[label].split(), k=3) + rng.choices(NOISE.split() + TOPICS[rng.choice(sorted(TOPICS))].split(), k=6)
        docs.append(LabelledDoc(f"d{i}", " ".join(words), (label,), None, "test" if i % 4 == 0 else "train"))
    return docs


BASES = [{"model": "u_jm_ps", "params": {"beta": 0.4}},
         {"model": "uc_pd_jm_dp_fw_ps", "tokenizer": {"ngrams": 2, "binary": True}}]


def test_dev_scores_are_the_tune_protocols_and_the_config_reproduces_the_pool():
    docs = toy_docs()
    setup = EvalSetup(mode="split")
    summary = fit_ensemble(docs, BASES, setup, folds=3)
    for config, dev in zip(BASES, summary["dev_bases"]):  # the very dev score sgm tune gives each base
        assert dev == pytest.approx(development_task(docs, config, setup).run({})["accuracy"], abs=1e-12)
    train, _ = train_test(docs)
    dev_train, dev_test = random_partition(train, 0.25, 0)  # sgm tune's dev partition (texts: each base reads its own)
    assert evaluate_split(summary["tuned_config"], dev_train, dev_test)["accuracy"] == pytest.approx(
        summary["dev_tuned"], abs=1e-12)
    task = development_task(docs, summary["tuned_config"], setup)  # the tune protocol reads texts for an ensemble
    assert task.run({})["accuracy"] == pytest.approx(summary["dev_tuned"], abs=1e-12)
    assert summary["chosen"] in summary["variants"] and len(summary["variants"]) == len(BASES) + 12
    assert isinstance(build_model(summary["tuned_config"]), Ensemble)


def test_pool_weights_follow_the_informative_base():
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 3, 300)
    good = np.log(np.where(np.eye(3)[truth] > 0, 0.8, 0.1))
    noise = np.log(rng.dirichlet(np.ones(3), 300))
    fitted = fit_pool(np.stack([good, noise]), np.ones(300), truth, meta=False, with_bias=False, reg=0.01)
    assert fitted.weights[0, 0] > 0.5 and abs(fitted.weights[1, 0]) < 0.2


def test_sgm_ensemble_then_sgm_eval(tmp_path, capsys):
    data = tmp_path / "toy.jsonl"
    data.write_text("".join(json.dumps({"id": d.id, "text": d.text, "labels": list(d.labels), "split": d.split}) + "\n"
                            for d in toy_docs()), encoding="utf-8")
    bases = []
    for i, config in enumerate(BASES):
        bases += ["--base", str(tmp_path / f"b{i}.json")]
        (tmp_path / f"b{i}.json").write_text(json.dumps(config), encoding="utf-8")
    out, fit = tmp_path / "ens.json", tmp_path / "fit.json"
    assert sgm(["ensemble", "--data", str(data), *bases, "--folds", "3", "--out", str(out), "--json", str(fit)]) == 0
    assert "fitted pool" in capsys.readouterr().out
    assert sgm(["eval", "--data", str(data), "--config", str(out), "--json", str(tmp_path / "eval.json")]) == 0
    report = json.loads((tmp_path / "eval.json").read_text())
    train, test = train_test(toy_docs())
    assert report["accuracy"] == pytest.approx(evaluate_split(json.loads(out.read_text()), train, test)["accuracy"])
    assert report["config"]["model"] == "ensemble"
    assert sgm(["ensemble", "--data", str(data), "--base", str(tmp_path / "missing.json"), "--out", str(out)]) == 2


def test_a_base_scores_tied_documents_as_its_sgm_tune_dev_score_does():
    # a document whose classes tie (no known term, no prior: theta = 0) goes to the first class learned, in sgm
    # tune's dev score and in the served pool; the fit broke the tie by the class name. The tie documents come
    # first, so dev-train teaches their class first; it is last by name, so the two tie rules differ
    first = max(TOPICS)
    docs = [LabelledDoc(f"u{i}", f"unseen{i} never{i}", (first,), None, "train") for i in range(24)] + toy_docs()
    bases = [{"model": "u_jm_ps", "params": {"beta": 0.4, "theta": 0.0}}, BASES[1]]
    setup = EvalSetup(mode="split")
    summary = fit_ensemble(docs, bases, setup, folds=3)
    single = development_task(docs, bases[0], setup).run({})["accuracy"]
    assert summary["dev_bases"][0] == pytest.approx(single, abs=1e-12)


def blas_threads_of_pool_fits(monkeypatch, run) -> list[int]:
    """BLAS thread counts seen inside every pool fit (its L-BFGS call) while ``run()`` runs with 2 threads outside."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from sgm.consumers.evaluation import ensemble_fit

    threads: list[int] = []
    real = ensemble_fit.minimize  # where a pool fit's BLAS work happens

    def counting(*args, **kwargs):
        threads.extend(info["num_threads"] for info in threadpoolctl.threadpool_info() if info["user_api"] == "blas")
        return real(*args, **kwargs)

    monkeypatch.setattr(ensemble_fit, "minimize", counting)
    with threadpoolctl.threadpool_limits(2, user_api="blas"):  # more than one thread outside, whatever the machine
        run()
    return threads


def test_every_pool_fit_runs_blas_on_one_thread(monkeypatch):
    # the small L-BFGS fits ran 7-11x slower with OpenBLAS's threads on the shared cores (ensemble_cv already ran
    # them on one thread); here the pool variants' cross-validation and the chosen pool's fit
    threads = blas_threads_of_pool_fits(monkeypatch,
                                        lambda: fit_ensemble(toy_docs(), BASES, EvalSetup(mode="split"), folds=3))
    assert threads and set(threads) == {1}


def pool_objective(log_posts, lengths, truth, meta, with_bias, reg, weights, bias) -> float:
    """fit_pool's objective written out: the pool's negative log likelihood plus the pull towards equal weights."""
    from sgm.model.ensemble import meta_features, pool

    start = np.zeros_like(weights)
    start[:, 0] = 1.0 / len(weights)
    log_post = pool(log_posts, meta_features(log_posts, lengths, meta), weights, bias)
    penalty = reg * (((weights - start) ** 2).sum() + ((bias**2).sum() if with_bias else 0.0))
    return float(-log_post[np.arange(len(truth)), truth].sum() + penalty)


def correlated_pool_problem(n_docs=800, n_classes=6, seed=1):
    """Three bases of different sharpness whose reliability depends on length: meta-features that matter."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, n_classes, n_docs)
    lengths = rng.lognormal(4.0, 1.0, n_docs)
    bases = []
    for sharpness in (3.0, 1.0, 8.0):
        logits = rng.normal(size=(n_docs, n_classes)) * sharpness
        logits[np.arange(n_docs), truth] += sharpness * (np.log(lengths) / 4.0) * rng.uniform(0.2, 1.5, n_docs)
        bases.append(logits - np.logaddexp.reduce(logits, axis=1, keepdims=True))
    return np.maximum(np.stack(bases), -50.0), lengths, truth


@pytest.mark.parametrize("with_bias,reg", [(False, 0.1), (True, 0.1), (True, 10.0)])
def test_meta_feature_pool_fits_reach_the_optimum(with_bias, reg):
    """The fit ends at the convex objective's minimum (within 1e-7 relative), not wherever a budget of iterations on
    badly scaled meta-features leaves it: a point that moved with the last bits of the input (fitted by L-BFGS on
    the raw columns, r8's pools stopped 0.5-1% above it)."""
    from scipy.optimize import minimize

    log_posts, lengths, truth = correlated_pool_problem()
    fitted = fit_pool(log_posts, lengths, truth, meta=True, with_bias=with_bias, reg=reg)
    value = pool_objective(log_posts, lengths, truth, True, with_bias, reg, fitted.weights, fitted.bias)
    n_bases, width, n_classes = len(log_posts), fitted.weights.shape[1], log_posts.shape[2]

    def objective(theta):  # the reference: plain coordinates, run to a far tighter tolerance
        weights = theta[: n_bases * width].reshape(n_bases, width)
        bias = theta[n_bases * width:] if with_bias else np.zeros(n_classes)
        return pool_objective(log_posts, lengths, truth, True, with_bias, reg, weights, bias)

    start = np.concatenate([fitted.weights.ravel(), fitted.bias if with_bias else []])
    best = minimize(objective, start, method="BFGS", options={"gtol": 1e-9, "maxiter": 20000})
    assert best.fun >= value - 1e-7 * abs(value)  # nothing lower near the fit: a minimum, not a stopping point


def test_dependent_meta_features_still_fit():
    """One base and equal lengths: the length and agreement columns repeat the constant one (a singular curvature
    of the likelihood, made definite by the penalty); the fit still follows the data."""
    log_posts, _, truth = correlated_pool_problem(n_docs=300)
    single, lengths = log_posts[:1], np.full(300, 20.0)
    fitted = fit_pool(single, lengths, truth, meta=True, with_bias=False, reg=0.1)
    assert np.isfinite(fitted.weights).all()
    pooled = fitted.log_posteriors(single, lengths).argmax(axis=1)
    assert (pooled == truth).mean() >= (single[0].argmax(axis=1) == truth).mean() - 0.01
