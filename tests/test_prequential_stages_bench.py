"""bench/prequential_stages.py: the stage timers of a prequential run (issue #18, must-show 0's floor)."""
from __future__ import annotations

from types import SimpleNamespace

from bench.prequential import Choice
from bench.prequential_stages import TOKEN_PASS, timed_run
from sgm.model import MNB, Ensemble, Tokenizer
from sgm.model.lexicon import TermLexicon

STREAM = [SimpleNamespace(text=f"cheap pills {i} now" if i % 2 else f"lunch at noon {i} today", id=str(i), ts=None,
                          labels=["spam" if i % 2 else "ham"]) for i in range(12)]


def test_a_single_model_is_timed_by_score_learn_and_the_token_pass_inside_them():
    compiled = TermLexicon.__dict__["_compiled"]
    stages, total = timed_run(STREAM, Choice("chosen", "uc_pd_jm_dp", {}, 2, False, None))
    assert TermLexicon.__dict__["_compiled"] is compiled  # the timer is taken off again
    assert set(stages) == {"score", "learn", f"score: {TOKEN_PASS}", f"learn: {TOKEN_PASS}"}
    assert 0 < stages[f"score: {TOKEN_PASS}"] <= stages["score"] and stages["score"] + stages["learn"] <= total * 1.01


def test_a_pool_is_timed_per_base_and_its_own_work_is_what_its_bases_leave():
    pool = Ensemble([MNB("u_jm"), MNB("uc_pd_jm_dp", tokenizer=Tokenizer(ngrams=2))], [[0.6] * 7, [0.4] * 7], meta=True)
    stages, total = timed_run(STREAM, Choice("chosen", "ensemble", {}, 2, False, None, pool.model_config()))
    for j, spec in enumerate(["u_jm", "uc_pd_jm_dp"]):
        assert stages[f"base {j} mnb_{spec} score"] > 0 and f"base {j} mnb_{spec} learn" in stages
        assert stages[f"base {j} mnb_{spec} score: {TOKEN_PASS}"] > 0
    own = [k for k in stages if k.startswith("pool's own")]
    assert len(own) == 2 and sum(stages.values()) - sum(v for k, v in stages.items() if TOKEN_PASS in k) <= total * 1.01
