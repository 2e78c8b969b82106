"""``python -m bench.results`` bookkeeping: a resumed run never mixes in reports of another search size,
and the page states the sizes the reports say were run (canned reports, no subprocess)."""
from __future__ import annotations

import json

import pytest

from bench import results


def tune_report(size: str, dev: float) -> dict:
    return {"search": size, "evaluations": 5, "search_seconds": 1.0, "dev_default": dev - 0.01, "dev_tuned": dev,
            "tuned_config": {"params": {"beta": 0.25}}}


def eval_report(accuracy: float) -> dict:
    return {"accuracy": accuracy, "macro_f1": accuracy, "log_loss": 0.5, "learn_docs_per_s": 1.0,
            "score_docs_per_s": 1.0, "roc_auc": None, "one_minus_roca_pct": None, "config": {"params": {"beta": 0.25}}}


def write_reports(work, stem: str, size: str, dev: float) -> None:
    for suffix, report in ((".tune.json", tune_report(size, dev)), (".eval.json", eval_report(0.9)),
                           (".default.json", eval_report(0.8))):
        (work / f"{stem}{suffix}").write_text(json.dumps(report), encoding="utf-8")


def resumed(work, entry: results.Entry, search: tuple[int, int] | None = None) -> dict:
    """``run_entry`` over the canned reports in ``work`` (all present, so nothing runs)."""
    return results.run_entry(entry, results.Runner(work, resume=True), search, {})


@pytest.fixture
def work(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "tdm_available", lambda: False)
    (tmp_path / "toy-split.peers.json").write_text("[]", encoding="utf-8")
    return tmp_path


def test_resume_refuses_a_report_of_another_search_size(work):
    entry = results.Entry("toy", "split", (4, 4), candidates=(results.Candidate("u_jm_ps"),))
    write_reports(work, "toy-split-u_jm_ps", "2x2", 0.9)
    with pytest.raises(RuntimeError, match="2x2 search, not 4x4"):
        resumed(work, entry)
    done = resumed(work, entry, (2, 2))
    assert done["best"]["summary"]["search"] == "2x2"


def test_candidate_search_size_wins_unless_one_size_is_forced(work):
    slow = results.Candidate("u_jm_ps", search=(1, 3))
    entry = results.Entry("toy", "split", (4, 4), candidates=(results.Candidate("uc_pd_dp_ps"), slow))
    write_reports(work, "toy-split-uc_pd_dp_ps", "4x4", 0.91)
    write_reports(work, "toy-split-u_jm_ps", "1x3", 0.95)
    done = resumed(work, entry)
    assert done["best"]["candidate"] is slow  # the best dev score chooses
    with pytest.raises(RuntimeError, match="1x3 search, not 4x4"):
        resumed(work, entry, (4, 4))


def test_page_states_the_sizes_the_reports_ran(work):
    tdm = results.Candidate("tdm_uc_jm_dp_kpd_kdp", search=(10, 12))
    entry = results.Entry("toy", "split", (40, 40), candidates=(results.Candidate("u_jm_ps"), tdm))
    write_reports(work, "toy-split-u_jm_ps", "40x40", 0.9)
    write_reports(work, "toy-split-tdm_uc_jm_dp_kpd_kdp", "10x12", 0.9)
    full = resumed(work, entry)
    sentence = results.search_sizes([full])
    assert sentence.startswith("toy: the thesis's 40x40 search for every MNB candidate (TDM: 10x12)")
    small = results.Entry("toy", "split", (4, 4), candidates=(results.Candidate("u_jm_ps"),))
    write_reports(work, "toy-split-u_jm_ps", "4x4", 0.9)
    partial = resumed(work, small)
    assert results.search_sizes([partial]).startswith("Searches are smaller than the thesis's 40x40")


