"""Turning a document into term counts.

A document is either text, tokenized by a :class:`Tokenizer`, or a mapping
term -> count supplied by the caller (already tokenized upstream).
"""
from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Mapping, Union

Document = Union[str, Mapping[str, float]]

# Letters and digits, keeping inner apostrophes ("don't") and dots/commas inside
# numbers ("3.5", "1,000"); everything else separates tokens.
_DEFAULT_PATTERN = r"\d+(?:[.,]\d+)+|[^\W_]+(?:['’][^\W_]+)*"


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

    Examples
    --------
    >>> Tokenizer()("Win $1,000 now! Don't wait.")
    {'win': 1, '1,000': 1, 'now': 1, "don't": 1, 'wait': 1}
    >>> Tokenizer(ngrams=2)("free money free")
    {'free': 2, 'money': 1, 'free money': 1, 'money free': 1}
    """

    ngrams: int = 1
    lowercase: bool = True
    max_token_length: int = 40

    def __post_init__(self) -> None:
        if not (isinstance(self.ngrams, int) and 1 <= self.ngrams <= 3):
            raise ValueError(f"ngrams must be 1, 2 or 3, got {self.ngrams!r}")
        if self.max_token_length < 1:
            raise ValueError("max_token_length must be positive")

    def tokens(self, text: str) -> list[str]:
        if self.lowercase:
            text = text.lower()
        words = _TOKEN_RE.findall(text)
        if self.max_token_length:
            limit = self.max_token_length
            words = [w for w in words if len(w) <= limit]
        if self.ngrams == 1:
            return words
        out = list(words)
        for n in range(2, self.ngrams + 1):
            out.extend(" ".join(words[i : i + n]) for i in range(len(words) - n + 1))
        return out

    def __call__(self, text: str) -> dict[str, int]:
        return dict(Counter(self.tokens(text)))

    def to_dict(self) -> dict:
        return {"ngrams": self.ngrams, "lowercase": self.lowercase, "max_token_length": self.max_token_length}

    @classmethod
    def from_dict(cls, data: Mapping) -> "Tokenizer":
        return cls(
            ngrams=int(data.get("ngrams", 1)),
            lowercase=bool(data.get("lowercase", True)),
            max_token_length=int(data.get("max_token_length", 40)),
        )


_TOKEN_RE = re.compile(_DEFAULT_PATTERN)


def term_counts(doc: Document, tokenizer: Tokenizer) -> dict[str, float]:
    """Counts of one document: tokenized text, or a validated copy of a mapping.

    Zero counts are dropped; negative, NaN or infinite counts raise ``ValueError``.

    >>> term_counts({"a": 2, "b": 0}, Tokenizer())
    {'a': 2.0}
    """
    if isinstance(doc, str):
        return tokenizer(doc)  # type: ignore[return-value]
    if not isinstance(doc, Mapping):
        raise TypeError(f"a document is text or a mapping term -> count, got {type(doc).__name__}")
    out: dict[str, float] = {}
    for term, count in doc.items():
        if not isinstance(term, str):
            raise TypeError(f"terms must be strings, got {term!r}")
        value = float(count)
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"count of {term!r} must be finite and non-negative, got {count!r}")
        if value > 0:
            out[term] = value
    return out
