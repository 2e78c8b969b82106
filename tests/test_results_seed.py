"""``python -m bench.results_seed``: the work folder rebuilt from docs/RESULTS.md regenerates the topic sets' parts of
the page as they are, so that a new candidate runs alone (``--resume``) and merges with the means recomputed."""
from __future__ import annotations

import dataclasses
import doctest
import json
import shutil
from pathlib import Path

import pytest

from bench import results, results_seed
from bench.results_plan import Candidate, Entry

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"


def test_the_docstring_examples_hold():
    assert doctest.testmod(results_seed).failed == 0


def test_a_pools_setting_cell_gives_back_the_variant_it_prints():
    pool = Candidate("ensemble", bases=("a", "b-bigrams", "c"))
    for chosen, label in (({"bases": [0, 2], "meta": True, "bias": False, "reg": 10.0}, "ensemble (2 of 3 bases)"),
                          ({"meta": True, "bias": True, "reg": 1.0, "floor": -50.0}, "ensemble (3 bases)"),
                          ({"base": 1}, "ensemble (3 bases)"), ({"bases": [1], "reg": None}, "ensemble (1 of 3 bases)")):
        assert results_seed.chosen_of(results.pool_choice(chosen, pool), pool, label) == chosen


def _as_on_page(page: str) -> tuple:
    """The plan with the topic sets' candidates the page does not show yet left out (a --resume would run them)."""
    plan = []
    for entry in results.PLAN:
        if entry.data in ("r8", "r52", "webkb"):
            shown = "\n".join(results_seed.section(page, entry))
            entry = dataclasses.replace(entry, candidates=tuple(c for c in entry.candidates if f"| {c.label} |" in shown))
        plan.append(entry)
    return tuple(plan)


@pytest.mark.skipif(not (DATA / "r52.jsonl.gz").is_file(), reason="needs the shared datasets (their document counts)")
def test_a_seeded_folder_regenerates_the_topic_sets_as_the_page_has_them(tmp_path, monkeypatch):
    page = (REPO / "docs" / "RESULTS.md").read_text(encoding="utf-8")
    plan = _as_on_page(page)
    monkeypatch.setattr(results, "PLAN", plan)
    monkeypatch.setattr(results_seed, "PLAN", plan)
    work = tmp_path / "work"
    assert results_seed.main(["--work", str(work)]) == 0
    out = tmp_path / "RESULTS.md"
    shutil.copy(REPO / "docs" / "RESULTS.md", out)
    assert results.main(["--only", "r8,r52,webkb", "--resume", "--merge", "--work", str(work), "--out", str(out)]) == 0
    merged = out.read_text(encoding="utf-8").splitlines()
    before = page.splitlines()
    assert len(merged) == len(before)
    differ = [i for i, (a, b) in enumerate(zip(before, merged)) if a != b]
    assert [before[i][:10] for i in differ] in ([], ["Generated "])  # at most the line saying when
    # every accuracy of the seeded files is an exact share of its document count
    seeded = json.loads((work / "r52-split-uc_pd_jm_dp_fw_ps-bigrams.eval.json").read_text(encoding="utf-8"))
    assert seeded["accuracy"] * seeded["docs"] == pytest.approx(round(seeded["accuracy"] * seeded["docs"]), abs=1e-9)


def test_a_resumed_pool_fit_of_other_bases_is_refused(tmp_path):
    entry = Entry("toy", "split", (1, 1), choose_folds=5)
    pool = Candidate("ensemble", bases=("a",))
    (tmp_path / "toy-split-a.config.json").write_text(json.dumps({"model": "mnb_u_jm_ps"}), encoding="utf-8")
    (tmp_path / "toy-split-ensemble.cv.json").write_text(json.dumps({"bases": [{"model": "mnb_u_jm_tXiX_ps"}]}),
                                                          encoding="utf-8")
    runner = results.Runner(tmp_path, resume=True)
    with pytest.raises(RuntimeError, match="pools other bases"):
        results.run_ensemble(entry, pool, runner, "toy-split-ensemble")