def test_peer_summary_compares_the_dev_choice_with_every_peer_and_the_choice_before_fw(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "tdm_available", lambda: False)
    peers = [{"peer": "linear_svc", "accuracy": 0.96, "dev": 0.9},
             {"peer": "logistic_regression", "accuracy": 0.90, "dev": 0.9}, {"peer": "vw_oaa", "accuracy": 0.80, "dev": 0.8}]
    (tmp_path / "r8-split.peers.json").write_text(json.dumps(peers), encoding="utf-8")
    write_reports(tmp_path, "r8-split-u_jm_ps", "4x4", 0.90)  # test accuracy 0.9
    write_reports(tmp_path, "r8-split-u_jm_fw_ps", "4x4", 0.95)
    (tmp_path / "r8-split-u_jm_fw_ps.eval.json").write_text(json.dumps(eval_report(0.95)), encoding="utf-8")
    entry = results.Entry("r8", "split", (4, 4),
                          candidates=(results.Candidate("u_jm_ps"), results.Candidate("u_jm_fw_ps")))
    lines = results.peer_summary([resumed(tmp_path, entry)])
    row = next(line for line in lines if line.startswith("| r8 |"))
    # 1 - 0.05 / 0.04 = -25%; 1 - 0.05 / 0.10 = +50%; 1 - 0.05 / 0.20 = +75%
    assert row == ("| r8 | u_jm_fw_ps | 0.9500 | 0.9500 | u_jm_ps | 0.9000 | 0.9600 | -25.0% | 0.9000 | +50.0% | "
                   "0.8000 | +75.0% |")
    assert any("-25.0%, **not reached**" in line for line in lines)
    assert not results.peer_summary([resumed(tmp_path, results.Entry("r8", "split", (4, 4),
                                                                     candidates=(results.Candidate("u_jm_ps"),)))])


def stream_reports(work, stem: str, size: str, dev_auc: float, roca: float, objective: str = "roc_auc") -> None:
    tune = {**tune_report(size, dev_auc), "objective": objective}
    ev = {**eval_report(0.98), "roc_auc": 1 - roca / 100, "one_minus_roca_pct": roca}
    for suffix, report in ((".tune.json", tune), (".eval.json", ev), (".default.json", ev)):
        (work / f"{stem}{suffix}").write_text(json.dumps(report), encoding="utf-8")


def test_stream_entries_choose_by_dev_roc_auc_in_their_own_files(work):
    """Entries with an objective keep their reports apart from accuracy-tuned ones (a --resume of an older
    folder adds steps, never reuses them), refuse a report tuned for another measure, choose ours by dev ROC
    AUC and set 1-ROCA% beside each peer's dev and stream 1-ROCA% with the RER."""
    words, bigrams = results.Candidate("u_jm_ps"), results.Candidate("u_jm_ps", ("--ngrams", "2"))
    entry = results.Entry("toy", "prequential", (2, 2), candidates=(words, bigrams), objective="roc_auc")
    peers = [{"peer": "vw_logistic_bigrams", "accuracy": 0.97, "dev": 0.99, "macro_f1": 0.9, "log_loss": 0.1,
              "roc_auc": 0.9975, "one_minus_roca_pct": 0.25, "dev_measures": {"one_minus_roca_pct": 1.0}},
             {"peer": "river_mnb", "accuracy": 0.96, "dev": 0.98, "macro_f1": 0.9, "log_loss": 0.1,
              "roc_auc": 0.995, "one_minus_roca_pct": 0.5, "dev_measures": {"one_minus_roca_pct": 2.0}}]
    (work / "toy-prequential.peers-roc_auc.json").write_text(json.dumps(peers), encoding="utf-8")
    stream_reports(work, "toy-prequential-u_jm_ps-roc_auc", "2x2", 0.990, 0.30)
    stream_reports(work, "toy-prequential-u_jm_ps-bigrams-roc_auc", "2x2", 0.995, 0.20)
    done = resumed(work, entry)
    assert done["best"]["candidate"] is bigrams  # dev 1-ROCA 0.5% beats 1.0%
    assert "--objective roc_auc" in done["best"]["commands"][0] and "--objective roc_auc" in done["peer_command"]
    row = next(line for line in results.stream_summary([done]) if line.startswith("| toy"))
    # RER: 1 - 0.2 / 0.25 = +20%, 1 - 0.2 / 0.5 = +60%
    assert row == ("| toy (ts order) | u_jm_ps +bigrams | 0.500 | 0.9800 | 0.200 | 1.000 | 0.250 | +20.0% | "
                   "2.000 | 0.500 | +60.0% |")
    stream_reports(work, "toy-prequential-u_jm_ps-roc_auc", "2x2", 0.990, 0.30, objective="accuracy")
    with pytest.raises(RuntimeError, match="tuned for accuracy, not roc_auc"):
        resumed(work, entry)


