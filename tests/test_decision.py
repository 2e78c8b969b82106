"""The spam decision (threshold and learn guards), the spam preset, and where they show: the service's
configuration, the output schema, the evaluation report (FP/FN rates at the threshold, FN at fixed FP)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from sgm.consumers.config import ServiceConfig
from sgm.consumers.decision import SpamDecision
from sgm.consumers.evaluation import measures as metrics
from sgm.consumers.evaluation.harness import EvalSetup, evaluate_prequential, positive_log_odds
from sgm.consumers.presets import PRESETS, preset
from sgm.model import MNB, build_model
from sgm.model.mail import MAIL_CONFIG
from sgm.stream.datasets import LabelledDoc
from sgm.stream.records import InvalidRecord, OutputRecord, encode_output, encode_outputs, parse_output


def test_verdicts_follow_the_threshold_and_the_guards():
    rule = SpamDecision(threshold=0.8, min_spam=2, min_ham=3)
    assert rule.verdict(0.99, {"spam": 1, "ham": 5}) == "not_ready"
    assert rule.verdict(0.99, {"spam": 2, "ham": 2}) == "not_ready"
    assert rule.verdict(0.8, {"spam": 2, "ham": 3}) == "spam"  # at the threshold: spam
    assert rule.verdict(0.79, {"spam": 2, "ham": 3}) == "ham"
    assert rule.labels("spam", ["ham", "spam"]) == ["spam"]
    assert rule.labels("not_ready", ["spam", "ham"]) == ["ham"]  # no spam verdict: the best other label
    assert rule.labels("ham", ["spam"]) == []
    for bad in ({"threshold": 0.0}, {"threshold": 1.5}, {"min_ham": -1}, {"min_spam": 2.5}, {"label": ""}):
        with pytest.raises(ValueError):
            SpamDecision(**bad)
    assert SpamDecision.from_dict(rule.to_dict()) == rule
    with pytest.raises(ValueError):
        SpamDecision.from_dict({"treshold": 0.5})


def test_learned_counts_live_documents_per_label():
    model = MNB("u_jm")
    model.learn_many(["a", "b", "c", "d"], [["spam"], ["ham"], ["spam", "phish"], ["news"]], ids=list("abcd"))
    rule = SpamDecision()
    assert rule.learned_from(model) == {"spam": 2, "ham": 2}  # the spam+phish document is spam, once
    model.forget("a")
    assert rule.learned_from(model) == {"spam": 1, "ham": 2}
    powerset = MNB("u_jm", multilabel="powerset")
    powerset.learn_many(["a", "b", "c"], [["spam"], ["ham"], ["spam", "phish"]], ids=list("abc"))
    assert rule.learned_from(powerset) == {"spam": 2, "ham": 1}


def test_the_spam_preset_builds_and_documents_its_choice():
    spam = preset("spam")
    assert set(PRESETS) == {"spam"}
    model = build_model(spam.model_config())
    assert model.mail is not None and model.config()["mail"]["meta_weight"] == MAIL_CONFIG["mail"]["meta_weight"]
    # chosen on the dev stream: bench/mail_stream.py --mode decision
    assert spam.decision == SpamDecision("spam", 0.989, 0, 0, prior_weight=1.1)
    copy = spam.model_config()
    copy["params"]["beta"] = 0.1
    assert spam.model["params"]["beta"] == MAIL_CONFIG["params"]["beta"]  # callers get a copy


def test_prior_weight_gives_the_posterior_of_the_model_scoring_with_that_theta():
    """The decision's reweighted posterior of a theta = 2 model equals the posterior of the same model built
    with theta = the prior weight (the scoring kernel, not a formula of the test); a document without known
    terms is scored by the prior alone: theta times class_log_prior, normalized."""
    docs = ["cheap pills now", "winner prize cheap", "pills pills offer", "cheap offer now", "prize winner",
            "meeting agenda", "lunch notes agenda"]
    labels = [["spam"]] * 5 + [["ham"]] * 2
    queries = ["cheap agenda", "meeting pills prize", "lunch", "offer notes now now", "unknown words only"]
    scaled = MNB("uc_jm_dp_ps", theta=2.0, beta=0.5)
    scaled.learn_many(docs, labels, ids=[str(i) for i in range(len(docs))])
    names, log_prior = scaled.class_log_prior()
    assert scaled.prior_scale == 2.0 and np.exp(log_prior).sum() == pytest.approx(1.0)
    assert dict(zip(names, np.exp(log_prior).tolist())) == pytest.approx({"spam": 5 / 7, "ham": 2 / 7})
    classes, only_prior = scaled.predict_log_proba_many(["unknown words only"])
    expected = 2.0 * log_prior - np.logaddexp.reduce(2.0 * log_prior)
    assert classes == names and only_prior[0] == pytest.approx(expected, abs=1e-12)
    for weight in (0.0, 1.0, 1.1, 2.0):
        rule = SpamDecision(threshold=0.5, prior_weight=weight)
        reference = MNB("uc_jm_dp_ps", theta=weight, beta=0.5)
        reference.learn_many(docs, labels, ids=[str(i) for i in range(len(docs))])
        shift = rule.prior_shift(scaled)
        for query in queries:
            ranked = scaled.predict_topk(query, 2)
            got = rule.posterior([n for n, _ in ranked], [p for _, p in ranked], shift)
            assert got == pytest.approx(reference.predict_proba_one(query)["spam"], rel=1e-9, abs=1e-12)
    assert SpamDecision().prior_shift(scaled) is None


def test_prior_weight_settings_round_trip_and_show_in_outputs():
    rule = SpamDecision(threshold=0.9, prior_weight=1.0)
    assert SpamDecision.from_dict(rule.to_dict()) == rule and rule.to_dict()["prior_weight"] == 1.0
    assert "prior_weight" not in SpamDecision().to_dict() and "prior_weight" not in SpamDecision().output(0.5, {
        "spam": 1, "ham": 1})
    assert rule.output(0.95, {"spam": 1, "ham": 1})["prior_weight"] == 1.0
    for bad in (-0.5, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            SpamDecision(prior_weight=bad)
    assert rule.posterior(["spam", "ham"], [0.0, 1.0], {"spam": 3.0, "ham": 0.0}) == 0.0
    assert rule.posterior(["spam", "ham"], [1.0, 0.0], {"spam": -3.0, "ham": 0.0}) == 1.0
    assert ServiceConfig(preset="spam", spam_prior_weight=2.0).decision().prior_weight == 2.0
    assert ServiceConfig(spam_threshold=0.9).decision().prior_weight is None
    with pytest.raises(ValueError, match="prior_weight"):
        ServiceConfig(spam_prior_weight=-1.0)


def test_service_config_takes_the_preset_and_lets_flags_override_it(tmp_path):
    cfg = ServiceConfig(preset="spam")
    assert cfg.model_config()["mail"] == MAIL_CONFIG["mail"] and cfg.model_config()["model"] == "uc_jm_dp_ps"
    assert cfg.decision() == preset("spam").decision
    cfg = ServiceConfig(preset="spam", spam_threshold=0.9, min_ham=200, param={"beta": 0.5})
    assert cfg.decision() == SpamDecision("spam", 0.9, 0, 200, preset("spam").decision.prior_weight)
    assert cfg.model_config()["params"]["beta"] == 0.5 and cfg.model_config()["params"]["mu"] == 8635.77
    assert ServiceConfig(preset="spam", model="u_jm").model_config()["model"] == "u_jm"
    file = tmp_path / "mail.json"
    file.write_text(json.dumps({"model": "uc_jm_dp_ps", "params": {"beta": 0.7}, "mail": {"meta_weight": 1.0}}))
    from_file = ServiceConfig(preset="spam", config=str(file)).model_config()
    assert from_file["mail"] == {"meta_weight": 1.0} and from_file["params"] == {"beta": 0.7}
    assert ServiceConfig().decision() is None and "mail" not in ServiceConfig().model_config()
    assert ServiceConfig(min_spam=5).decision() == SpamDecision("spam", 0.5, 5, 0)
    with pytest.raises(ValueError):
        ServiceConfig(spam_threshold=2.0)
    with pytest.raises(ValueError):
        ServiceConfig(preset="ham")


def test_outputs_carry_the_decision_and_the_mail_flags():
    made = SpamDecision(threshold=0.9, min_ham=2).output(0.95, {"spam": 3, "ham": 1})
    assert made["verdict"] == "not_ready" and made["learned"] == {"spam": 3, "ham": 1}
    record = OutputRecord.from_scores("m1", [("spam", 0.95), ("ham", 0.05)], model={"kind": "mnb"}, latency_ms=1.0,
                                      labels=["ham"], decision=made, mail={"flags": ["bad_base64"]})
    value = encode_output(record)
    assert json.loads(value)["decision"]["min"] == {"spam": 0, "ham": 2}
    assert parse_output(value) == record
    plain = OutputRecord.from_scores("q", [("a", 1.0)], model={}, latency_ms=0.0, scored_at=1.0)
    assert b"decision" not in encode_output(plain) and b"mail" not in encode_output(plain)
    with pytest.raises(ValueError):
        encode_outputs(["x"], [["spam"]], np.array([[0.5]]), [["spam"]], model={}, scored_at=1.0, latency_ms=[0.0],
                       ts=[None], decisions=[{"p": 1.5}])
    with pytest.raises(InvalidRecord):
        parse_output(b'{"id":"q","labels":[],"top_k":[],"model":{},"scored_at":1,"latency_ms":0,"mail":[1]}')


def test_two_label_measures_on_known_outcomes():
    truth = [True, True, True, True, False, False, False, False]
    scores = [5.0, 4.0, 1.0, -2.0, 3.0, -1.0, -3.0, -4.0]
    assert metrics.error_rates(truth, [s > 0 for s in scores]) == (25.0, 25.0)
    assert metrics.fn_rate_at_fp_rate(truth, scores, 0.0) == 50.0  # above 3.0 only two of four spams
    assert metrics.fn_rate_at_fp_rate(truth, scores, 0.25) == 0.0 + 25.0  # above -1.0 three of four
    assert metrics.fn_rate_at_fp_rate(truth, scores, 1.0) == 0.0
    assert metrics.fn_rate_at_fp_rate([True], [1.0], 0.01) is None
    # log-odds keep apart what saturated posteriors tie
    log_post = np.array([[-1e-30, -80.0], [-1e-20, -50.0]])
    odds = positive_log_odds(log_post, 0)
    assert odds[0] > odds[1] and np.exp(log_post[0, 0]) == np.exp(log_post[1, 0]) == 1.0


def test_evaluation_reports_the_decision():
    words = {"spam": "cheap pills winner prize", "ham": "meeting agenda lunch notes"}
    labels = ["spam"] * 6 + ["ham", "spam", "ham", "ham", "spam", "ham", "spam", "ham"]
    stream = [LabelledDoc(str(i), f"{words[label]} w{i}", (label,), float(i), None) for i, label in enumerate(labels)]
    config = {"model": "uc_jm", "params": {"beta": 0.5}}
    plain = evaluate_prequential(config, stream)
    assert plain["decision"] is None and plain["fp_rate_pct"] is not None
    assert set(plain["fn_at_fp_pct"]) == {"0.1", "1"}
    guarded = evaluate_prequential(config, stream, EvalSetup(mode="prequential",
                                                             decision=SpamDecision(threshold=0.5, min_ham=3)))
    # until three hams are learned (documents 0..9: the hams at 6 and 8 only), nothing is called spam
    assert guarded["decision"]["not_ready"] == 9 and guarded["decision"]["min_ham"] == 3
    assert guarded["fn_rate_pct"] > plain["fn_rate_pct"]
    with pytest.raises(ValueError, match="junk"):
        evaluate_prequential(config, stream, EvalSetup(mode="prequential", decision=SpamDecision(label="junk")))
