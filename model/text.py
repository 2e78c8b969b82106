"""Turning a document into term counts.

A document is either text, tokenized by a :class:`Tokenizer`, or a mapping
term -> count supplied by the caller (already tokenized upstream).
"""
from __future__ import annotations

import string
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain
from typing import Mapping, Union

import numpy as np

from .loops.validation import COUNTS_INVALID, COUNTS_POSITIVE, count_status

Document = Union[str, Mapping[str, float]]

# Tokens are what remains between whitespace once ASCII punctuation and common
# Unicode punctuation become spaces; apostrophes are dropped ("don't" -> "dont").
# str.translate + str.split run in C: about 4x faster than a regular expression.
_SEPARATORS = {ord(c): " " for c in string.punctuation + "“”„‘‚«»‹›—–…·•¡¿\u00a0"}
_SEPARATORS.update({ord("'"): None, ord("’"): None})
# The same mapping for ASCII text as a byte table: bytes.translate is a table lookup per
# byte, several times faster than str.translate's per-character dict lookups. Public: the
# compiled tokenizer of model.lexicon classifies bytes by the same table.
ASCII_SEPARATORS = bytes(32 if chr(b) in string.punctuation else b for b in range(256))
ASCII_DELETED = b"'"
#: Characters outside ASCII that ``str.split()`` splits on (``chr(c).isspace()``; tests/test_text.py checks).
UNICODE_SPACES = "\x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
#: For the compiled tokenizer (:mod:`model.lexicon`) of non-ASCII text: the separators and deletions above,
#: and every non-ASCII space made an ASCII one, so that what remains splits on ASCII whitespace alone.
SPLIT_READY = dict(_SEPARATORS)
SPLIT_READY.update({ord(c): " " for c in UNICODE_SPACES})
_WIDE_SPACED = "".join(chr(c) for c, to in _SEPARATORS.items() if c >= 128 and to == " ")
_WIDE_DELETED = "".join(chr(c) for c, to in _SEPARATORS.items() if c >= 128 and to is None)


def _non_ascii_split_ready(text: str) -> str:
    """``text.translate(_SEPARATORS)`` for text that is not all ASCII, several times faster: the ASCII
    separators through the byte table on the UTF-8 bytes (a byte below 128 is always a whole ASCII
    character there, and the table leaves the others alone), then the few non-ASCII ones replaced.

    >>> _non_ascii_split_ready("“don’t”—café, ok?") == "“don’t”—café, ok?".translate(_SEPARATORS)
    True
    """
    text = text.encode("utf-8", "surrogatepass").translate(ASCII_SEPARATORS, ASCII_DELETED).decode(
        "utf-8", "surrogatepass")
    for ch in _WIDE_DELETED:
        if ch in text:
            text = text.replace(ch, "")
    for ch in _WIDE_SPACED:
        if ch in text:
            text = text.replace(ch, " ")
    return text


