"""Document -> term counts: the batch and one-document forms agree and refuse bad counts."""
from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sgm.model.text import Tokenizer, batch_term_counts, term_counts

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
    from sgm.model.text import _SEPARATORS

    tokenizer = Tokenizer(ngrams=ngrams, max_token_length=max_len)
    words = [w for w in text.lower().translate(_SEPARATORS).split() if len(w) <= max_len]
    expected = list(words)
    for n in range(2, ngrams + 1):
        expected += [" ".join(words[i : i + n]) for i in range(len(words) - n + 1)]
    assert tokenizer.tokens(text) == expected


@settings(deadline=None)  # the first call compiles the kernels
@given(st.lists(ascii_heavy, max_size=5), st.integers(1, 3), st.integers(1, 4), st.booleans(), st.data(),
       st.booleans())
@example(["a'b Ab,a\x1cb"], 2, 4, True, None, False)
@example(["a bb c"], 2, 1, True, None, False)
@example(["a a b a"], 2, 4, True, None, True)
def test_compiled_lexicon_matches_counting_then_lookup(texts, ngrams, max_len, lowercase, data, binary):
    """TermLexicon (compiled for ASCII text, Python otherwise) equals Counter(tokens) restricted to the
    vocabulary (each count 1 for presence features), also after terms are removed and ids reused."""
    from sgm.model.lexicon import TermLexicon
    from sgm.model.interner import Interner

    tokenizer = Tokenizer(ngrams=ngrams, max_token_length=max_len, lowercase=lowercase, binary=binary)
    longer = Tokenizer(ngrams=ngrams, lowercase=lowercase)  # its words may be too long for `tokenizer`
    tokens = sorted({t for text in texts for t in tokenizer.tokens(text) + longer.tokens(text)})
    draw = data.draw if data is not None else (lambda strategy: ["ab", "a b", "ab a", "a c", "bb"])  # examples
    known = draw(st.lists(st.sampled_from(tokens or ["none"]), unique=True))
    vocabulary = Interner()
    for term in ["filler", "é", "ab a", *known, "A", "zz z"]:  # non-token names and ids that are not 0, 1, 2...
        vocabulary.add(term)
    lexicon = TermLexicon(vocabulary)
    for step in range(3):
        owner, ids, counts = lexicon.known_terms(texts, tokenizer)
        expected = []
        for d, text in enumerate(texts):
            expected += [(d, vocabulary.ids[t], 1.0 if binary else float(c))
                         for t, c in Counter(tokenizer.tokens(text)).items() if t in vocabulary.ids]
        assert list(zip(owner.tolist(), ids.tolist(), counts.tolist())) == expected
        for t in (known[step::3] if known else []):  # the vocabulary changes: removals, reused ids, new terms
            vocabulary.remove(vocabulary.ids[t])
        for term in tokens[step::2][:3] + ["new"]:
            vocabulary.add(term)


def test_compiled_lexicon_grows_with_the_vocabulary():
    """Built on a tiny vocabulary, then thousands of terms arrive (and go) between lookups."""
    from sgm.model.lexicon import TermLexicon
    from sgm.model.interner import Interner

    vocabulary = Interner()
    vocabulary.add("w0")
    lexicon = TermLexicon(vocabulary)
    text = " ".join(f"w{i}" for i in range(0, 5000, 7))
    for size in (10, 3000, 5000):
        for i in range(size):
            vocabulary.add(f"w{i}")
        for i in range(0, size, 3):  # removals leave deleted slots and reusable ids
            if vocabulary.get(f"w{i}") is not None and i % 2:
                vocabulary.remove(vocabulary.get(f"w{i}"))
        _, terms, _ = lexicon.known_terms([text], Tokenizer())
        expected = [vocabulary.ids[w] for w in text.split() if w in vocabulary.ids]
        assert terms.tolist() == expected
        assert 2 * (lexicon.used + lexicon.deleted) <= len(lexicon.slot_term)


