"""``bench.results`` with ``Entry.choose_folds``: ours is the single candidate with the best cross-validated score of
its tuned configuration, not the best search maximum (canned reports, no subprocess)."""
from __future__ import annotations

import json

import pytest

from bench import results
from bench.results_choice import CHOICE_SEED

from .test_results_page import eval_report, resumed, write_reports


def write_cv(work, stem: str, score: float, folds: int = 5) -> None:
    report = {"dev": {"folds": folds, "seed": CHOICE_SEED}, "dev_tuned": score, "dev_default": score}
    (work / f"{stem}.cv.json").write_text(json.dumps(report), encoding="utf-8")


@pytest.fixture
def work(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "tdm_available", lambda: False)
    peers = [{"peer": "linear_svc", "accuracy": 0.96, "macro_f1": 0.9, "log_loss": None, "dev": 0.9}]
    (tmp_path / "r8-split.peers.json").write_text(json.dumps(peers), encoding="utf-8")
    return tmp_path


def two_candidates(work, choose_folds: int) -> results.Entry:
    """u_jm_ps has the better search maximum (0.95), u_jm_fw_ps the better cross-validated score (0.93 > 0.91)."""
    write_reports(work, "r8-split-u_jm_ps", "4x4", 0.95)
    write_reports(work, "r8-split-u_jm_fw_ps", "4x4", 0.94)
    (work / "r8-split-u_jm_fw_ps.eval.json").write_text(json.dumps(eval_report(0.97)), encoding="utf-8")
    write_cv(work, "r8-split-u_jm_ps", 0.91)
    write_cv(work, "r8-split-u_jm_fw_ps", 0.93)
    return results.Entry("r8", "split", (4, 4), choose_folds=choose_folds,
                         candidates=(results.Candidate("u_jm_ps"), results.Candidate("u_jm_fw_ps")))


def test_cross_validated_score_chooses_ours_and_the_page_says_how(work):
    done = resumed(work, two_candidates(work, 5))
    assert done["best"]["candidate"].spec == "u_jm_fw_ps"
    assert [o["cv"] for o in done["ours"]] == [0.91, 0.93]
    command = done["best"]["commands"][-1]
    assert command.endswith("--iters 0 --points 1 --dev-folds 5 --dev-seed 1 --out $WORK/r8-split-u_jm_fw_ps.cv.config.json")
    assert "--config $WORK/r8-split-u_jm_fw_ps.config.json" in command
    page = "\n".join(results.dataset_section(done))
    assert "5-fold cross-validation" in page
    assert "| **sgm u_jm_fw_ps** ✓ | beta=0.25 | 0.9400 | 0.9300 | 0.9700 |" in page  # dev, dev CV, test
    assert "| linear_svc |  | 0.9000 |  | 0.9600 |" in page  # peers have no CV cell
    row = next(line for line in results.peer_summary([done]) if line.startswith("| r8 |"))
    assert row.startswith("| r8 | u_jm_fw_ps | 0.9400 (CV 0.9300) | 0.9700 | u_jm_ps | 0.9000 |")


def test_without_choose_folds_the_best_dev_score_chooses_and_no_fold_step_runs(work):
    done = resumed(work, two_candidates(work, 1))
    assert done["best"]["candidate"].spec == "u_jm_ps"
    assert all("cv" not in o for o in done["ours"])
    assert "dev CV" not in "\n".join(results.dataset_section(done))


def test_resume_refuses_a_cross_validation_of_another_fold_count(work):
    entry = two_candidates(work, 5)
    write_cv(work, "r8-split-u_jm_ps", 0.91, folds=3)
    with pytest.raises(RuntimeError, match="3 folds, not 5"):
        resumed(work, entry)


def ensemble_entry(work, cv: float, folds: int = 5) -> results.Entry:
    entry = two_candidates(work, 5)
    ensemble = results.Candidate("ensemble", bases=("u_jm_ps", "u_jm_fw_ps"))
    fit = {"dev": {"folds": folds, "seed": CHOICE_SEED}, "dev_tuned": cv, "dev_default": 0.93, "search_seconds": 1.0,
           "search": "ensemble", "evaluations": 9,
           "chosen": {"bases": [0, 1], "meta": False, "bias": True, "reg": 1.0, "cv": cv}}
    (work / "r8-split-ensemble.cv.json").write_text(json.dumps(fit), encoding="utf-8")
    (work / "r8-split-ensemble.cv.eval.json").write_text(json.dumps(eval_report(0.99)), encoding="utf-8")
    (work / "r8-split-ensemble.cv.config.json").write_text("{}", encoding="utf-8")
    return results.Entry("r8", "split", (4, 4), choose_folds=5, candidates=(*entry.candidates, ensemble))


def test_an_ensemble_is_chosen_by_its_cross_validated_score_like_a_single(work):
    done = resumed(work, ensemble_entry(work, 0.94))
    assert done["best"]["candidate"].spec == "ensemble" and done["best"]["cv"] == 0.94
    command = done["best"]["commands"][0]
    assert "--dev-folds 5 --dev-seed 1" in command and command.endswith("--out $WORK/r8-split-ensemble.cv.config.json")
    page = "\n".join(results.dataset_section(done))
    assert "pool of `u_jm_ps`, `u_jm_fw_ps`: meta=False, bias=True, reg=1" in page
    row = next(line for line in results.peer_summary([done]) if line.startswith("| r8 |"))
    assert row.startswith("| r8 | ensemble (2 bases) | ")
    pool_row = next(line for line in results.ensemble_summary([done]) if line.startswith("| r8 |"))
    assert "| 0.9400 | 0.9900 | u_jm_fw_ps | 0.9300 | 0.9700 |" in pool_row  # both dev columns: cross-validated


def test_an_ensemble_below_the_best_single_cross_validation_is_not_chosen(work):
    done = resumed(work, ensemble_entry(work, 0.92))
    assert done["best"]["candidate"].spec == "u_jm_fw_ps"


def test_resume_refuses_an_ensemble_fit_of_another_fold_count(work):
    with pytest.raises(RuntimeError, match="3 folds, not 5"):
        resumed(work, ensemble_entry(work, 0.94, folds=3))