def test_ensemble_runs_last_competes_on_dev_and_gets_its_own_rows(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "tdm_available", lambda: False)
    peers = [{"peer": "linear_svc", "accuracy": 0.96, "dev": 0.9},
             {"peer": "logistic_regression", "accuracy": 0.90, "dev": 0.9}, {"peer": "vw_oaa", "accuracy": 0.80, "dev": 0.8}]
    peers = [{**p, "macro_f1": p["accuracy"], "log_loss": 0.3} for p in peers]
    (tmp_path / "r8-split.peers.json").write_text(json.dumps(peers), encoding="utf-8")
    write_reports(tmp_path, "r8-split-u_jm_ps", "4x4", 0.90)
    write_reports(tmp_path, "r8-split-u_jm_fw_ps", "4x4", 0.95)
    fit = {"search": "ensemble", "evaluations": 12, "search_seconds": 7.0, "dev_default": 0.95, "dev_tuned": 0.97,
           "chosen": {"meta": True, "bias": False, "reg": 1.0, "cv": 0.96}, "tuned_config": {"model": "ensemble"}}
    (tmp_path / "r8-split-ensemble.tune.json").write_text(json.dumps(fit), encoding="utf-8")
    (tmp_path / "r8-split-ensemble.eval.json").write_text(json.dumps(eval_report(0.97)), encoding="utf-8")
    ensemble = results.Candidate("ensemble", bases=("u_jm_ps", "u_jm_fw_ps"))
    entry = results.Entry("r8", "split", (4, 4),
                          candidates=(ensemble, results.Candidate("u_jm_ps"), results.Candidate("u_jm_fw_ps")))
    done = resumed(tmp_path, entry)
    assert [o["candidate"].stem for o in done["ours"]] == ["u_jm_ps", "u_jm_fw_ps", "ensemble"]
    assert done["best"]["candidate"] is ensemble  # the best dev score chooses, the ensemble among the rest
    assert "--base $WORK/r8-split-u_jm_fw_ps.config.json" in done["best"]["commands"][0]
    lines = results.ensemble_summary([done])
    row = next(line for line in lines if line.startswith("| r8 |"))
    # 1 - 0.03 / 0.04 = +25%; 1 - 0.03 / 0.10 = +70%; 1 - 0.03 / 0.20 = +85%
    assert row.endswith("| u_jm_fw_ps | 0.9500 | 0.9000 | 0.9600 | +25.0% | 0.9000 | +70.0% | 0.8000 | +85.0% |")
    before = next(line for line in results.peer_summary([done]) if line.startswith("| r8 |"))
    assert "| ensemble (2 bases) | 0.9700 | 0.9700 | u_jm_ps | 0.9000 |" in before  # "before fw" is no ensemble
    results.dataset_section(done)  # the per-dataset table takes a candidate without a default evaluation


