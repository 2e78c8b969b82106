"""Words of the generated stream: vocabularies that drift, and the word lists they start from.

The seam with ``synthetic.py``: this module knows nothing of documents, labels or
records; it makes words (pronounceable pseudo-words, URLs, odd tokens), keeps them in
one :class:`Lexicon`, and samples them Zipf-like from a :class:`Vocabulary` whose
window slides over an endless pool (drift). ``synthetic.py`` mixes vocabularies into
documents and documents into the event stream.

Examples
--------
>>> lexicon = Lexicon(seed=7)
>>> words = Vocabulary(lexicon, pool_key=10, size=50, zipf_s=1.07)
>>> ids = words.sample(0, np.array([0.0, 0.5, 0.999]))
>>> len(lexicon.words) >= 50, len(set(lexicon.lookup()[ids])) <= 3
(True, True)
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["FUNCTION_WORDS", "NEWS_TOPICS", "SPAM_MARKERS", "Lexicon", "Vocabulary", "lognormal_lengths"]

#: Label names of the first news topics; later ones are ``topic-NN``.
NEWS_TOPICS = (
    "business", "sport", "science", "politics", "health", "technology", "culture", "travel",
    "weather", "energy", "education", "crime", "food", "music", "space", "law",
)  # fmt: skip

# The shared vocabulary: English function and common words, most frequent first.
FUNCTION_WORDS = (
    "the of and to a in is that for it on was with as be by at this are from or have an not "
    "but they his which one you were all her she there would their we him been has when who will "
    "more no if out so said what up its about into than them can only other new some could time "
    "these two may then do first any my now such like our over man me even most made after also "
    "did many before must through back years where much your way well down should because each "
    "just those people how too little state good very make world still own see men work long get "
    "here between both life being under never day same another know while last might us great old "
    "year off come since against go came right used take three"
).split()

SPAM_MARKERS = (
    "free win winner cash prize $1000 $$$ 100% urgent now act limited offer click guaranteed credit "
    "loan v1agra c1alis !!! unsubscribe call txt claim bonus discount cheap deal risk-free expires "
    "today congratulations selected exclusive $500 £250 *** WIN! FREE! URGENT! 0800-555-0199 "
    "winner!!"
).split()

_ONSETS = "b c d f g h j k l m n p r s t v w z br cr dr fr gr pr tr st sp ch sh th bl pl".split()
_VOWELS = "a e i o u a e i o ai ea io ou".split()
_CODAS = ["", "", "", "n", "r", "s", "l", "m", "t", "k"]
_TLDS = ("com", "net", "biz", "info", "ru", "cn", "xyz")


class Lexicon:
    """All words of one stream: global word ids, unique pseudo-words, one rng per pool."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.words: list[str] = []
        self._ids: dict[str, int] = {}
        self._array: np.ndarray | None = None

    def add(self, word: str) -> int | None:
        if word in self._ids:
            return None
        self._ids[word] = len(self.words)
        self.words.append(word)
        self._array = None
        return self._ids[word]

    def id_of(self, word: str) -> int:
        return self._ids[word]

    def lookup(self) -> np.ndarray:
        if self._array is None or len(self._array) != len(self.words):
            self._array = np.array(self.words, dtype=object)
        return self._array

    def pseudo_word(self, rng: np.random.Generator) -> str:
        syllables = 2 + int(rng.integers(0, 2)) + (rng.random() < 0.15)
        parts = [_ONSETS[rng.integers(len(_ONSETS))] + _VOWELS[rng.integers(len(_VOWELS))] for _ in range(syllables)]
        return "".join(parts) + _CODAS[rng.integers(len(_CODAS))]

    def url(self, rng: np.random.Generator) -> str:
        host = self.pseudo_word(rng)
        path = "".join("0123456789abcdef"[i] for i in rng.integers(0, 16, size=6))
        return f"http://{host}.{_TLDS[rng.integers(len(_TLDS))]}/{path}"

    def odd_token(self, rng: np.random.Generator) -> str:
        alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ0123456789"
        return "".join(alphabet[i] for i in rng.integers(0, len(alphabet), size=int(rng.integers(4, 8))))


class Vocabulary:
    """Zipf-weighted words: a window of ``size`` words slides over an endless pool.

    Every pool word has a fixed random popularity; the words inside the window are
    ranked by it, so when the window slides one word leaves, one enters at its own
    rank, and the rest move by at most one rank: gradual drift.
    """

    def __init__(self, lexicon: Lexicon, pool_key: int, size: int, zipf_s: float, zipf_q: float = 0.0,
                 make_word: str = "pseudo", fixed: Sequence[str] = ()) -> None:  # fmt: skip
        self.lexicon = lexicon
        self.size = size
        self.zipf_s = zipf_s
        self.zipf_q = zipf_q
        self.make_word = make_word
        self.rng = np.random.default_rng([lexicon.seed, 1000 + pool_key])
        self.pool: list[int] = []
        self.popularity: list[float] = []
        for word in fixed:  # fixed words (function words, markers) never drift out: the pool is not extended
            word_id = lexicon.add(word)
            self.pool.append(word_id if word_id is not None else lexicon.id_of(word))
            self.popularity.append(-len(self.pool))  # keep the given order as rank
        self.grows = not fixed
        self._cache: tuple[int, np.ndarray, np.ndarray] | None = None

    def _extend(self, n: int) -> None:
        while len(self.pool) < n:
            if self.make_word == "url":
                word = self.lexicon.url(self.rng)
            elif self.make_word == "odd":
                word = self.lexicon.odd_token(self.rng) if self.rng.random() < 0.5 else self.lexicon.url(self.rng)
            else:
                word = self.lexicon.pseudo_word(self.rng)
            word_id = self.lexicon.add(word)
            if word_id is not None:
                self.pool.append(word_id)
                self.popularity.append(float(self.rng.random()))

    def window(self, offset: int) -> tuple[np.ndarray, np.ndarray]:
        """Word ids by rank and the cumulative Zipf distribution over them at ``offset``."""
        if not self.grows:
            offset = 0
        if self._cache is not None and self._cache[0] == offset:
            return self._cache[1], self._cache[2]
        self._extend(offset + self.size)
        ids = np.array(self.pool[offset : offset + self.size])
        order = np.argsort(-np.array(self.popularity[offset : offset + self.size]), kind="stable")
        weights = 1.0 / (np.arange(1, len(ids) + 1) + self.zipf_q) ** self.zipf_s
        cdf = np.cumsum(weights)
        cdf /= cdf[-1]
        self._cache = (offset, ids[order], cdf)
        return ids[order], cdf

    def sample(self, offset: int, u: np.ndarray) -> np.ndarray:
        ids, cdf = self.window(offset)
        return ids[np.minimum(np.searchsorted(cdf, u, side="right"), len(ids) - 1)]


def lognormal_lengths(rng: np.random.Generator, mean: float, n: int) -> np.ndarray:
    sigma = 0.6
    mu = math.log(mean) - sigma * sigma / 2
    return np.clip(np.rint(rng.lognormal(mu, sigma, n)), 1, 20 * mean).astype(np.int64)
