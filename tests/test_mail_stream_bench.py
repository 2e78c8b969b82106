"""bench/mail_stream.py: its measures on hand-made scores, its skip without data, and its protocol
on a tiny stream (test-then-train: the first document is never scored, every later one is)."""
from __future__ import annotations

import base64
import gzip
import json
import math

import pytest

from bench import mail_stream
from bench.mail_stream import Doc, Scored, measures, prequential


def test_measures_on_known_scores():
    # 4 ham, 4 spam; one ham scored above two spams, one spam below 0.5
    y = [False, False, False, False, True, True, True, True]
    p = [0.01, 0.02, 0.03, 0.7, 0.6, 0.65, 0.9, 0.4]
    odds = [math.log(v / (1 - v)) for v in p]
    result = measures(Scored(y, p, odds, 0.0))
    assert result["docs"] == 8
    assert result["accuracy"] == pytest.approx(6 / 8)
    assert result["fp_rate_pct"] == pytest.approx(25.0) and result["fn_rate_pct"] == pytest.approx(25.0)
    # AUC: of 16 (spam, ham) pairs, the ham at 0.7 beats the spams at 0.6, 0.65, 0.4 -> 13/16
    assert result["one_minus_roca_pct"] == pytest.approx(100 * 3 / 16)
    # no ham above the threshold -> only the spam at 0.9 is caught
    assert result["fn_at_fp_0.1pct"] == pytest.approx(75.0) and result["fn_at_fp_1pct"] == pytest.approx(75.0)


def test_log_odds_break_the_ties_that_saturated_probabilities_make():
    y = [False, True, True]
    p = [1.0, 1.0, 1.0]  # all saturated
    result = measures(Scored(y, p, [40.0, 50.0, 60.0], 0.0))
    assert result["one_minus_roca_pct"] == pytest.approx(0.0)
    assert result["one_minus_roca_p"] == pytest.approx(50.0)  # ties count one half


def test_skips_cleanly_without_data(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SGM_DATA_DIR", str(tmp_path))
    assert mail_stream.main([]) == 0
    assert "skipped" in capsys.readouterr().out


def test_prequential_scores_every_document_but_the_first(tmp_path, monkeypatch):
    messages = [(b"Subject: cheap pills\n\nbuy now cheap", "spam"), (b"Subject: lunch\n\nnoon at the cafe", "ham"),
                (b"Subject: pills cheap\n\ncheap cheap", "spam"), (b"Subject: lunch again\n\ncafe at noon", "ham")]
    docs = [Doc(f"m{i}", (label,), float(i), base64.b64encode(raw).decode()) for i, (raw, label) in enumerate(messages)]
    documents = mail_stream.mail_documents(docs, mail_stream.MailOptions())
    scored = prequential({"model": "uc_jm_dp_ps", "params": {}}, documents, docs)
    assert scored.is_spam == [False, True, False]
    assert scored.log_odds[1] > 0 > scored.log_odds[2]  # learned from two messages, it ranks the next two right
    # and the files the bench reads are found through SGM_DATA_DIR
    for name, field in ((mail_stream.RAW_FILE, "raw_b64"), (mail_stream.TEXT_FILE, "text")):
        with gzip.open(tmp_path / name, "wt", encoding="utf-8") as handle:
            for doc, (raw, _label) in zip(docs, messages):
                value = doc.payload if field == "raw_b64" else raw.decode()
                handle.write(json.dumps({"id": doc.id, field: value, "labels": list(doc.labels), "ts": doc.ts}) + "\n")
    monkeypatch.setenv("SGM_DATA_DIR", str(tmp_path))
    loaded = mail_stream.load_stream(mail_stream.data_folder() / mail_stream.RAW_FILE, "raw_b64")
    assert [d.id for d in loaded] == [d.id for d in docs]


def odds(p: float) -> float:
    return math.log(p / (1 - p))


def test_decision_grid_prefers_the_cheapest_rule_and_smaller_guards():
    # ham at 0.6 early (one spam learned, no ham yet), later a spam at 0.8 and a ham at 0.3
    is_spam, log_odds = [False, True, False], [odds(0.6), odds(0.8), odds(0.3)]
    learned = [(1, 0), (1, 1), (2, 1)]
    ratio = [math.nan, 0.0, math.log(2.0)]  # the class prior's log ratio (unknown while one class is learned)
    best = mail_stream.choose_decision(is_spam, log_odds, ratio, 2.0, learned, fp_cost=9)[0]
    cost, rule, fp, fn, waiting = best
    assert (cost, fp, fn) == (0, 0, 0) and rule.min_ham == 0 and rule.min_spam == 0  # a threshold in (0.6, 0.8]
    assert 0.6 < rule.threshold <= 0.8 and waiting == 0
    assert rule.prior_weight is None  # the model's own posterior when it does as well
    # when the threshold cannot separate them, a guard can: the early ham is scored before any ham is learned
    best = mail_stream.choose_decision([False, True], [odds(0.9), odds(0.8)], [math.nan, 0.0], 2.0,
                                       [(1, 0), (1, 1)], fp_cost=9)[0]
    assert best[0] == 0 and best[1].min_ham == 1


def test_decision_grid_reweights_the_prior_when_the_balance_moved():
    # a ham at log-odds 3 scored when spam was 9 to 1, a spam at 2 when it was 1 to 9: on the model's
    # posterior (theta 2) no threshold separates them; counting the prior less (w <= 1.7) does
    ratio = [math.log(9.0), math.log(1 / 9)]
    best = mail_stream.choose_decision([False, True], [3.0, 2.0], ratio, 2.0, [(9, 1), (1, 9)], fp_cost=9)[0]
    cost, rule, fp, fn, _ = best
    assert (cost, fp, fn) == (0, 0, 0) and rule.prior_weight == 1.7 and (rule.min_spam, rule.min_ham) == (0, 0)
    said = mail_stream.decision_posteriors([3.0, 2.0], ratio, 2.0, rule.prior_weight) >= rule.threshold
    assert said.tolist() == [False, True]
    own = [r for r in mail_stream.choose_decision([False, True], [3.0, 2.0], ratio, 2.0, [(9, 1), (1, 9)], 9)
           if r[1].prior_weight is None and r[1].min_spam == r[1].min_ham == 0]
    assert own[0][0] == 1  # the model's posterior without guards: at best the spam is missed (a guard would hold
    # back the ham, scored after one ham was learned; at equal cost the grid prefers no guard)


def test_vw_names_are_encoded_one_to_one():
    terms = {"from.dom:a b": 1.0, "from.dom:a_b": 2.0, "x|y": 3.0, "50%": 4.0, "50%25": 5.0}
    safe = mail_stream.vw_safe(terms)
    assert len(safe) == len(terms) and not any(c in name for name in safe for c in " :|")