def test_a_pool_that_kept_a_subset_of_its_bases_is_shown_with_that_count_in_every_row(tmp_path, monkeypatch):
    """The per-dataset table and the cost table name a chosen pool as the summaries do: 'ensemble (2 of 3 bases)'
    (the 2026-11-27 page called r8's 3-base pool 'ensemble (5 bases)' there, beside the served 3-base cost)."""
    monkeypatch.setattr(results, "tdm_available", lambda: False)
    peers = [{"peer": "linear_svc", "accuracy": 0.96, "dev": 0.9, "macro_f1": 0.96, "log_loss": 0.3}]
    (tmp_path / "r8-split.peers.json").write_text(json.dumps(peers), encoding="utf-8")
    for stem, dev in (("u_jm_ps", 0.90), ("u_jm_fw_ps", 0.95), ("u_pd_ps", 0.91)):
        write_reports(tmp_path, f"r8-split-{stem}", "4x4", dev)
    fit = {"search": "ensemble", "evaluations": 12, "search_seconds": 7.0, "dev_default": 0.95, "dev_tuned": 0.97,
           "chosen": {"bases": [0, 1], "meta": False, "bias": False, "reg": 1.0, "cv": 0.96},
           "tuned_config": {"model": "ensemble"}}
    (tmp_path / "r8-split-ensemble.tune.json").write_text(json.dumps(fit), encoding="utf-8")
    (tmp_path / "r8-split-ensemble.eval.json").write_text(json.dumps(eval_report(0.97)), encoding="utf-8")
    ensemble = results.Candidate("ensemble", bases=("u_jm_ps", "u_jm_fw_ps", "u_pd_ps"))
    entry = results.Entry("r8", "split", (4, 4), candidates=(results.Candidate("u_jm_ps"),
                                                              results.Candidate("u_jm_fw_ps"),
                                                              results.Candidate("u_pd_ps"), ensemble))
    done = resumed(tmp_path, entry)
    assert done["best"]["candidate"] is ensemble
    rows = [line for line in results.dataset_section(done) if line.startswith("| **sgm ensemble")]
    assert rows and rows[0].startswith("| **sgm ensemble (2 of 3 bases)** ✓ | pool of `u_jm_ps`, `u_jm_fw_ps`:")
    cost = [line for line in results.peer_summary([done]) if line.startswith("| r8 |")]
    assert cost and all("ensemble (3 bases)" not in line for line in cost), cost
    assert any(line.startswith("| r8 | ensemble (2 of 3 bases) | 1 | 1 |") for line in cost), cost


