"""Character n-grams as a tokenizer's feature set (issue 19: a char-only ensemble base).

The compiled word pass of ``model.lexicon`` does not know them, so every text path of the model
must take the Python tokenizer for such a base: learning and scoring a text must equal learning
and scoring its char-gram counts given as a mapping.
"""
from __future__ import annotations

import numpy as np
import pytest

from sgm.consumers.commands.eval import char_lengths
from sgm.consumers.service.training import too_many_text_terms
from sgm.model import MNB, TDM, Ensemble, build_model, model_config
from sgm.model.text import Tokenizer, char_ngrams_of
from sgm.model.spec import SpecError
from sgm.stream.records import Limits

TEXTS = [("Wheat exports rose; grain prices fell", "grain"), ("Crude oil output cut by OPEC", "crude"),
         ("Oil prices rose after the OPEC meeting", "crude"), ("Grain and wheat harvest up", "grain"),
         ("Shares of the bank rose", "earn"), ("Bank profit up, dividend raised", "earn")]
QUERIES = ["wheat prices", "OPEC crude", "bank dividends rose", "unseen zzz words"]


def test_char_ngrams_are_marked_ngrams_of_each_word_and_never_a_word():
    tokenizer = Tokenizer(char_ngrams=(3, 5))
    counts = tokenizer("Oil, oil! a")
    assert counts == {"#<oi": 2, "#oil": 2, "#il>": 2, "#<oil": 2, "#oil>": 2, "#<oil>": 2, "#<a>": 1}
    assert not set(Tokenizer()("#<oi #oil")) & set(counts)  # '#' is punctuation: a word never holds it
    assert Tokenizer(char_ngrams=(3, 5), binary=True)("oil oil") == dict.fromkeys(char_ngrams_of(["oil"], 3, 5), 1)
    assert not tokenizer.compiled and Tokenizer().compiled


def test_char_ngrams_round_trip_and_are_validated():
    tokenizer = Tokenizer(char_ngrams=(2, 4), binary=True)
    assert Tokenizer.from_dict(tokenizer.to_dict()) == tokenizer
    assert "char_ngrams" not in Tokenizer().to_dict()  # configurations without them are unchanged
    for bad in ((0, 3), (4, 3), (3, 11)):
        with pytest.raises(ValueError, match="char_ngrams"):
            Tokenizer(char_ngrams=bad)
    with pytest.raises(ValueError, match="ngrams must be 1"):
        Tokenizer(ngrams=2, char_ngrams=(3, 5))
    with pytest.raises(ValueError, match="char_ngrams"):
        Tokenizer.from_dict({"char_ngrams": "3-5"})
    assert char_lengths("3-5") == [3, 5] and char_lengths("none") is None
    with pytest.raises(SpecError, match="--char-ngrams"):
        char_lengths("three")


@pytest.mark.parametrize("factory", [lambda tok: MNB("uc_pd_jm_dp", tokenizer=tok),
                                     lambda tok: MNB("uc_pd_jm_dp_fw_ps", tokenizer=tok),
                                     lambda tok: MNB("u_jm_tXiX", tokenizer=tok),
                                     lambda tok: TDM("tdm_uc_jm_dp_kpd_kdp", tokenizer=tok)])
def test_texts_are_read_as_their_char_ngram_counts_on_every_path(factory):
    tokenizer = Tokenizer(char_ngrams=(3, 5))
    from_text, from_counts = factory(tokenizer), factory(Tokenizer())
    # one by one with ids (the service's path), then a batch with ids, then without ids
    for i, (text, label) in enumerate(TEXTS[:2]):
        from_text.learn_one(text, label, id=f"d{i}")
        from_counts.learn_one(tokenizer(text), label, id=f"d{i}")
    from_text.learn_many([t for t, _ in TEXTS[2:4]], [lab for _, lab in TEXTS[2:4]], ids=["d2", "d3"])
    from_counts.learn_many([tokenizer(t) for t, _ in TEXTS[2:4]], [lab for _, lab in TEXTS[2:4]], ids=["d2", "d3"])
    for text, label in TEXTS[4:]:
        from_text.learn_one(text, label)
        from_counts.learn_one(tokenizer(text), label)
    classes_t, text_lp = from_text.predict_log_proba_many(QUERIES)
    classes_c, count_lp = from_counts.predict_log_proba_many([tokenizer(q) for q in QUERIES])
    assert classes_t == classes_c
    np.testing.assert_allclose(text_lp, count_lp, rtol=0, atol=1e-12)
    assert from_text.forget("d0") and from_counts.forget("d0")
    np.testing.assert_allclose(from_text.predict_log_proba_many(QUERIES)[1],
                               from_counts.predict_log_proba_many([tokenizer(q) for q in QUERIES])[1], rtol=0, atol=1e-12)


def test_a_char_base_in_an_ensemble_and_its_configuration():
    words = MNB("uc_pd_jm_dp", tokenizer=Tokenizer(ngrams=2))
    chars = MNB("uc_pd_jm_dp", tokenizer=Tokenizer(char_ngrams=(3, 5)))
    pool = Ensemble([words, chars], [0.7, 0.3])
    for i, (text, label) in enumerate(TEXTS):
        pool.learn_one(text, label, id=f"d{i}")
    assert pool.lengths(["wheat prices rose"]).tolist() == [3.0]  # words, not char n-grams
    rebuilt = build_model(model_config(pool))
    assert rebuilt.bases[1].tokenizer == Tokenizer(char_ngrams=(3, 5))


def test_the_service_text_term_cap_bounds_char_ngrams_too():
    tokenizer = Tokenizer(char_ngrams=(3, 5))
    text = " ".join(f"w{i:05d}" for i in range(280))  # 280 words of 6 chars: more char grams than characters
    words_bound = len(text) // 2 + 1  # what bounds a word tokenizer's terms: below the char grams here
    distinct = len(tokenizer(text))
    assert tokenizer.max_terms(len(text)) >= distinct > words_bound
    model = MNB("u_jm", tokenizer=tokenizer)
    assert too_many_text_terms(model, text, Limits(max_terms=words_bound)) == distinct
    assert too_many_text_terms(model, text, Limits(max_terms=distinct)) is None


@pytest.mark.parametrize("binary", [False, True])
def test_char_counts_per_distinct_word_equal_the_counted_token_list_in_order(binary):
    # counts() cuts each distinct word once (cached) and multiplies; tokens() lists every n-gram with repeats
    import collections

    tokenizer = Tokenizer(char_ngrams=(2, 4), binary=binary)
    for text in ["the cat and the hat", "Ünïcode wörds, wörds; and a x", "", "a a a", "x" * 60 + " yy"]:
        tokens = tokenizer.tokens(text)
        expected = dict.fromkeys(tokens, 1) if binary else dict(collections.Counter(tokens))
        got = tokenizer.counts(text)
        assert got == expected and list(got) == list(expected), text
