"""The cross-validated score of a split ensemble and its base-subset choice (consumers/evaluation/ensemble_cv.py):
the same folds and footing as a single configuration's cross-validated score, no held-out-fold data in any fit,
a noise base dropped, and the one-base bias pool as its formula."""
from __future__ import annotations

import json

import numpy as np
import pytest

from sgm.consumers.cli import main as sgm
from sgm.consumers.evaluation.dev_task import development_task
from sgm.consumers.evaluation.ensemble_cv import choose_pool, cross_validate_ensemble
from sgm.consumers.evaluation.ensemble_fit import fit_pool
from sgm.consumers.evaluation.harness import EvalSetup, cross_validation_folds, labelled, train_test
from sgm.model import Ensemble, build_model
from sgm.model.ensemble import FLOOR
from sgm.stream.datasets import LabelledDoc
from tests.test_ensemble_fit import BASES, blas_threads_of_pool_fits, toy_docs


class Doc:
    def __init__(self, label):
        self.labels = [label]


def log_softmax(scores: np.ndarray) -> np.ndarray:
    top = scores.max(axis=1, keepdims=True)
    return scores - top - np.log(np.exp(scores - top).sum(axis=1, keepdims=True))


def test_each_base_scores_as_its_single_cross_validation_and_the_pool_as_its_folds():
    docs = toy_docs()
    setup = EvalSetup(mode="split")
    summary = cross_validate_ensemble(docs, BASES, setup, folds=5, seed=1)
    for config, score in zip(BASES, summary["dev_bases"]):  # sgm tune --dev-folds 5 --dev-seed 1 of each base
        single = development_task(docs, config, setup, dev_folds=5, dev_seed=1).run({})["accuracy"]
        assert score == pytest.approx(single, abs=1e-12)
    train = labelled(train_test(docs)[0])
    held = [len(h) for _, h in cross_validation_folds(len(train), 5, 1)]
    pooled = sum(f["held_score"] * n for f, n in zip(summary["folds"], held)) / len(train)
    assert summary["dev_tuned"] == pytest.approx(pooled, abs=1e-12)
    assert isinstance(build_model(summary["tuned_config"]), Ensemble)


def test_a_held_out_folds_labels_change_no_fit_of_its_pool():
    docs = toy_docs()
    setup = EvalSetup(mode="split")
    train = labelled(train_test(docs)[0])
    held = {train[i].id for i in cross_validation_folds(len(train), 5, 1)[0][1]}
    labels = sorted({d.labels[0] for d in docs})
    moved = [LabelledDoc(d.id, d.text, (labels[(labels.index(d.labels[0]) + 1) % len(labels)],), d.ts, d.split)
             if d.id in held else d for d in docs]
    before = cross_validate_ensemble(docs, BASES, setup, folds=5, seed=1)
    after = cross_validate_ensemble(moved, BASES, setup, folds=5, seed=1)
    fold = lambda f: {k: v for k, v in f.items() if k != "held_score"}  # noqa: E731
    assert fold(after["folds"][0]) == fold(before["folds"][0])  # fold 0's pool: the same, to the last bit
    assert after["folds"][0]["held_score"] != before["folds"][0]["held_score"]  # scored against the new labels
    assert any(fold(a) != fold(b) for a, b in zip(after["folds"][1:], before["folds"][1:]))  # the others read them


def test_the_subset_choice_drops_a_noise_base():
    rng = np.random.default_rng(3)
    n, classes = 400, 3
    truth = rng.integers(0, classes, n)

    def expert():  # right on a random 70% of the documents, independently of the other, and surer when right
        right = rng.random(n) < 0.7
        top = np.where(right, truth, (truth + rng.integers(1, classes, n)) % classes)
        sure = np.where(right, rng.uniform(0.6, 0.95, n), rng.uniform(0.4, 0.7, n))[:, None]
        return np.log(np.where(np.eye(classes)[top] > 0, sure, (1 - sure) / (classes - 1)))

    noise = np.log(rng.dirichlet(np.ones(classes), n))
    oof = np.stack([expert(), noise, expert()])
    bases, fitted, chosen, tried = choose_pool(oof, np.ones(n), truth, list(range(classes)),
                                               [Doc(t) for t in truth], "accuracy")
    assert bases == [0, 2] and fitted.weights.shape[0] == 2 and chosen["bases"] == [0, 2]
    assert any(t["bases"] == [0, 1, 2] for t in tried) or any(1 in t["bases"] and len(t["bases"]) > 1 for t in tried)
    alone = max(t["cv"] for t in tried if len(t["bases"]) == 1)
    assert chosen["cv"] > alone