def test_stream_pool_fits_on_the_entrys_dev_prefix_and_shows_its_cost_beside_the_single_model(work):
    """A spam stream's ensemble candidate runs ``sgm ensemble --mode prequential`` with the entry's objective and
    dev arguments on the entry's roc_auc-tuned configurations, competes by its dev score, and the stream summary
    sets its docs/s beside the dev-chosen single model's (issue 19, must-show 3)."""
    words, bigrams = results.Candidate("u_jm_ps"), results.Candidate("u_jm_ps", ("--ngrams", "2"))
    pool = results.Candidate("ensemble", bases=(words.stem, bigrams.stem))
    entry = results.Entry("toy", "prequential", (2, 2), shuffle=0, candidates=(pool, words, bigrams),
                          objective="roc_auc", dev_args=("--dev-fraction", "0.1"))
    (work / "toy-prequential.peers-roc_auc.json").write_text(json.dumps([{
        "peer": "vw_logistic_bigrams", "accuracy": 0.97, "dev": 0.99, "macro_f1": 0.9, "log_loss": 0.1,
        "roc_auc": 0.9975, "one_minus_roca_pct": 0.25, "dev_measures": {"one_minus_roca_pct": 1.0}}]), encoding="utf-8")
    stream_reports(work, "toy-prequential-u_jm_ps-roc_auc", "2x2", 0.990, 0.30)
    stream_reports(work, "toy-prequential-u_jm_ps-bigrams-roc_auc", "2x2", 0.995, 0.26)
    fit = {"search": "ensemble", "evaluations": 26, "search_seconds": 7.0, "dev_default": 0.995, "dev_tuned": 0.996,
           "objective": "roc_auc", "chosen": {"meta": True, "bias": True, "reg": 10.0, "floor": -50.0, "cv": 0.996},
           "tuned_config": {"model": "ensemble"}}
    (work / "toy-prequential-ensemble-roc_auc.tune.json").write_text(json.dumps(fit), encoding="utf-8")
    ev = {**eval_report(0.99), "roc_auc": 0.998, "one_minus_roca_pct": 0.2, "learn_docs_per_s": 100.0,
          "score_docs_per_s": 50.0}
    (work / "toy-prequential-ensemble-roc_auc.eval.json").write_text(json.dumps(ev), encoding="utf-8")
    done = resumed(work, entry)
    assert done["best"]["candidate"] is pool  # dev 1-ROCA 0.4% beats the bigram model's 0.5%
    assert done["best"]["commands"][0] == (
        "sgm ensemble --data toy --mode prequential --shuffle 0 --dev-fraction 0.1 --objective roc_auc "
        "--base $WORK/toy-prequential-u_jm_ps-roc_auc.config.json "
        "--base $WORK/toy-prequential-u_jm_ps-bigrams-roc_auc.config.json "
        "--out $WORK/toy-prequential-ensemble-roc_auc.config.json")
    assert done["best"]["commands"][1].startswith("sgm eval --data toy --mode prequential --shuffle 0 --config")
    lines = results.stream_summary([done])
    assert next(line for line in lines if line.startswith("| toy (shuffled)")).endswith("| 0.200 | 1.000 | 0.250 | "
                                                                                         "+20.0% | – | – | – |")
    assert next(line for line in lines if line.startswith("| toy |")) == (
        "| toy | pool: meta=True, bias=True, reg=10, floor=-50 | 0.400 | 0.200 | 100 | 50 | u_jm_ps +bigrams | 0.500 | "
        "0.260 | 1 | 1 |")
    results.dataset_section(done)
    three = results.Candidate("ensemble", bases=("a", "b", "c"))  # the stream fit pooled a dev-chosen subset
    assert results.pool_choice({"bases": [0, 2], "meta": False, "bias": True, "reg": 1.0, "floor": -50.0}, three) == (
        "pool of `a`, `c`: meta=False, bias=True, reg=1, floor=-50")
    assert results.pool_choice({"bases": [0, 1, 2], "meta": False, "bias": True, "reg": 1.0}, three) == (
        "pool of `a`, `b`, `c`: meta=False, bias=True, reg=1")
    assert results.pool_choice({"meta": False, "bias": True, "reg": 1.0}, three) == (  # an older fit's file
        "pool: meta=False, bias=True, reg=1")
    # the summary tables say how many of the offered bases the fit kept
    assert results.shown_label({"candidate": three, "summary": {"chosen": {"bases": [0, 2]}}}) == "ensemble (2 of 3 bases)"
    assert results.shown_label({"candidate": three, "summary": {"chosen": {"bases": [0, 1, 2]}}}) == "ensemble (3 bases)"
    assert results.shown_label({"candidate": three, "summary": {"chosen": {}}}) == "ensemble (3 bases)"