@dataclass(frozen=True)
class Tokenizer:
    """The default tokenizer: lower-cased word tokens, optionally with n-grams.

    Parameters
    ----------
    ngrams : int
        Longest word n-gram to add (1 = words only, 2 = words and bigrams).
        Bigrams are joined with a space, which no word token contains.
    lowercase : bool
        Lower-case the text first.
    max_token_length : int
        Longer tokens are dropped (base64 blobs, hashes).
    binary : bool
        Presence features: every distinct term of a document counts 1, however
        often it occurs (the compiled path of :mod:`model.lexicon` too).
    char_ngrams : tuple of (int, int), optional
        Character n-grams instead of words: every word (as above) inside ``<`` ``>``
        boundary marks gives its n-grams of these lengths (inclusive), each term marked
        with ``#`` (which no word token contains). A feature set of its own, for a base of
        an ensemble (issue 19: a char-only model beside the word model helped r8 and r52 in
        ``bench.topic_levers``'s ``char-mix``); ``ngrams`` stays 1. Tokenized in Python
        (:attr:`compiled` is False): the compiled word path of :mod:`model.lexicon` is not used.

    Examples
    --------
    >>> Tokenizer()("Win $1,000 now! Don't wait.")
    {'win': 1, '1': 1, '000': 1, 'now': 1, 'dont': 1, 'wait': 1}
    >>> Tokenizer(ngrams=2)("free money free")
    {'free': 2, 'money': 1, 'free money': 1, 'money free': 1}
    >>> Tokenizer(ngrams=2, binary=True)("free money free")
    {'free': 1, 'money': 1, 'free money': 1, 'money free': 1}
    >>> Tokenizer(char_ngrams=(3, 4))("Free free")
    {'#<fr': 2, '#fre': 2, '#ree': 2, '#ee>': 2, '#<fre': 2, '#free': 2, '#ree>': 2}
    """

    ngrams: int = 1
    lowercase: bool = True
    max_token_length: int = 40
    binary: bool = False
    char_ngrams: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.ngrams, int) and 1 <= self.ngrams <= 3):
            raise ValueError(f"ngrams must be 1, 2 or 3, got {self.ngrams!r}")
        if self.max_token_length < 1:
            raise ValueError("max_token_length must be positive")
        if self.char_ngrams is not None:
            low, high = self.char_ngrams
            if not (isinstance(low, int) and isinstance(high, int) and 1 <= low <= high <= MAX_CHAR_NGRAM):
                raise ValueError(f"char_ngrams must be two lengths 1 <= low <= high <= {MAX_CHAR_NGRAM}, "
                                 f"got {self.char_ngrams!r}")
            if self.ngrams != 1:
                raise ValueError("char_ngrams replaces words: ngrams must be 1")

    @property
    def compiled(self) -> bool:
        """Whether :mod:`model.lexicon`'s compiled word pass gives this tokenizer's terms (not for char n-grams)."""
        return self.char_ngrams is None

    def max_terms(self, text_length: int) -> int:
        """An upper bound on the distinct terms of a text of ``text_length`` characters (at most
        ``text_length // 2 + 1`` words, each of ``m`` characters giving at most ``m + 2`` n-grams per length)."""
        words = text_length // 2 + 1
        if self.char_ngrams is None:
            return self.ngrams * words
        low, high = self.char_ngrams
        return (high - low + 1) * (text_length + 2 * words)

    def tokens(self, text: str) -> list[str]:
        words = self.words(text)
        if self.char_ngrams is not None:
            return char_ngrams_of(words, *self.char_ngrams)
        if self.ngrams == 1:
            return words
        out = list(words)
        for n in range(2, self.ngrams + 1):  # zip of shifted views: the n-grams in order, joined in C
            out.extend(map(" ".join, zip(*(words[k:] for k in range(n)))))
        return out

    def words(self, text: str) -> list[str]:
        """The word tokens of ``text``, in order (what ``tokens`` builds n-grams or character n-grams of)."""
        if self.lowercase:
            text = text.lower()
        if text.isascii():  # str.split after decoding: the same whitespace rules as the general path
            words = text.encode("ascii").translate(ASCII_SEPARATORS, ASCII_DELETED).decode("ascii").split()
        else:
            words = _non_ascii_split_ready(text).split()
        limit = self.max_token_length
        if words and max(map(len, words)) > limit:
            words = [w for w in words if len(w) <= limit]
        return words

    def __call__(self, text: str) -> dict[str, int]:
        return self.counts(text)

    def counts(self, text: str) -> dict[str, int]:
        """Term -> count of ``text`` in first-occurrence order (each 1 with ``binary``)."""
        if self.char_ngrams is not None:  # per distinct word: its n-grams once, times its count (4x fewer steps)
            low, high = self.char_ngrams
            out: dict[str, int] = {}
            get = out.get
            for word, count in Counter(self.words(text)).items():
                for gram in word_char_ngrams(word, low, high):
                    out[gram] = 1 if self.binary else get(gram, 0) + count
            return out
        if self.binary:
            return dict.fromkeys(self.tokens(text), 1)
        return dict(Counter(self.tokens(text)))

    def to_dict(self) -> dict:
        out = {"ngrams": self.ngrams, "lowercase": self.lowercase, "max_token_length": self.max_token_length}
        if self.binary:  # only when set: configurations and snapshots of count models stay as they were
            out["binary"] = True
        if self.char_ngrams is not None:
            out["char_ngrams"] = list(self.char_ngrams)
        return out

    @classmethod
    def from_dict(cls, data: Mapping) -> "Tokenizer":
        unknown = set(data) - {"ngrams", "lowercase", "max_token_length", "binary", "char_ngrams"}
        if unknown:  # a misspelt option ("ngram") would leave its default in place, unnoticed
            raise ValueError(f"unknown tokenizer options: {sorted(unknown)}")
        chars = data.get("char_ngrams")
        if chars is not None and (isinstance(chars, (str, bytes)) or len(chars) != 2):
            raise ValueError(f"char_ngrams must be two lengths [low, high], got {chars!r}")
        return cls(
            ngrams=int(data.get("ngrams", 1)),
            lowercase=bool(data.get("lowercase", True)),
            max_token_length=int(data.get("max_token_length", 40)),
            binary=bool(data.get("binary", False)),
            char_ngrams=None if chars is None else (int(chars[0]), int(chars[1])),
        )