def test_compiled_lexicon_confirms_hash_matches_by_bytes():
    """A 64-bit hash collision must not make another term match: forced here by rewriting the table."""
    from sgm.model.lexicon import TermLexicon, _hash_bytes
    from sgm.model.interner import Interner

    vocabulary = Interner()
    vocabulary.add("a_b")
    lexicon = TermLexicon(vocabulary)
    for query, colliding in (("a b", b"a b"), ("a-b", b"a b"), ("axb", b"axb")):
        lexicon.slot_hash[:] = 0
        lexicon.slot_term[:] = -1
        target = _hash_bytes(colliding)
        slot = int(target & np.uint64(len(lexicon.slot_term) - 1))
        lexicon.slot_hash[slot], lexicon.slot_term[slot] = target, 0  # "a_b" filed under the query's hash
        owner, terms, counts = lexicon.known_terms([query], Tokenizer(ngrams=2))
        assert terms.tolist() == [], query


@settings(deadline=None)  # the first call compiles the kernels
@given(st.lists(ascii_heavy, min_size=1, max_size=4))
def test_scoring_text_equals_scoring_its_counts(texts):
    from sgm.model import MNB

    model = MNB("uc_pd_jm_dp", beta=0.3, mu=5.0, delta=0.5)
    model.learn_many(["a b abc x", "019 b b é", "x x a’b “quoted” word"], ["p", "q", "r"])
    _, from_text = model.predict_log_proba_many(texts)
    _, from_counts = model.predict_log_proba_many([dict(TOKENIZER(t)) for t in texts])
    np.testing.assert_allclose(from_text, from_counts, rtol=0, atol=1e-12)


def test_compiled_lexicon_rebuilds_after_a_long_unread_change_log():
    """A follower that does not look for a long time: the interner drops its log, the lexicon rebuilds."""
    from sgm.model.lexicon import TermLexicon
    from sgm.model.interner import Interner

    vocabulary = Interner()
    vocabulary.add("keep")
    lexicon = TermLexicon(vocabulary)
    for i in range(70_000):  # churn: each term added and removed
        vocabulary.remove(vocabulary.add(f"t{i}"))
    vocabulary.add("late")
    assert vocabulary.changes is None
    _, terms, _ = lexicon.known_terms(["keep late t5"], Tokenizer())
    assert terms.tolist() == [vocabulary.ids["keep"], vocabulary.ids["late"]]
    assert vocabulary.changes == []


def test_scoring_caches_are_counted():
    """The compiled vocabulary and posting weights show in cache_bytes (the service's model size metric)."""
    from sgm.model import MNB

    model = MNB("u_jm", beta=0.5)
    model.learn_many([f"w{i} w{i + 1} shared" for i in range(500)], ["a", "b"] * 250)
    before = model.cache_bytes()
    model.predict_log_proba_many(["w1 w2 shared", "w400"])
    assert model.cache_bytes() > before + 500 * 8  # at least a hash slot per term


@settings(deadline=None)  # the first call compiles the kernels
@given(st.lists(st.tuples(ascii_heavy, st.sampled_from("pq"), st.sampled_from(["score", "add", "drop", "none"])),
                min_size=1, max_size=8))
def test_scoring_then_learning_the_same_text_reuses_nothing_stale(steps):
    """Score a text, then learn that same object (its tokenization is reused), possibly with the vocabulary
    moved in between (another text learned, or the previous one unlearned, freeing term ids: nothing may be
    reused then): the model equals one that only learns."""
    from sgm.model import MNB

    spec = dict(spec="uc_pd_jm_dp", beta=0.3, mu=5.0, delta=0.5)
    scored, plain = MNB(**spec, tokenizer=Tokenizer(ngrams=2)), MNB(**spec, tokenizer=Tokenizer(ngrams=2))
    for i, (text, label, between) in enumerate(steps):
        if len(scored) and between != "none":
            scored.predict_proba_one(text)
        for model in (scored, plain):
            if between == "add":
                model.learn_one(f"{text} other{i} {text[::-1]}", "q", id=f"o{i}")
            elif between == "drop":
                model.unlearn_one(None, id=str(i - 1))
            model.learn_one(text, label, id=str(i))
    probe = [text for text, _, _ in steps] + ["a b c é x"]
    if len(plain):
        _, from_scored = scored.predict_log_proba_many(probe)
        _, from_plain = plain.predict_log_proba_many(probe)
        np.testing.assert_array_equal(from_scored, from_plain)
    assert scored.state.terms.ids == plain.state.terms.ids