def test_the_subset_choice_weights_bases_by_meta_features_where_the_documents_length_decides():
    # LSHTC4's per-document weights, now tried in the cross-validated choice (SUBSET_VARIANTS, POOL_VARIANTS):
    # base 0 is the expert on short documents, base 1 on long ones, and only the length tells which to trust
    rng = np.random.default_rng(7)
    n, classes = 500, 3
    truth = rng.integers(0, classes, n)
    lengths = np.where(rng.random(n) < 0.5, rng.integers(2, 10, n), rng.integers(200, 2000, n)).astype(float)
    short = lengths < 100

    def expert(where):  # right and sure where its documents are, a coin elsewhere (sure of a random class)
        top = np.where(where & (rng.random(n) < 0.9), truth, rng.integers(0, classes, n))
        return np.log(np.where(np.eye(classes)[top] > 0, 0.8, 0.1))

    oof = np.stack([expert(short), expert(~short)])
    bases, fitted, chosen, tried = choose_pool(oof, lengths, truth, list(range(classes)), [Doc(t) for t in truth],
                                               "accuracy")
    assert bases == [0, 1] and chosen["meta"] is True and fitted.meta
    constant = max(t["cv"] for t in tried if not t["meta"])
    assert chosen["cv"] > constant + 0.05  # the constant weights cannot tell the two halves apart
    # the chosen pool is its formula: alpha_j(d) = sum_f v[j, f] m_f(d) over m(d) = [1, log1p(length) / 5,
    # each base's max posterior and normalized entropy, the share of agreeing base pairs]
    p = np.exp(oof)
    entropy = -(p * oof).sum(axis=2) / np.log(classes)
    top = oof.argmax(axis=2)
    agree = ((top[0] == top[0]).astype(float) * 2 + 2 * (top[0] == top[1])) / 4
    m = np.column_stack([np.ones(n), np.log1p(lengths) / 5, p[0].max(1), entropy[0], p[1].max(1), entropy[1], agree])
    alpha = m @ fitted.weights.T
    expected = log_softmax(alpha[:, :1] * oof[0] + alpha[:, 1:] * oof[1] + fitted.bias)
    assert np.allclose(fitted.log_posteriors(oof, lengths), expected, atol=1e-12)


def test_a_one_base_bias_pool_is_its_formula_and_corrects_a_prior():
    rng = np.random.default_rng(5)
    n, classes = 600, 3
    truth = rng.integers(0, classes, n)
    lp = np.log(np.where(np.eye(classes)[truth] > 0, 0.6, 0.2))
    lp[:, 1] += np.log(1.6)  # a base that over-predicts class 1 (as r52's earn -> acq): ties go its way
    lp = log_softmax(lp + rng.normal(0, 0.3, lp.shape))
    reg = 1.0
    fitted = fit_pool(lp[None], np.ones(n), truth, meta=False, with_bias=True, reg=reg)
    w, b = fitted.weights[0, 0], fitted.bias
    assert np.allclose(fitted.log_posteriors(lp[None], np.ones(n)), log_softmax(w * lp + b), atol=1e-12)
    residual = np.exp(log_softmax(w * lp + b)) - np.eye(classes)[truth]  # the penalized likelihood's stationarity
    assert np.allclose(residual.sum(axis=0) + 2 * reg * b, 0, atol=1e-2)
    assert abs((residual * lp).sum() + 2 * reg * (w - 1.0)) < 1e-2
    assert b[1] < b[0] and b[1] < b[2]  # the prior correction pulls class 1 down
    bases, _, chosen, _ = choose_pool(lp[None], np.ones(n), truth, list(range(classes)),
                                      [Doc(t) for t in truth], "accuracy")
    assert bases == [0] and chosen["bias"] is True
    assert chosen["cv"] > (lp.argmax(axis=1) == truth).mean()