#: The longest character n-gram a tokenizer takes (a longer one is nearly the word itself).
MAX_CHAR_NGRAM = 10
#: The mark of a character n-gram term: '#' is punctuation, so no word token holds it.
CHAR_MARK = "#"


def char_ngrams_of(words: list[str], low: int, high: int) -> list[str]:
    """The character n-grams (lengths ``low``..``high``) of each word inside ``<`` ``>`` marks, in order, with repeats.

    >>> char_ngrams_of(["ab", "ab"], 3, 4)
    ['#<ab', '#ab>', '#<ab>', '#<ab', '#ab>', '#<ab>']
    """
    return list(chain.from_iterable(word_char_ngrams(word, low, high) for word in words))


@lru_cache(maxsize=1 << 16)  # words repeat (Zipf): most are cut once; bounded, so a long-running service stays flat
def word_char_ngrams(word: str, low: int, high: int) -> tuple[str, ...]:
    """The character n-grams of one word inside ``<`` ``>`` marks, shortest first, each marked with :data:`CHAR_MARK`.

    >>> word_char_ngrams("ab", 3, 4)
    ('#<ab', '#ab>', '#<ab>')
    """
    marked = f"<{word}>"
    size = len(marked)
    return tuple(CHAR_MARK + marked[i:i + n] for n in range(low, min(high, size) + 1) for i in range(size - n + 1))



def words_of_tokens(n_tokens: int, ngrams: int) -> int:
    """How many words a text has whose :meth:`Tokenizer.tokens` with ``ngrams`` number ``n_tokens``.

    ``W`` words give ``W + (W - 1) + ...`` tokens (n-grams of every length up to ``ngrams`` that fit), one
    value per ``W``: inverted exactly.

    >>> [words_of_tokens(len(Tokenizer(ngrams=n).tokens(text)), n) for n in (1, 2, 3) for text in ("", "a", "a b", "a b c d")]
    [0, 1, 2, 4, 0, 1, 2, 4, 0, 1, 2, 4]
    """
    if ngrams == 1 or n_tokens <= 1:
        return n_tokens
    if ngrams == 2:  # W >= 2: 2W - 1
        return (n_tokens + 1) // 2
    return (n_tokens + 3) // 3  # ngrams 3, W >= 2: 3W - 3 (W = 2: 2 + 1 = 3)


