"""The online peers rank spam by unsaturated log-odds, as ours does (docs/EVALUATION.md, "Two-label data"):
River by its joint log-likelihoods, VW by its raw margin; a probability of exactly 1.0 would tie."""
from __future__ import annotations

import math

import pytest

from bench import peers
from sgm.consumers.evaluation.harness import MAX_LOG_ODDS, Outcomes

TARGETS = peers.Targets([("ham",), ("spam",)], powerset=False)
SPAM = {"cheap": 1, "pills": 1, "buy": 1, "now": 1}
HAM = {"meeting": 1, "monday": 1, "agenda": 1, "notes": 1}


def long_spam(repeat: int) -> dict[str, float]:
    return {term: count * repeat for term, count in SPAM.items()}


def trained(name: str, setting: dict) -> peers.OnlinePeer:
    peer = peers.OnlinePeer(name, setting, TARGETS, "spam")
    for _ in range(20):
        peer.learn(SPAM, ("spam",))
        peer.learn(HAM, ("ham",))
    return peer


@pytest.mark.parametrize("name, setting", [("river_mnb", {"alpha": 1.0}), ("vw_logistic_bigrams", {"l": 0.5})])
def test_confident_spams_keep_their_order(name, setting):
    if name.startswith("vw") and not peers.vw_available():
        pytest.skip("vowpalwabbit does not import")  # the optional '.[vw]' extra
    peer = trained(name, setting)
    outcomes = Outcomes()
    for repeat in (50, 100):  # long messages: the spam posterior rounds to 1.0
        peer.record(outcomes, long_spam(repeat), ("spam",), None)
    if name == "river_mnb":
        assert outcomes.p_positive == [1.0, 1.0]  # saturated: logit(p) would tie them
    odds = outcomes.positive_odds
    assert all(math.isfinite(o) and abs(o) < MAX_LOG_ODDS for o in odds)
    assert 0 < odds[0] < odds[1]
    # the probability the accuracy and log loss read agrees with the log-odds
    p = 1 / (1 + math.exp(-min(odds[0], 700)))
    assert outcomes.p_positive[0] == pytest.approx(p, abs=1e-9)


def test_river_log_odds_are_the_logit_of_its_posterior_where_that_is_not_saturated():
    peer = trained("river_mnb", {"alpha": 1.0})
    probs, odds = peer.score({"cheap": 1, "pills": 1, "meeting": 1, "unseen": 2})
    assert 0 < probs["spam"] < 1
    assert odds == pytest.approx(math.log(probs["spam"]) - math.log(probs["ham"]), abs=1e-9)


@pytest.mark.parametrize("objective", ["accuracy", "roc_auc"])
def test_prequential_peers_choose_by_the_objective_and_keep_the_dev_measures(objective):
    import random

    from sgm.consumers.evaluation.harness import EvalSetup
    from sgm.stream.datasets import LabelledDoc

    rng = random.Random(3)
    words = {"spam": ["cheap", "pills", "buy", "now", "win"], "ham": ["meeting", "monday", "agenda", "notes", "win"]}
    docs = []
    for i in range(160):
        label = "spam" if rng.random() < 0.4 else "ham"
        own = words[label] if rng.random() < 0.85 else words["ham" if label == "spam" else "spam"]
        docs.append(LabelledDoc(f"d{i}", " ".join(rng.choices(own, k=6)), (label,), float(i), None))
    (row,) = peers.run_prequential(docs, EvalSetup(mode="prequential"), ["river_mnb"], objective=objective)
    assert row["objective"] == objective and row["setting"]["alpha"] in peers.NB_ALPHAS
    assert row["dev"] == row["dev_measures"][objective]  # the chosen setting's dev score, by that measure
    assert row["dev_measures"]["one_minus_roca_pct"] == pytest.approx(100 * (1 - row["dev_measures"]["roc_auc"]))