def test_label_rule_steps_choose_the_output_rule_per_candidate_and_the_stream_replays_it(work):
    """Issue 19: an entry with ``label_rule`` reads each candidate's rule report; a chosen threshold evaluates
    the candidate with it (its own file, so a --resume of an older folder runs it) beside the arg-max, and the
    replayed stream entry takes the threshold of the dev-chosen configuration."""
    def rule(threshold):
        return {"label_threshold": {"label_threshold": threshold, "rule": "arg-max" if threshold is None else "threshold",
                                    "cross_fitted": {"arg-max": 0.80, "threshold": 0.81 if threshold else 0.79,
                                                     "per-label": 0.805}, "min_support": 10}}

    words, fw = results.Candidate("u_jm_ps"), results.Candidate("u_jm_fw_ps")
    entry = results.Entry("toy", "split", (4, 4), candidates=(words, fw), label_rule=True)
    write_reports(work, "toy-split-u_jm_ps", "4x4", 0.90)
    write_reports(work, "toy-split-u_jm_fw_ps", "4x4", 0.95)
    (work / "toy-split-u_jm_ps.label-rule.json").write_text(json.dumps(rule(None)), encoding="utf-8")
    (work / "toy-split-u_jm_fw_ps.label-rule.json").write_text(json.dumps(rule(0.35)), encoding="utf-8")
    with pytest.raises(json.JSONDecodeError):  # the thresholded evaluation is a step of its own
        (work / "toy-split-u_jm_fw_ps.label-threshold.eval.json").write_text("", encoding="utf-8")
        resumed(work, entry)
    thresholded = {**eval_report(0.92), "micro_f1": 0.92,
                   "config": {"params": {"beta": 0.25}, "label_threshold": 0.35}}
    (work / "toy-split-u_jm_fw_ps.label-threshold.eval.json").write_text(json.dumps(thresholded), encoding="utf-8")
    done = resumed(work, entry)
    best = done["best"]
    assert best["candidate"] is fw and best["tuned"]["accuracy"] == 0.92 and best["argmax"]["accuracy"] == 0.9
    assert "--choose-label-threshold --config $WORK/toy-split-u_jm_fw_ps.config.json" in best["commands"][1]
    assert "--label-threshold" not in best["commands"][2]  # the arg-max evaluation, shown too
    assert best["commands"][3] == best["commands"][2] + " --label-threshold 0.35"
    plain = next(o for o in done["ours"] if o["candidate"] is words)
    assert plain["argmax"] is None and "--label-threshold" not in plain["commands"][-1]
    page = "\n".join(results.dataset_section(done))
    assert "| u_jm_fw_ps | 0.8000 | 0.8100 | 0.8050 | t = 0.35 |" in page and "marginal ≥ 0.35" in page
    stream = results.Entry("toy", "prequential", (0, 0), config_from="toy-split")
    (work / "toy-prequential.peers.json").write_text("[]", encoding="utf-8")
    (work / "toy-prequential-u_jm_fw_ps.label-threshold.eval.json").write_text(json.dumps(thresholded),
                                                                                encoding="utf-8")
    replay = results.run_entry(stream, results.Runner(work, resume=True), None, {"toy-split": done})
    assert replay["ours"][0]["commands"][0].endswith("--label-threshold 0.35")


def test_the_committed_page_has_every_section_the_docs_cite_by_name():
    # README, EVALUATION.md and bench/mail_stream.py send readers to RESULTS.md's "Whole emails": a kept section
    # that a regeneration must carry over (one run wrote the page without it and nothing noticed).
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    page = (root / "docs" / "RESULTS.md").read_text(encoding="utf-8")
    cited = set()
    for doc in [root / "README.md", *sorted((root / "docs").glob("*.md")), root / "bench" / "mail_stream.py"]:
        text = doc.read_text(encoding="utf-8")
        cited |= {name for name in ("Whole emails",) if f'RESULTS.md, "{name}"' in text or f'RESULTS.md ("{name}")' in text
                  or f'RESULTS.md "{name}"' in text}
    assert cited, "the docs no longer cite a RESULTS.md section by name: update this test"
    headings = [line for line in page.splitlines() if line.startswith("## ")]
    for name in cited:
        assert any(h.startswith(f"## {name}") for h in headings), f"RESULTS.md lost its cited section {name!r}"
    assert results.kept_sections(page), "the kept section's markers are gone: a regeneration would drop it"


