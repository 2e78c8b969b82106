"""A pool's per-document step made cheaper, exactly (issue #18, prequential cost).

* :meth:`sgm.model.ensemble.Ensemble.lengths` of a text just scored alone takes its word count from the
  compiled token pass a base remembers for the learn that follows
  (:meth:`sgm.model.lexicon.TermLexicon.remembered_token_count`) instead of tokenizing the text again in
  Python: the same whole number as ``len(Tokenizer().tokens(text))`` for any text (ASCII, Unicode,
  over-long tokens) and n-gram setting; bases which split words otherwise are not read; the pool's
  posteriors are bit for bit those of the Python count.
* :func:`sgm.model.ensemble.meta_features` and the floor of
  :meth:`~sgm.model.ensemble.Ensemble.base_log_posteriors` in fewer numpy calls: bit for bit the
  expressions they replace (kept below as references), NaN and infinities included.
"""
from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from sgm.model import MNB, TDM, Ensemble
from sgm.model.ensemble import meta_features
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


def meta_features_as_before(log_posts, lengths, meta):
    """The column-list form :func:`meta_features` replaced (main e9552dd)."""
    n_bases, n_docs, n_classes = log_posts.shape
    columns = [np.ones(n_docs)]
    if meta:
        columns.append(np.log1p(lengths) / 5.0)
        norm = math.log(n_classes) if n_classes > 1 else 1.0
        for lp in log_posts:
            p = np.exp(lp)
            columns.append(p.max(axis=1))
            columns.append(-(p * lp).sum(axis=1) / norm)
        top = log_posts.argmax(axis=2)
        columns.append((top[:, None, :] == top[None, :, :]).mean(axis=(0, 1)))
    return np.stack(columns, axis=1)


log_values = st.floats(-60.0, 0.0) | st.sampled_from([-50.0, -0.0, 0.0, -1e-300, -745.2])


@st.composite
def floored_log_posteriors(draw):
    shape = (draw(st.integers(1, 4)), draw(st.integers(1, 6)), draw(st.integers(1, 12)))
    return np.maximum(draw(hnp.arrays(np.float64, shape, elements=log_values)), -50.0)


@given(floored_log_posteriors(), st.booleans(), st.data())
def test_meta_features_are_the_column_list_bit_for_bit(log_posts, meta, data):
    lengths = data.draw(hnp.arrays(np.float64, log_posts.shape[1], elements=st.integers(0, 10**6).map(float)))
    got, want = meta_features(log_posts, lengths, meta), meta_features_as_before(log_posts, lengths, meta)
    assert got.shape == want.shape and got.tobytes() == want.tobytes()


@given(hnp.arrays(np.float64, st.tuples(st.integers(1, 3), st.integers(1, 4), st.integers(1, 5)),
                  elements=st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(
                      [np.nan, np.inf, -np.inf, -0.0, -50.0, -49.999999999999996])))
def test_floor_is_nan_to_num_then_maximum_bit_for_bit(values):
    """The pool floors each base's log posteriors: NaN, -inf and values below the floor become it (+inf, not
    reachable from a normalized posterior, the largest float as before)."""
    class Fixed:
        multilabel, label_threshold = "per_label", None

        def __init__(self, lp):
            self.lp = lp

        def predict_log_proba_many(self, docs):
            return ["c%d" % i for i in range(self.lp.shape[1])], self.lp

    pooled = Ensemble.__new__(Ensemble)
    pooled.bases, pooled.floor = [Fixed(v) for v in values], -50.0
    _, got = pooled.base_log_posteriors([None] * values.shape[1])
    want = np.maximum(np.nan_to_num(values, nan=-50.0, neginf=-50.0), -50.0)
    assert got.tobytes() == want.tobytes()


def test_a_tf_idf_base_scores_through_its_lexicon_and_its_pass_gives_the_length():
    """A TF-IDF base reads text through its lexicon (which counts each text's distinct terms for TF-IDF), so
    it remembers its pass as a raw-count base does, and the length meta-feature reads the first base's."""
    trained = Ensemble([MNB("uc_pd_dp_tXiX_ps"), MNB("uc_pd_jm_dp", beta=0.5)], np.full((2, 7), 0.5), meta=True)
    for i, text in enumerate(["cheap pills now", "lunch at noon", "cheap lunch"]):
        trained.learn_one(text, ["spam" if i % 2 == 0 else "ham"], id=str(i))
    served = Ensemble.from_bytes(trained.to_bytes())
    text = "cheap pills today"
    served.predict_log_proba_many([text])
    assert served._word_counters() == served.bases
    for base in served.bases:
        assert base.term_lexicon().remembered_token_count(text, Tokenizer()) == 3
    assert served.lengths([text]).tolist() == [3.0]  # read from base 0's pass