unicode_heavy = st.text(alphabet=st.sampled_from(
    list("ab Z1'.-\t") + ["é", "ß", "İ", "Σ", "😀", "\ud800", "\x85", "\xa0", "\u2003", "\u3000", "\u2028", "’", "“",
                          "—", "…", "·", "¿", "ǅ", "\u0301", "\U0001d400"]), max_size=60)


@given(unicode_heavy | ascii_heavy, st.sampled_from(["", "\ud83d\ude00", "\udfff\ud800", "\u2019'"]))
def test_non_ascii_separators_replaced_as_the_translate_table_does(text, extra):
    """The byte-table route for text that is not all ASCII gives str.translate's result, lone and
    paired surrogates included."""
    from sgm.model.text import _SEPARATORS, _non_ascii_split_ready

    text = text + extra + "é"
    assert _non_ascii_split_ready(text) == text.translate(_SEPARATORS)


def test_non_ascii_separators_for_every_code_point():
    from sgm.model.text import _SEPARATORS, _non_ascii_split_ready

    for code in range(0x110000):
        text = "a" + chr(code) + "b’\xa0é"
        assert _non_ascii_split_ready(text) == text.translate(_SEPARATORS), hex(code)


@settings(deadline=None)  # the first call compiles the kernels
@given(st.lists(unicode_heavy, min_size=1, max_size=4), st.integers(1, 2), st.integers(1, 4), st.booleans(),
       st.booleans())
def test_compiled_tokenizer_classifies_unicode_like_the_python_path(texts, ngrams, max_len, lowercase, binary):
    """Every token, known or new, of non-ASCII text (separators, spaces, apostrophes of 2 and 3 bytes in
    UTF-8, characters of 4, lone surrogates) as ``Counter(tokenizer.tokens(text))`` lists them."""
    from sgm.model.lexicon import TermLexicon
    from sgm.model.interner import Interner

    tokenizer = Tokenizer(ngrams=ngrams, max_token_length=max_len, lowercase=lowercase, binary=binary)
    vocabulary = Interner()
    for term in ["a", "é", "ab", "a b", "😀"]:
        vocabulary.add(term)
    owner, terms, counts, new = TermLexicon(vocabulary).all_terms(texts, tokenizer)
    names = [vocabulary.names[t] if t >= 0 else new[-t - 1] for t in terms.tolist()]
    expected = [(d, t, 1.0 if binary else float(c)) for d, text in enumerate(texts)
                for t, c in Counter(tokenizer.tokens(text)).items()]
    assert list(zip(owner.tolist(), names, counts.tolist())) == expected


@settings(deadline=None, max_examples=40)
@given(st.lists(st.tuples(ascii_heavy | unicode_heavy, st.sampled_from("pq"), st.booleans()), min_size=1, max_size=8),
       st.integers(1, 2), st.sampled_from(["uc_pd_jm_dp", "u_jm_fw_ps", "uc_pd_dp_tXiX_ps"]))
