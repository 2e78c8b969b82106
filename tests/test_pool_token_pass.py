"""A pool's length meta-feature read from a base's remembered token pass (issue #18, prequential cost).

:meth:`sgm.model.ensemble.Ensemble.lengths` of a text just scored alone takes its word count from the
compiled token pass a base remembers for the learn that follows
(:meth:`sgm.model.lexicon.TermLexicon.remembered_token_count`) instead of tokenizing the text again in
Python. These tests check that it is the same whole number as ``len(Tokenizer().tokens(text))`` for any
text (ASCII, Unicode, over-long tokens) and n-gram setting, that bases which split words otherwise are not
read, and that the pool's posteriors are bit for bit those of the Python count.
"""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sgm.model import MNB, TDM, Ensemble
from sgm.model.text import Tokenizer, words_of_tokens
from tests.test_text import ascii_heavy, unicode_heavy

WORDS = Tokenizer()
texts = ascii_heavy | unicode_heavy | st.text(max_size=120)


@given(st.integers(0, 500), st.integers(1, 3))
def test_words_of_tokens_inverts_the_token_count(words, ngrams):
    tokens = sum(max(words - n + 1, 0) for n in range(1, ngrams + 1))
    assert words_of_tokens(tokens, ngrams) == words


def pool(tokenizers, meta=True):
    bases = [MNB("uc_pd_jm_dp", tokenizer=tokenizers[0], beta=0.5),
             TDM("tdm_uc_jm_dp_kdp_kpd", tokenizer=tokenizers[1], kdelta=0.5)]
    width = 3 + 2 * len(bases) if meta else 1
    weights = np.linspace(-0.7, 1.3, len(bases) * width).reshape(len(bases), width)
    return Ensemble(bases, weights, {"spam": 0.25}, meta=meta)


class PythonLengths(Ensemble):
    """The pool as it was: every text's length tokenized again in Python."""

    def _word_counters(self) -> list:
        return []


@settings(deadline=None, max_examples=60)  # the first call compiles the kernels
@given(st.lists(st.tuples(texts, st.sampled_from(["spam", "ham"])), min_size=2, max_size=10),
       st.sampled_from([(1, 1), (2, 2), (3, 1), (1, 3)]))
def test_remembered_count_is_the_python_word_count_and_the_pool_is_unchanged(stream, ngrams):
    """Prequential order (score alone, then learn) on texts of any kind: the length read from a base's pass
    equals the Python word count, and the pool's log posteriors are bit for bit those of the Python count."""
    tokenizers = [Tokenizer(ngrams=n) for n in ngrams]
    fast, slow = pool(tokenizers), pool(tokenizers)
    slow.__class__ = PythonLengths
    for i, (text, label) in enumerate(stream):
        if len(fast):
            got, want = fast.predict_log_proba_many([text]), slow.predict_log_proba_many([text])
            assert got[0] == want[0]
            assert got[1].tobytes() == want[1].tobytes()
            counted = [b.term_lexicon().remembered_token_count(text, b.tokenizer) for b in fast.bases]
            assert counted == [len(t.tokens(text)) for t in tokenizers]  # each base remembers its own pass
            assert fast.lengths([text]).tolist() == [len(WORDS.tokens(text))]
        fast.learn_one(text, [label], id=str(i))
        slow.learn_one(text, [label], id=str(i))


@settings(deadline=None, max_examples=30)
@given(texts)
def test_bases_that_split_words_otherwise_are_not_read(text):
    """Presence counts, kept case or another token length bound give other counts: the Python count is used."""
    others = [Tokenizer(binary=True), Tokenizer(lowercase=False), Tokenizer(max_token_length=3)]
    for tokenizer in others:
        e = pool([tokenizer, tokenizer])
        e.learn_one("warm up words", ["spam"], id="a")
        e.predict_log_proba_many([text])
        assert e.lengths([text]).tolist() == [len(WORDS.tokens(text))]
        assert e._word_counters() == []


def test_a_pass_is_remembered_only_for_that_text_object_and_vocabulary():
    lexicon_model = MNB("u_jm", tokenizer=Tokenizer(ngrams=2))
    lexicon_model.learn_one("cheap pills now", ["spam"], id="a")
    text = "cheap cheap pills today"
    lexicon = lexicon_model.term_lexicon()
    lexicon_model.predict_log_proba_many([text])
    assert lexicon.remembered_token_count(text, Tokenizer(ngrams=2)) == 7
    assert lexicon.remembered_token_count((text + " ")[:-1], Tokenizer(ngrams=2)) is None  # an equal, other object
    assert lexicon.remembered_token_count(text, Tokenizer()) is None  # another tokenizer
    lexicon_model.learn_one("other words", ["ham"], id="b")  # the vocabulary moved on
    assert lexicon.remembered_token_count(text, Tokenizer(ngrams=2)) is None
