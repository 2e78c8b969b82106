"""Batch learning's fast paths: all-or-nothing interning and the no-decay clock."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sgm.model import MNB
from sgm.model.decay import DecayClock
from sgm.model.interner import Interner


def _docs(n: int, offset: int = 0) -> list[dict[str, int]]:
    return [{f"w{(i + offset) % 7}": 1 + i % 3, f"v{i + offset}": 2, "common": 1} for i in range(n)]


def test_a_non_string_term_leaves_the_model_as_if_never_seen():
    """A new term that is not a string fails the whole batch and changes nothing, term ids included."""
    def prefix() -> MNB:
        model = MNB("uc_pd_jm_dp")
        model.learn_many(_docs(12), [f"l{i % 3}" for i in range(12)], ids=[f"d{i}" for i in range(12)])
        for i in (2, 5, 7):  # their unique terms leave: freed ids that new terms reuse
            model.forget(f"d{i}")
        return model

    attempted, clean = prefix(), prefix()
    attempted.state.terms.changes = []  # a follower reads the change log: it must not see the failed terms
    clean.state.terms.changes = []
    before = attempted.checksum()
    bad = [{"fresh1": 1, "common": 2}, {"fresh2": 1, 3: 1}]
    with pytest.raises(TypeError, match="terms must be strings"):
        attempted.learn_many(bad, ["l0", "l1"], ids=["x1", "x2"])
    with pytest.raises(TypeError, match="terms must be strings"):
        attempted.learn_one({"fresh3": 1, ("t",): 1}, "l0", id="x3")
    assert attempted.checksum() == before
    for model in (attempted, clean):
        model.learn_many(_docs(6, offset=40), ["l1"] * 6, ids=[f"e{i}" for i in range(6)])
    assert attempted.checksum() == clean.checksum()
    assert attempted.state.terms.names == clean.state.terms.names
    assert attempted.state.terms.free == clean.state.terms.free
    assert attempted.state.terms.changes == clean.state.terms.changes


def test_interner_lookups_outside_a_batch_do_not_add():
    names = Interner()
    names.ids_of(["a", "b"])
    with pytest.raises(KeyError):
        names.ids["c"]
    assert names.names == ["a", "b"] and names.ids_of(["b", "c", "b"]).tolist() == [1, 2, 1]


stamps = st.lists(st.one_of(st.none(), st.floats(-1e6, 1e6)), max_size=12)


@settings(deadline=None)
@given(stamps, stamps)
def test_observe_all_equals_observing_one_by_one(earlier, batch):
    one_by_one, at_once = DecayClock(), DecayClock()
    for ts in earlier:
        one_by_one.observe(ts)
        at_once.observe(ts)
    expected = []
    for ts in batch:
        assert one_by_one.observe(ts) == 0
        expected.append(one_by_one.event_time(ts))
    assert at_once.observe_all(batch) == expected
    assert (at_once.now, at_once.origin) == (one_by_one.now, one_by_one.origin)


def test_a_non_string_term_is_refused_even_when_the_id_is_already_learned():
    model = MNB("uc_pd_jm_dp")
    model.learn_many([{"a": 1}], ["l0"], ids=["d1"])
    before = model.checksum()
    with pytest.raises(TypeError, match="terms must be strings"):
        model.learn_many([{"a": 1, 7: 1}], ["l0"], ids=["d1"])
    with pytest.raises(TypeError, match="terms must be strings"):
        model.learn_one({"a": 1, 7: 1}, "l0", id="d1")
    assert model.checksum() == before


WORDS = ["spam", "Eggs", "ham", "a", "bb", "don't", "x-y", "Zz", "ünï", "café", "q"]
texts = st.lists(st.sampled_from(WORDS + [" ", ",", ". ", "\t", "!!"]), max_size=14).map("".join)


@settings(deadline=None, max_examples=80)  # the first call compiles the kernels
@given(st.lists(st.tuples(texts, st.sampled_from(["a", "b", "c"]), st.sampled_from(["d1", "d2", "d3", "d4", "d5"])),
                min_size=1, max_size=10),
       st.lists(texts, max_size=3), st.integers(1, 3), st.integers(1, 5), st.booleans(),
       st.sampled_from([None, 5.0]))
def test_learning_text_in_compiled_code_equals_learning_its_counts(batch, earlier, ngrams, max_len, lowercase,
                                                                   half_life):
    """Texts with ids go through the compiled tokenizer and lookup (new terms included, non-ASCII text in
    Python): the model equals one that learned ``Counter(tokenizer.tokens(text))`` of the same texts."""
    from collections import Counter

    from sgm.model.text import Tokenizer

    tokenizer = Tokenizer(ngrams=ngrams, max_token_length=max_len, lowercase=lowercase)
    from_text = MNB("uc_pd_jm_dp", tokenizer=tokenizer, half_life=half_life)
    from_counts = MNB("uc_pd_jm_dp", tokenizer=tokenizer, half_life=half_life)
    counts = [dict(Counter(tokenizer.tokens(text))) for text, _, _ in batch]
    for model, docs in ((from_text, [t for t, _, _ in batch]), (from_counts, counts)):
        model.learn_many(earlier, ["a"] * len(earlier), ids=[f"e{i}" for i in range(len(earlier))])
        model.forget("e0")  # terms leave, ids are freed for reuse
        model.learn_many(docs, [label for _, label, _ in batch], ts=[float(i) for i in range(len(batch))],
                         ids=[doc_id for _, _, doc_id in batch], sequential=True)
    assert from_text.checksum() == from_counts.checksum()
    probe = [t for t, _, _ in batch[:3]]
    assert from_text.predict_proba_many(probe) == from_counts.predict_proba_many(probe)


def test_compiled_learning_grows_its_table_of_new_terms():
    """Thousands of new words and bigrams in one batch (the unknown-token table and its text grow many times)."""
    from collections import Counter

    from sgm.model.text import Tokenizer

    tokenizer = Tokenizer(ngrams=2)
    docs = [" ".join(f"w{(i * 7 + j * 13) % 5000}x{'y' * (j % 9)}" for j in range(60)) + " café" * (i % 2)
            for i in range(200)]
    from_text, from_counts = MNB("uc_pd_jm_dp", tokenizer=tokenizer), MNB("uc_pd_jm_dp", tokenizer=tokenizer)
    labels, ids = [f"l{i % 4}" for i in range(200)], [f"d{i}" for i in range(200)]
    from_text.learn_many(docs, labels, ids=ids)
    from_counts.learn_many([dict(Counter(tokenizer.tokens(d))) for d in docs], labels, ids=ids)
    assert len(from_text.state.terms) > 20_000
    assert from_text.checksum() == from_counts.checksum()
