"""Document -> term counts: the batch and one-document forms agree and refuse bad counts."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from model.text import Tokenizer, batch_term_counts, term_counts

TOKENIZER = Tokenizer()
documents = st.one_of(
    st.text(max_size=60),
    st.dictionaries(st.text(min_size=1, max_size=5), st.sampled_from([0, 1, 2.5, 3, 0.25]), max_size=6),
)


@settings(deadline=None)  # the first call compiles the count check
@given(st.lists(documents, max_size=6))
def test_batch_equals_one_by_one(docs):
    terms, counts, lengths = batch_term_counts(docs, TOKENIZER)
    at = 0
    for doc, length in zip(docs, lengths):
        one_terms, one_counts = term_counts(doc, TOKENIZER)
        assert terms[at : at + length] == one_terms
        np.testing.assert_array_equal(counts[at : at + length], one_counts)
        at += length
    assert at == len(terms) == len(counts)


@pytest.mark.parametrize("bad", [{"a": -1}, {"a": math.nan}, {"a": math.inf}, {"a": "x"}, {3: 1}])
def test_bad_counts_are_refused(bad):
    with pytest.raises((ValueError, TypeError)):
        batch_term_counts([{"ok": 1}, bad], TOKENIZER)
    with pytest.raises((ValueError, TypeError)):
        term_counts(bad, TOKENIZER)


def test_zero_counts_are_dropped():
    assert batch_term_counts([{"a": 0, "b": 2}, {"c": 0}], TOKENIZER) == (["b"], pytest.approx(np.array([2.0])), [1, 0])


ascii_heavy = st.text(alphabet=st.sampled_from(list("abcXYZ019 '.,!-_\t\n\x1c\x1f\x0b") + ["é", "’", "“", "İ"]),
                      max_size=80)


@given(ascii_heavy, st.integers(1, 3), st.integers(1, 6))
def test_ascii_fast_path_tokenizes_like_the_general_path(text, ngrams, max_len):
    from model.text import _SEPARATORS

    tokenizer = Tokenizer(ngrams=ngrams, max_token_length=max_len)
    words = [w for w in text.lower().translate(_SEPARATORS).split() if len(w) <= max_len]
    expected = list(words)
    for n in range(2, ngrams + 1):
        expected += [" ".join(words[i : i + n]) for i in range(len(words) - n + 1)]
    assert tokenizer.tokens(text) == expected


@given(st.lists(ascii_heavy, max_size=5), st.lists(st.sampled_from(["a", "b", "abc", "x", "019", "é", "a b"]),
                                                    max_size=5, unique=True))
def test_known_terms_of_texts_match_counting_then_lookup(texts, vocabulary_terms):
    from model.text import batch_known_terms

    tokenizer = Tokenizer(ngrams=2)
    vocabulary = {t: 3 * i + 1 for i, t in enumerate(vocabulary_terms)}  # sparse ids, as after removals
    owner, ids, counts = batch_known_terms(texts, tokenizer, vocabulary)
    expected = []
    for d, text in enumerate(texts):
        counted = tokenizer(text)
        expected += sorted((d, vocabulary[t], float(c)) for t, c in counted.items() if t in vocabulary)
    assert list(zip(owner.tolist(), ids.tolist(), counts.tolist())) == expected


@settings(deadline=None)  # the first call compiles the kernels
@given(st.lists(ascii_heavy, min_size=1, max_size=4))
def test_scoring_text_equals_scoring_its_counts(texts):
    from model import MNB

    model = MNB("uc_pd_jm_dp", beta=0.3, mu=5.0, delta=0.5)
    model.learn_many(["a b abc x", "019 b b é", "x x a’b “quoted” word"], ["p", "q", "r"])
    _, from_text = model.predict_log_proba_many(texts)
    _, from_counts = model.predict_log_proba_many([dict(TOKENIZER(t)) for t in texts])
    np.testing.assert_allclose(from_text, from_counts, rtol=0, atol=1e-12)