def test_the_one_base_bias_ensemble_scores_as_the_formula():
    docs = toy_docs()
    train, test = train_test(docs)
    base = build_model(BASES[0])
    base.learn_many([d.text for d in train], [d.labels for d in train])
    ensemble = Ensemble([base], [1.7], {"sport": 0.4, "money": -0.9})
    names, pooled = ensemble.predict_log_proba_many([d.text for d in test])
    base_names, base_lp = base.predict_log_proba_many([d.text for d in test])
    order = [list(base_names).index(c) for c in names]
    bias = np.array([{"sport": 0.4, "money": -0.9}.get(c, 0.0) for c in names])
    expected = log_softmax(1.7 * np.maximum(base_lp[:, order], FLOOR) + bias)
    assert np.allclose(pooled, expected, atol=1e-9)


def toy_files(tmp_path) -> tuple[str, list[str]]:
    """The toy data and the two bases as files: (data path, the --base arguments)."""
    data = tmp_path / "toy.jsonl"
    data.write_text("".join(json.dumps({"id": d.id, "text": d.text, "labels": list(d.labels), "split": d.split}) + "\n"
                            for d in toy_docs()), encoding="utf-8")
    bases = []
    for i, config in enumerate(BASES):
        path = tmp_path / f"b{i}.json"
        path.write_text(json.dumps(config), encoding="utf-8")
        bases += ["--base", str(path)]
    return str(data), bases


def test_sgm_ensemble_dev_folds_writes_the_cross_validated_pool(tmp_path, capsys):
    data, bases = toy_files(tmp_path)
    out, report = tmp_path / "pool.json", tmp_path / "fit.json"
    assert sgm(["ensemble", "--data", data, *bases, "--dev-folds", "5", "--dev-seed", "1", "--out", str(out),
                "--json", str(report)]) == 0
    summary = json.loads(report.read_text(encoding="utf-8"))
    assert summary["dev"]["folds"] == 5 and len(summary["folds"]) == 5
    assert json.loads(out.read_text(encoding="utf-8")) == summary["tuned_config"]
    assert "cross-validated" in capsys.readouterr().out


@pytest.mark.parametrize("extra", [["--dev-folds", "2"], ["--dev-folds", "0"], ["--dev-folds", "-3"],
                                   ["--dev-folds", "100000"], ["--mode", "prequential", "--dev-folds", "0"]])
