"""bench/prequential_bits.py: hashes of a prequential run's posteriors (exactness of a change across checkouts)."""
from __future__ import annotations

from types import SimpleNamespace

from bench.prequential import Choice
from bench.prequential_bits import run_bits
from sgm.model import MNB, TDM, Ensemble, Tokenizer

STREAM = [SimpleNamespace(text=f"cheap pills {i} now" if i % 2 else f"lunch at noon {i} today", id=str(i), ts=None,
                          labels=["spam" if i % 2 else "ham"]) for i in range(12)]


def _pool() -> Choice:
    pool = Ensemble([MNB("uc_pd_jm_dp", tokenizer=Tokenizer(ngrams=2)),
                     TDM("tdm_uc_jm_dp_kpd_kdp", kdelta=0.5, tokenizer=Tokenizer(ngrams=2))],
                    [[0.6] * 7, [0.4] * 7], meta=True)
    return Choice("chosen", "ensemble", {}, 2, False, None, pool.model_config())


def test_the_same_run_gives_the_same_hashes_and_a_pool_hashes_each_base_and_its_tdm_postings():
    first, second = run_bits(STREAM, _pool()), run_bits(STREAM, _pool())
    assert first == second
    assert first["scored"] == len(STREAM) - 1 and len(first["bases"]) == 2 and "tdm_postings" in first


def test_a_different_run_gives_other_hashes():
    changed = [SimpleNamespace(**{**vars(doc), "text": doc.text + " pills pills"}) if doc.id == "5" else doc
               for doc in STREAM]
    base, other = run_bits(STREAM, _pool()), run_bits(changed, _pool())
    assert base["posteriors"] != other["posteriors"] and base["tdm_postings"] != other["tdm_postings"]
    single = run_bits(STREAM, Choice("best MNB", "uc_pd_jm_dp", {}, 1, False, None))
    assert single["bases"] == [] and "tdm_postings" not in single and single["posteriors"] != base["posteriors"]