def batch_term_counts(docs, tokenizer: Tokenizer, *, check_terms: bool = True) -> tuple[list[str], np.ndarray, list[int]]:
    """Terms and counts of many documents, concatenated: ``(terms, counts, distinct terms per document)``.

    The same result as :func:`term_counts` on each document, with one array
    conversion and one validation for the whole batch. ``check_terms=False``
    skips checking that mapping keys are strings, for a caller that checks the
    keys it has not seen before (:meth:`model.state.CountState.intern_terms`).

    >>> batch_term_counts(["a b a", {"c": 2.0, "d": 0}], Tokenizer())
    (['a', 'b', 'c'], array([2., 1., 2.]), [2, 1])
    """
    if type(docs) is list and all(type(doc) is dict for doc in docs):  # mappings only: flattened in C
        all_terms = list(chain.from_iterable(docs))
        lengths = list(map(len, docs))
        try:
            values = np.fromiter(chain.from_iterable(map(dict.values, docs)), dtype=np.float64, count=len(all_terms))
        except (TypeError, ValueError):
            raise ValueError("term counts must be numbers") from None
    else:
        all_terms, all_counts, lengths, mappings = [], [], [], False
        read = tokenizer.counts
        for doc in docs:
            if isinstance(doc, str):
                counts = read(doc)
            elif isinstance(doc, Mapping):
                counts = doc
                mappings = True
            else:
                raise TypeError(f"a document is text or a mapping term -> count, got {type(doc).__name__}")
            all_terms.extend(counts)
            all_counts.extend(counts.values())
            lengths.append(len(counts))
        if not mappings:  # tokenizer counts: positive integers and string terms by construction
            return all_terms, np.array(all_counts, dtype=np.float64), lengths
        try:
            values = np.array(all_counts, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError("term counts must be numbers") from None
        if values.ndim != 1 or len(values) != len(all_terms):
            raise ValueError("term counts must be numbers")
    if check_terms:
        check_term_types(all_terms)
    status = count_status(values)  # compiled: one pass instead of several array reductions
    if status == COUNTS_POSITIVE:
        return all_terms, values, lengths
    if status == COUNTS_INVALID:
        raise ValueError("term counts must be finite and non-negative")
    if not values.all():  # zero counts are dropped
        keep = values != 0
        owner = np.repeat(np.arange(len(lengths)), lengths)
        lengths = np.bincount(owner[keep], minlength=len(lengths)).tolist()
        all_terms = [t for t, k in zip(all_terms, keep.tolist()) if k]
        values = values[keep]
    return all_terms, values, lengths


def check_term_types(terms: list) -> None:
    """Raise ``TypeError`` unless every term is a string."""
    if set(map(type, terms)) - {str} and not all(isinstance(t, str) for t in terms):
        raise TypeError("terms must be strings")


def term_counts(doc: Document, tokenizer: Tokenizer, *, check_terms: bool = True) -> tuple[list[str], np.ndarray]:
    """Distinct terms of one document and their counts (tokenized text, or a checked mapping).

    Zero counts are dropped; negative, NaN or infinite counts raise ``ValueError``.
    ``check_terms`` as in :func:`batch_term_counts`.

    >>> term_counts({"a": 2, "b": 0}, Tokenizer())
    (['a'], array([2.]))
    >>> term_counts("to be or not to be", Tokenizer())
    (['to', 'be', 'or', 'not'], array([2., 2., 1., 1.]))
    """
    if isinstance(doc, str):
        counts = tokenizer.counts(doc)
        return list(counts), np.fromiter(counts.values(), dtype=np.float64, count=len(counts))
    if not isinstance(doc, Mapping):
        raise TypeError(f"a document is text or a mapping term -> count, got {type(doc).__name__}")
    terms = list(doc)
    try:
        values = np.fromiter(doc.values(), dtype=np.float64, count=len(terms))
    except (TypeError, ValueError):
        raise ValueError("term counts must be numbers") from None
    if check_terms:
        check_term_types(terms)
    status = count_status(values)  # compiled: one pass
    if status == COUNTS_INVALID:
        raise ValueError("term counts must be finite and non-negative")
    if status != COUNTS_POSITIVE:  # zero counts are dropped
        keep = np.flatnonzero(values)
        terms = [terms[i] for i in keep.tolist()]
        values = values[keep]
    return terms, values