def test_sgm_ensemble_refuses_a_fold_count_it_cannot_use_in_one_line(tmp_path, capsys, extra):
    # K = 2 leaves no document for the fits on all folds but two (it raised a RuntimeError, a traceback);
    # K < 1 was taken silently as one dev partition (sgm tune refuses it)
    data, bases = toy_files(tmp_path)
    out = tmp_path / "pool.json"
    assert sgm(["ensemble", "--data", data, *bases, *extra, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err and err[-1].startswith("sgm ensemble: ") and "--dev-folds" in err[-1], err
    assert "Traceback" not in "\n".join(err) and not out.exists()


def test_the_smallest_training_side_three_folds_take():
    # 3 <= K <= the training documents always leaves each pool's fits a document, and its own choice two
    docs = [d for d in toy_docs() if d.split == "test"][:2] + [d for d in toy_docs() if d.split == "train"][:4]
    summary = cross_validate_ensemble(docs, BASES, EvalSetup(mode="split"), folds=3, seed=1)
    assert len(summary["folds"]) == 3 and 0.0 <= summary["dev_tuned"] <= 1.0


class RecordingRuns:
    """A stand-in for BaseRuns whose 'posteriors' say which document was scored and which documents were fitted:
    column 0 the scored document's index, column 1 a code of the fitted set."""

    configs, classes = [None], ["a", "b"]

    def __init__(self) -> None:
        self.codes: dict[int, frozenset] = {}

    def log_posteriors(self, fit_index, score_index):
        code = len(self.codes)
        self.codes[code] = frozenset(fit_index)
        return np.array([[[float(i), float(code)] for i in score_index]])


@pytest.mark.parametrize("n, folds", [(10, 3), (11, 4), (23, 5)])
def test_fold_posteriors_score_each_row_by_the_fit_that_left_out_its_fold_and_the_pools(n, folds):
    from sgm.consumers.evaluation.ensemble_cv import fold_posteriors

    parts = cross_validation_folds(n, folds, 1)
    runs = RecordingRuns()
    outer, inner = fold_posteriors(runs, parts)
    fold_of = {i: k for k, (_, held) in enumerate(parts) for i in held}
    assert len(runs.codes) == folds * (folds - 1) // 2 + folds
    for i in range(n):
        assert outer[0, i, 0] == i and runs.codes[int(outer[0, i, 1])] == frozenset(range(n)) - set(parts[fold_of[i]][1])
        for k in range(folds):
            if k == fold_of[i]:
                assert (inner[k][0, i] == FLOOR).all()  # pool k never reads its own fold
                continue
            left_out = set(parts[k][1]) | set(parts[fold_of[i]][1])
            assert inner[k][0, i, 0] == i and runs.codes[int(inner[k][0, i, 1])] == frozenset(range(n)) - left_out


def test_every_pool_fit_of_the_cross_validated_score_runs_blas_on_one_thread(monkeypatch):
    # as the stream fit's: the small L-BFGS pool fits ran 7-11x slower with OpenBLAS's threads on the shared cores
    # (choose_pool over 5 bases x 1,500 documents: 6.5-11.3 s against 0.9-1.0 s, the same choice)
    threads = blas_threads_of_pool_fits(monkeypatch, lambda: cross_validate_ensemble(
        toy_docs(), BASES, EvalSetup(mode="split"), folds=3, seed=1))
    assert threads and set(threads) == {1}


def test_a_base_scores_tied_documents_as_its_single_does():
    # a document whose classes tie (no known term, no prior: theta = 0, as webkb's tuned uc_pd_dp_tXiX_ps) goes to
    # the lower class id, the first class learned, in the single's CV and in the served pool; the CV fit broke the
    # tie by the class name. Here every fold's fit learns the tied class first, so the scores agree exactly
    first = max(d.labels[0] for d in toy_docs())  # learned first, last by name: the two tie rules differ
    docs = [LabelledDoc(f"u{i}", f"unseen{i} never{i}", (first,), None, "train") for i in range(12)] + toy_docs()
    bases = [{"model": "u_jm_ps", "params": {"beta": 0.4, "theta": 0.0}}, BASES[1]]
    setup = EvalSetup(mode="split")
    summary = cross_validate_ensemble(docs, bases, setup, folds=5, seed=1)
    single = development_task(docs, bases[0], setup, dev_folds=5, dev_seed=1).run({})["accuracy"]
    assert summary["dev_bases"][0] == pytest.approx(single, abs=1e-12)


def test_each_folds_record_keeps_the_chosen_bias_flag_beside_the_fitted_biases():
    # the per-fold record spread the chosen variant (its "bias": True / False) and then overwrote "bias" with the
    # fitted bias vector: a report reading the fold's variant read a list
    summary = cross_validate_ensemble(toy_docs(), BASES, EvalSetup(mode="split"), folds=3, seed=1)
    classes = {d.labels[0] for d in toy_docs()}
    assert len(summary["folds"]) == 3
    for record in summary["folds"]:
        assert isinstance(record["bias"], bool) and len(record["bias_vector"]) == len(classes)
        assert record["bias"] or not any(record["bias_vector"])  # no fitted bias where the variant has none