def test_binary_tokenizer_equals_learning_the_presence_counter(steps, ngrams, spec):
    """A model with presence features, learning and scoring text (the compiled path with ids, the batch
    path, unlearning), equals the same model given ``{term: 1 for each distinct token}`` mappings."""
    from sgm.model import build_model

    config = {"model": spec, "params": {} if spec.startswith("u_jm") else {"mu": 5.0}}
    binary = build_model({**config, "tokenizer": {"ngrams": ngrams, "binary": True}})
    counts = build_model({**config, "tokenizer": {"ngrams": ngrams}})
    plain = Tokenizer(ngrams=ngrams)

    def presence(text):
        return {t: 1 for t in Counter(plain.tokens(text))}

    half = len(steps) // 2
    binary.learn_many([t for t, _, _ in steps[:half]], [l for _, l, _ in steps[:half]], ids=list(range(half)))
    counts.learn_many([presence(t) for t, _, _ in steps[:half]], [l for _, l, _ in steps[:half]], ids=list(range(half)))
    for i, (text, label, drop) in enumerate(steps[half:], start=half):
        binary.learn_one(text, label, id=str(i))
        counts.learn_one(presence(text), label, id=str(i))
        if drop:
            assert binary.forget(str(i - 1)) == counts.forget(str(i - 1))
    assert binary.state.terms.ids.keys() == counts.state.terms.ids.keys()
    probe = [t for t, _, _ in steps] + ["a b a b é"]
    if len(counts):
        classes, expected = counts.predict_log_proba_many([presence(t) for t in probe])
        assert binary.predict_log_proba_many(probe)[0] == classes
        np.testing.assert_allclose(binary.predict_log_proba_many(probe)[1], expected, rtol=0, atol=1e-9)
        for text in probe:  # one text at a time: the remembered tokenization of the compiled path
            np.testing.assert_allclose(binary.predict_log_proba_many([text])[1],
                                       counts.predict_log_proba_many([presence(text)])[1], rtol=0, atol=1e-9)


def test_binary_tokenizer_round_trips_and_leaves_count_configs_alone():
    assert Tokenizer().to_dict() == {"ngrams": 1, "lowercase": True, "max_token_length": 40}
    assert Tokenizer.from_dict(Tokenizer(ngrams=2, binary=True).to_dict()) == Tokenizer(ngrams=2, binary=True)
    assert term_counts("to be or not to be", Tokenizer(binary=True))[1].tolist() == [1.0, 1.0, 1.0, 1.0]


@settings(deadline=None, max_examples=60)
@given(st.lists(st.tuples(ascii_heavy, st.sampled_from("pq"), st.booleans()), min_size=1, max_size=8),
       st.sampled_from(["uc_pd_jm_dp_tXiX", "uc_pd_jm_dp_tXiX_tw", "u_jm_tXiX_fw_tw"]), st.integers(1, 2))
def test_tfidf_text_learns_and_scores_as_its_counts(steps, spec, ngrams):
    """TF-IDF reads each document's number of distinct terms, known or not: the compiled pass counts them
    (a text scored, or stepped by tw, then learned reuses that pass). Text in, scored between learns, equals
    the token Counter in, bit for bit: the same model (checksum) and the same posteriors, batched and alone."""
    from sgm.model import MNB

    tokenizer = Tokenizer(ngrams=ngrams)
    text_model, count_model = (MNB(spec, tokenizer=Tokenizer(ngrams=ngrams)) for _ in range(2))
    for i, (text, label, score_first) in enumerate(steps):
        if score_first and len(text_model):
            assert np.array_equal(text_model.predict_log_proba_many([text])[1],
                                  count_model.predict_log_proba_many([dict(Counter(tokenizer.tokens(text)))])[1])
        text_model.learn_one(text, label, id=str(i))
        count_model.learn_one(dict(Counter(tokenizer.tokens(text))), label, id=str(i))
    assert text_model.checksum() == count_model.checksum()
    probe = [text for text, _, _ in steps] + ["a b c x ab", ""]
    if len(count_model):
        expected = count_model.predict_log_proba_many([dict(Counter(tokenizer.tokens(t))) for t in probe])[1]
        assert np.array_equal(text_model.predict_log_proba_many(probe)[1], expected)