def _pool_reports(work, key: str, dev: float, score: float, measure: str) -> None:
    fit = {"search": "ensemble", "evaluations": 12, "search_seconds": 7.0, "dev_default": dev - 0.01, "dev_tuned": dev,
           "chosen": {"meta": False, "bias": False, "reg": 10.0, "cv": dev}, "tuned_config": {"model": "ensemble"}}
    (work / f"{key}-ensemble.tune.json").write_text(json.dumps(fit), encoding="utf-8")
    (work / f"{key}-ensemble.eval.json").write_text(json.dumps({**eval_report(score), measure: score}),
                                                    encoding="utf-8")


def test_a_pool_chosen_on_the_split_is_replayed_by_the_entry_that_takes_its_configuration(tmp_path, monkeypatch):
    """reuters21578's prequential entry replays the split's chosen configuration; when that is a pool, its written
    file is evaluated as is (``sgm eval --config``), never fitted again on the stream."""
    monkeypatch.setattr(results, "tdm_available", lambda: False)
    for key in ("toy-split", "toy-prequential"):
        (tmp_path / f"{key}.peers.json").write_text("[]", encoding="utf-8")
    write_reports(tmp_path, "toy-split-u_jm_ps", "4x4", 0.90)
    _pool_reports(tmp_path, "toy-split", 0.95, 0.93, "accuracy")
    (tmp_path / "toy-prequential-ensemble.eval.json").write_text(json.dumps(eval_report(0.91)), encoding="utf-8")
    pool = results.Candidate("ensemble", bases=("u_jm_ps",))
    split = resumed(tmp_path, results.Entry("toy", "split", (4, 4), candidates=(results.Candidate("u_jm_ps"), pool)))
    assert split["best"]["candidate"] is pool
    stream = results.run_entry(results.Entry("toy", "prequential", (0, 0), config_from="toy-split"),
                               results.Runner(tmp_path, resume=True), None, {"toy-split": split})
    assert [o["candidate"] for o in stream["ours"]] == [pool]
    assert stream["best"]["commands"] == [
        "sgm eval --data toy --mode prequential --config $WORK/toy-split-ensemble.config.json"]
    assert stream["best"]["tuned"]["accuracy"] == 0.91
    results.dataset_section(stream)  # its section renders without a fit report


def test_the_pools_mean_rer_is_over_the_topic_sets_as_in_the_topic_table(tmp_path, monkeypatch):
    """reuters21578's pool gets its row (Micro-F1), but the mean stays that of r8, r52 and webkb."""
    monkeypatch.setattr(results, "tdm_available", lambda: False)
    done = []
    for data, measure, peer, ours in (("r8", "accuracy", 0.96, 0.97), ("reuters21578", "micro_f1", 0.80, 0.90)):
        peers = [{"peer": name, measure: peer, "dev": 0.9, "macro_f1": peer, "log_loss": 0.3}
                 for name in ("linear_svc", "logistic_regression", "vw_oaa")]
        (tmp_path / f"{data}-split.peers.json").write_text(json.dumps(peers), encoding="utf-8")
        write_reports(tmp_path, f"{data}-split-u_jm_ps", "4x4", 0.90)
        _pool_reports(tmp_path, f"{data}-split", 0.95, ours, measure)
        if measure == "micro_f1":
            report = {**eval_report(0.9), "micro_f1": 0.85}
            (tmp_path / f"{data}-split-u_jm_ps.eval.json").write_text(json.dumps(report), encoding="utf-8")
        pool = results.Candidate("ensemble", bases=("u_jm_ps",))
        done.append(resumed(tmp_path, results.Entry(data, "split", (4, 4),
                                                    candidates=(results.Candidate("u_jm_ps"), pool))))
    lines = results.ensemble_summary(done)
    assert next(line for line in lines if line.startswith("| reuters21578 |")).endswith("| 0.8000 | +50.0% |")
    # r8 alone: 1 - 0.03 / 0.04 = +25% against each peer; with reuters21578's +50% it would read +37.5%
    assert "| **mean r8, r52, webkb** | | | | | | | | | **+25.0%** | | **+25.0%** | | **+25.0%** |" in lines
