"""Document -> term counts: the batch and one-document forms agree and refuse bad counts."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from model.text import Tokenizer, batch_term_counts, term_counts

TOKENIZER = Tokenizer()
documents = st.one_of(
    st.text(max_size=60),
    st.dictionaries(st.text(min_size=1, max_size=5), st.sampled_from([0, 1, 2.5, 3, 0.25]), max_size=6),
)


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
