"""Compiled lookup of text tokens in the term vocabulary: the fast path for ASCII text.

Scoring text needs, per document, the known terms and their counts. In Python
that is a tokenizer building a string per token and a dict lookup per string:
about 10 us for a 100-word document. :class:`TermLexicon` does the same in one
compiled pass over the bytes of a batch: it lower-cases, maps punctuation to
separators and drops apostrophes exactly as :class:`model.text.Tokenizer` does
for ASCII text, hashes each token (and each word n-gram) with 64-bit FNV-1a, and
finds it in an open-addressing table of the vocabulary's terms. A hash match is
confirmed by comparing the bytes, so the result is exact: the same terms and
counts, in the same order, as ``Counter(tokenizer.tokens(text))`` restricted to
the vocabulary. Text with non-ASCII characters is lower-cased by Python
(Unicode lower-casing is not re-implemented here) and classified character
by character in the kernel.

For learning (:meth:`TermLexicon.all_terms`) the same pass also keeps the tokens
that are not in the vocabulary, each new string once per batch, for the caller to
intern: a document's terms then cost Python work only where they are new.

The table follows the :class:`model.interner.Interner` it was built from through the
interner's change log (ids added or removed since the last lookup), filing the
changed names in one compiled pass.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
from numba import njit

from .interner import decode_names
from .text import ASCII_DELETED, ASCII_SEPARATORS, SPLIT_READY, Tokenizer

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
_EMPTY, _DELETED = -1, -2
_NO_FILTER = np.zeros(0, dtype=np.int64)

# Character classes for the kernel, by code point: 0 = part of a token, 1 = separator (whitespace
# as str.split() sees it, or punctuation, which the tokenizer maps to a space), 2 = deleted (the
# apostrophes). ASCII bytes index it directly; a multi-byte UTF-8 character by its decoded code point
# (code points past the table are token characters).
_CHAR_CLASS = np.zeros(max(SPLIT_READY) + 1, dtype=np.uint8)
for _b in range(128):
    if chr(_b).isspace() or ASCII_SEPARATORS[_b] == 32:
        _CHAR_CLASS[_b] = 1
for _b in ASCII_DELETED:
    _CHAR_CLASS[_b] = 2
for _c, _to in SPLIT_READY.items():
    _CHAR_CLASS[_c] = 2 if _to is None else 1


@njit(cache=True, nogil=True)
def _fnv(data, start, end, h):  # pragma: no cover - compiled
    for i in range(start, end):
        h = (h ^ np.uint64(data[i])) * _FNV_PRIME
    return h


@njit(cache=True, nogil=True)
def _insert(slots, h, term):  # pragma: no cover - compiled
    # the caller keeps the table at most half full (deleted slots included): an empty slot exists
    mask = slots.shape[0] - 1
    at = np.int64(h & np.uint64(mask))
    while slots[at, 1] != _EMPTY:  # deleted slots are not reused: they go at the next rebuild
        at = (at + 1) & mask
    slots[at, 0] = np.int64(h)
    slots[at, 1] = term


@njit(cache=True, nogil=True)
def _delete(slots, h, term):  # pragma: no cover - compiled
    mask = slots.shape[0] - 1
    at = np.int64(h & np.uint64(mask))
    while slots[at, 1] != _EMPTY:
        if slots[at, 1] == term:
            slots[at, 1] = _DELETED
            return
        at = (at + 1) & mask


@njit(cache=True, nogil=True)
def _find(slots, term_bytes, location, h, buf, starts, ends, first, n):  # pragma: no cover
    """Id of the term equal to words ``first .. first + n - 1`` of ``buf`` joined by spaces, or -1.

    ``slots[at] = (hash bits, term id)``, ``location[term] = (start, length)`` of its bytes in
    ``term_bytes``: what a probe reads is side by side.
    """
    length = n - 1
    for j in range(first, first + n):
        length += ends[j] - starts[j]
    mask = slots.shape[0] - 1
    at = np.int64(h & np.uint64(mask))
    key = np.int64(h)
    while slots[at, 1] != _EMPTY:
        term = slots[at, 1]
        if term >= 0 and slots[at, 0] == key and location[term, 1] == length:
            p = location[term, 0]
            same = True
            for j in range(first, first + n):
                if j > first:
                    if term_bytes[p] != 32:
                        same = False
                        break
                    p += 1
                for i in range(starts[j], ends[j]):
                    if term_bytes[p] != buf[i]:
                        same = False
                        break
                    p += 1
                if not same:
                    break
            if same:
                return term
        at = (at + 1) & mask
    return -1


@njit(cache=True, nogil=True)
def _count_term(key, value, d, serial, marks, out_owner, out_terms, out_counts, n_out):  # pragma: no cover
    """Count one occurrence of ``key`` in document ``d`` (its row says ``value``); returns the number of rows.

    ``marks[key] = (serial of the last document that counted it, its row there)``.
    """
    if marks[key, 0] == serial:
        out_counts[marks[key, 1]] += 1.0
        return n_out
    marks[key, 0] = serial
    marks[key, 1] = n_out
    out_owner[n_out] = d
    out_terms[n_out] = value
    out_counts[n_out] = 1.0
    return n_out + 1


@njit(cache=True, nogil=True)
def _doubled(array, fill):  # pragma: no cover - compiled
    shape = (2 * array.shape[0],) + array.shape[1:]
    bigger = np.full(shape, fill, dtype=array.dtype)
    bigger[: array.shape[0]] = array
    return bigger


@njit(cache=True, nogil=True)
def _add_unknown(h, buf, starts, ends, first, n, table, text, location, n_unknown, n_text):  # pragma: no cover
    """File words ``first .. first + n - 1`` (joined by spaces) as unknown token ``n_unknown``.

    Returns the (possibly grown) arrays and the new byte count. The caller grows the table.
    """
    length = n - 1
    for j in range(first, first + n):
        length += ends[j] - starts[j]
    while n_text + length > text.shape[0]:
        text = _doubled(text, np.uint8(0))
    if n_unknown >= location.shape[0]:
        location = _doubled(location, -1)
    location[n_unknown, 0] = n_text
    location[n_unknown, 1] = length
    for j in range(first, first + n):
        if j > first:
            text[n_text] = 32
            n_text += 1
        for i in range(starts[j], ends[j]):
            text[n_text] = buf[i]
            n_text += 1
    _insert(table, h, n_unknown)
    return text, location, n_text


@njit(cache=True, nogil=True)
def _rehash(unknown_hash, n_unknown, size):  # pragma: no cover - compiled
    table = np.zeros((size, 2), dtype=np.int64)
    table[:, 1] = _EMPTY
    for u in range(n_unknown):
        _insert(table, unknown_hash[u], u)
    return table


@njit(cache=True, nogil=True)
def _regrown(slots, size):  # pragma: no cover - compiled
    """The filed (hash, term) pairs of ``slots`` in a new table of ``size`` slots (deleted slots dropped)."""
    table = np.zeros((size, 2), dtype=np.int64)
    table[:, 1] = _EMPTY
    for at in range(slots.shape[0]):
        if slots[at, 1] >= 0:
            _insert(table, np.uint64(slots[at, 0]), slots[at, 1])
    return table


@njit(cache=True, nogil=True, inline="always")
def _character_class(data, i, char_class):  # pragma: no cover - compiled
    """``(class, continuation bytes to skip)`` of the UTF-8 character whose lead byte is ``data[i]``.

    A token character keeps its bytes (nothing to skip); a separator or deleted one goes whole.
    """
    b = np.int64(data[i])
    if b < 0xE0:
        n, cp = 2, ((b & 0x1F) << 6) | (np.int64(data[i + 1]) & 0x3F)
    elif b < 0xF0:
        n, cp = 3, ((b & 0x0F) << 12) | ((np.int64(data[i + 1]) & 0x3F) << 6) | (np.int64(data[i + 2]) & 0x3F)
    else:
        return 0, 0  # beyond the basic plane: no separator there
    if cp >= char_class.shape[0] or char_class[cp] == 0:
        return 0, 0
    return np.int64(char_class[cp]), n - 1


@njit(cache=True, nogil=True, inline="always")
def _split_words(data, begin, end, char_class, lowercase, max_len, buf, starts, ends, hashes):  # pragma: no cover
    """Clean ``data[begin:end]`` into ``buf`` (lower-case, separators, dropped apostrophes) and split it.

    Words longer than ``max_len`` characters (UTF-8) are dropped; each kept word's bounds in
    ``buf`` and its FNV-1a hash (computed as its bytes go by) are written to
    ``starts``/``ends``/``hashes``. Returns the number of words.
    """
    n_words = 0
    length = 0
    word_start = -1
    chars = 0  # characters of the word so far: UTF-8 bytes other than continuation bytes
    h = _FNV_OFFSET
    skip = 0  # continuation bytes of a separator or deleted character still to pass
    for i in range(begin, end + 1):
        if i < end:
            b = data[i]
            if skip > 0:
                skip -= 1
                continue
            if b < 0x80:
                kind = char_class[b]
            elif b >= 0xC0:  # a character's lead byte: classify the character (the text is valid UTF-8)
                kind, skip = _character_class(data, i, char_class)
            else:
                kind = 0  # a continuation byte of a token character
            if kind == 2:
                continue
            if lowercase and 65 <= b <= 90:  # (non-ASCII text comes lower-cased)
                b += 32
        else:
            kind = 1  # the end of the document ends the last word
        if kind == 0:
            if word_start < 0:
                word_start = length
                chars = 0
                h = _FNV_OFFSET
            buf[length] = b
            length += 1
            if (b & 0xC0) != 0x80:
                chars += 1
            h = (h ^ np.uint64(b)) * _FNV_PRIME
        elif word_start >= 0:
            if chars <= max_len:
                starts[n_words] = word_start
                ends[n_words] = length
                hashes[n_words] = h
                n_words += 1
            word_start = -1
    return n_words


@njit(cache=True, nogil=True, inline="always")
def _ngram_hash(buf, starts, ends, hashes, first, n):  # pragma: no cover - compiled
    """FNV-1a of words ``first .. first + n - 1`` joined by spaces: continues from the first word's hash."""
    h = hashes[first]
    for j in range(first + 1, first + n):
        h = (h ^ np.uint64(32)) * _FNV_PRIME
        h = _fnv(buf, starts[j], ends[j], h)
    return h


@njit(cache=True, nogil=True)
def _known_terms(data, doc_starts, char_class, lowercase, max_len, ngrams, slots, term_bytes, location, marks, serial,
                 out_owner, out_terms, out_counts, entries):  # pragma: no cover
    """Known terms of each document with their counts, in first-occurrence order; returns how many.

    With a non-empty ``entries`` only terms ``t`` with ``entries[t] > 0`` count as known.
    """
    filtered = entries.shape[0] > 0
    n_out = 0
    buf = np.empty(data.shape[0], dtype=np.uint8)
    starts = np.empty(data.shape[0] // 2 + 1, dtype=np.int64)
    ends = np.empty(data.shape[0] // 2 + 1, dtype=np.int64)
    hashes = np.empty(data.shape[0] // 2 + 1, dtype=np.uint64)
    for d in range(doc_starts.shape[0] - 1):
        serial += 1
        n_words = _split_words(data, doc_starts[d], doc_starts[d + 1], char_class, lowercase, max_len, buf, starts,
                               ends, hashes)
        # every n-gram of the kept words (unigrams first, as the tokenizer lists them)
        for n in range(1, ngrams + 1):
            for first in range(0, n_words - n + 1):
                if n == 1:  # a constant word count lets the compiler specialize the comparison
                    term = _find(slots, term_bytes, location, hashes[first], buf, starts, ends, first, 1)
                else:
                    h = _ngram_hash(buf, starts, ends, hashes, first, n)
                    term = _find(slots, term_bytes, location, h, buf, starts, ends, first, n)
                if term >= 0 and (not filtered or (term < entries.shape[0] and entries[term] > 0)):
                    n_out = _count_term(term, term, d, serial, marks, out_owner, out_terms, out_counts, n_out)
    return n_out, serial


@njit(cache=True, nogil=True)
def _all_terms(data, doc_starts, char_class, lowercase, max_len, ngrams, slots, term_bytes, location, marks, serial,
               out_owner, out_terms, out_counts):  # pragma: no cover
    """:func:`_known_terms` with the other tokens as rows too, for learning.

    Unknown token ``u`` (numbered in first-occurrence order over the batch) is
    the row value ``-(u + 1)``; its text is ``text[start : start + length]`` with
    ``(start, length) = unknown[u]``. Returns ``(rows, serial, text, unknown)``.
    """
    n_out = 0
    buf = np.empty(data.shape[0], dtype=np.uint8)
    starts = np.empty(data.shape[0] // 2 + 1, dtype=np.int64)
    ends = np.empty(data.shape[0] // 2 + 1, dtype=np.int64)
    hashes = np.empty(data.shape[0] // 2 + 1, dtype=np.uint64)
    # the unknown tokens: a hash table over their text, and per-document counting marks
    capacity = 64
    table = _rehash(np.zeros(1, dtype=np.uint64), 0, 2 * capacity)
    unknown_hash = np.zeros(capacity, dtype=np.uint64)
    unknown_marks = np.full((capacity, 2), -1, dtype=np.int64)
    text = np.zeros(8 * capacity, dtype=np.uint8)
    unknown = np.full((capacity, 2), -1, dtype=np.int64)
    n_unknown = 0
    n_text = 0
    for d in range(doc_starts.shape[0] - 1):
        serial += 1
        n_words = _split_words(data, doc_starts[d], doc_starts[d + 1], char_class, lowercase, max_len, buf, starts,
                               ends, hashes)
        for n in range(1, ngrams + 1):
            for first in range(0, n_words - n + 1):
                if n == 1:  # a constant word count lets the compiler specialize the comparison
                    h = hashes[first]
                    term = _find(slots, term_bytes, location, h, buf, starts, ends, first, 1)
                else:
                    h = _ngram_hash(buf, starts, ends, hashes, first, n)
                    term = _find(slots, term_bytes, location, h, buf, starts, ends, first, n)
                if term >= 0:
                    n_out = _count_term(term, term, d, serial, marks, out_owner, out_terms, out_counts, n_out)
                    continue
                u = _find(table, text, unknown, h, buf, starts, ends, first, n)
                if u < 0:
                    u = n_unknown
                    if u >= unknown_hash.shape[0]:
                        unknown_hash = _doubled(unknown_hash, np.uint64(0))
                        unknown_marks = _doubled(unknown_marks, -1)
                    if 2 * (u + 1) > table.shape[0]:
                        table = _rehash(unknown_hash, u, 2 * table.shape[0])
                    unknown_hash[u] = h
                    text, unknown, n_text = _add_unknown(h, buf, starts, ends, first, n, table, text, unknown, u,
                                                         n_text)
                    n_unknown += 1
                n_out = _count_term(u, -(u + 1), d, serial, unknown_marks, out_owner, out_terms, out_counts, n_out)
    return n_out, serial, text[:n_text], unknown[:n_unknown].copy()


@njit(cache=True, nogil=True)
def _file_terms(slots, term_bytes, at, term_hash, location, ids, blob, lengths):  # pragma: no cover - compiled
    """File term ``ids[k]`` (the k-th run of ``lengths[k]`` bytes of ``blob``) at ``term_bytes[at:]`` and in the table."""
    p = 0
    for k in range(ids.shape[0]):
        t = ids[k]
        n = lengths[k]
        h = _FNV_OFFSET
        for i in range(n):
            b = blob[p + i]
            term_bytes[at + i] = b
            h = (h ^ np.uint64(b)) * _FNV_PRIME
        location[t, 0] = at
        location[t, 1] = n
        term_hash[t] = h
        _insert(slots, h, t)
        p += n
        at += n


@njit(cache=True, nogil=True)
def _unfile_terms(slots, term_hash, location, ids):  # pragma: no cover - compiled
    """Take the filed terms among ``ids`` out of the table; returns (how many, their bytes)."""
    removed = 0
    garbage = 0
    for k in range(ids.shape[0]):
        t = ids[k]
        if location[t, 1] >= 0:
            _delete(slots, term_hash[t], t)
            garbage += location[t, 1]
            location[t, 1] = -1
            removed += 1
    return removed, garbage


def _hash_bytes(data: bytes) -> np.uint64:
    return _fnv(np.frombuffer(data, dtype=np.uint8), 0, len(data), _FNV_OFFSET)


def _encoded(texts: Sequence[str], lowercase: bool) -> tuple[bytes, list[int]]:
    """The bytes the compiled tokenizer reads, and each text's length in them.

    ASCII text goes as it is (the kernel lower-cases and classifies its bytes).
    Other text is lower-cased in C (``str.lower``, as the tokenizer does) and
    goes as UTF-8: the kernel classifies each character by its code point
    (separators, spaces and apostrophes as ``SPLIT_READY`` says), never
    splitting inside one. Lone surrogates pass through (``surrogatepass``), as
    term names are filed the same way.
    """
    joined = "".join(texts)
    if joined.isascii():
        return joined.encode("ascii"), [len(text) for text in texts]
    parts = []
    for text in texts:
        if not text.isascii():
            if lowercase:
                text = text.lower()
            parts.append(text.encode("utf-8", "surrogatepass"))
        else:
            parts.append(text.encode("ascii"))
    return b"".join(parts), [len(part) for part in parts]


def _utf8(names: list[str]) -> tuple[bytes, list[int]]:
    """Names as one UTF-8 blob and each name's length in bytes."""
    joined = "".join(names)
    if joined.isascii():
        return joined.encode("ascii"), [len(name) for name in names]
    parts = [name.encode("utf-8", "surrogatepass") for name in names]
    return b"".join(parts), [len(part) for part in parts]


class TermLexicon:
    """The vocabulary of an :class:`~model.interner.Interner` as a compiled hash table.

    Examples
    --------
    >>> from sgm.model.interner import Interner
    >>> vocabulary = Interner()
    >>> for term in ["cheap", "pills", "cheap pills", "dont", "café"]:
    ...     _ = vocabulary.add(term)
    >>> lexicon = TermLexicon(vocabulary)
    >>> owner, terms, counts = lexicon.known_terms(["Cheap PILLS, cheap! Don't", "nothing", "CAFÉ"],
    ...                                            Tokenizer(ngrams=2))
    >>> [vocabulary.names[t] for t in terms], counts.tolist(), owner.tolist()
    (['cheap', 'pills', 'dont', 'cheap pills', 'café'], [2.0, 1.0, 1.0, 1.0, 1.0], [0, 0, 0, 0, 2])
    """

    def __init__(self, interner) -> None:
        self.interner = interner
        self.serial = 0
        self._last: tuple | None = None  # (text, tokenizer, interner version, its _all_terms result)
        self._build()

    def _build(self) -> None:
        self.interner.changes = []  # the interner logs added and removed ids from now on
        names = self.interner.names
        capacity = 1 << max(4, (3 * max(len(names), 8) - 1).bit_length())  # at most a third full: room to grow
        # what one lookup reads together is stored together (a cache miss each, not one per array):
        # a slot's hash and term id; a term's bytes' start and length; a term's per-document mark and row
        slots = np.zeros((capacity, 2), dtype=np.int64)
        slots[:, 1] = _EMPTY
        self._set_slots(slots)
        self.term_hash = np.zeros(len(names), dtype=np.uint64)
        self._term_arrays(len(names))
        self.term_bytes = np.zeros(16, dtype=np.uint8)
        self.bytes_used = self.used = self.deleted = self.garbage = 0
        self._file(range(len(names)))

    def _file(self, ids) -> None:
        """Add the names of ``ids`` (distinct, not filed) to the table as UTF-8, in one compiled pass."""
        names = self.interner.names
        filed = [t for t in ids if names[t] is not None]
        if not filed:
            return
        blob, lengths = _utf8([names[t] for t in filed])
        self._file_bytes(np.array(filed, dtype=np.int64), np.frombuffer(blob, dtype=np.uint8),
                         np.array(lengths, dtype=np.int64))

    def _file_bytes(self, ids: np.ndarray, blob: np.ndarray, lengths: np.ndarray) -> None:
        if self.bytes_used + len(blob) > len(self.term_bytes):
            bigger = np.zeros(max(2 * len(self.term_bytes), self.bytes_used + len(blob)), dtype=np.uint8)
            bigger[: self.bytes_used] = self.term_bytes[: self.bytes_used]
            self.term_bytes = bigger
        _file_terms(self.slots, self.term_bytes, self.bytes_used, self.term_hash, self.location, ids, blob, lengths)
        self.bytes_used += len(blob)
        self.used += len(ids)

    def _term_arrays(self, size: int, keep: int = 0) -> None:
        """Per term id: its bytes' (start, length) and its (mark, row) for counting, each pair side by side;
        the first ``keep`` rows of each copied from the current arrays (the rest as new)."""
        location, marks = np.zeros((size, 2), dtype=np.int64), np.zeros((size, 2), dtype=np.int64)
        if keep:
            location[:keep] = self.location[:keep]  # whole rows: contiguous copies
            marks[:keep] = self.marks[:keep]
        location[keep:, 1] = -1
        marks[keep:, 0] = -1
        self.location, self.marks = location, marks
        self.term_start, self.term_len = self.location[:, 0], self.location[:, 1]  # views, for reading
        self.mark, self.position = self.marks[:, 0], self.marks[:, 1]

    def _ensure_ids(self, size: int) -> None:
        if size <= len(self.term_len):
            return
        size = max(size, 2 * len(self.term_len))
        old_hash = self.term_hash
        self._term_arrays(size, keep=len(self.term_len))
        self.term_hash = np.zeros(size, dtype=np.uint64)
        self.term_hash[: len(old_hash)] = old_hash

    def _room_for(self, count: int) -> None:
        """Keep the table at most half full (deleted slots included) once ``count`` more terms are filed.

        A fuller table is rehashed from the (hash, term) pairs it holds, in one compiled pass (at most a
        third full afterwards): no name is read back from the interner.
        """
        if 2 * (self.used + self.deleted + count) <= len(self.slot_term):
            return
        capacity = 1 << max(4, (3 * max(self.used + count, 8) - 1).bit_length())
        self._set_slots(_regrown(self.slots, capacity))
        self.deleted = 0

    def _set_slots(self, slots: np.ndarray) -> None:
        self.slots = slots
        self.slot_hash, self.slot_term = slots.view(np.uint64)[:, 0], slots[:, 1]  # views, for reading

    def sync(self) -> None:
        """Apply the interner's changes since the last call."""
        changes = self.interner.changes
        if changes is None:  # the interner stopped logging (too long unread): start afresh
            self._build()
            return
        if not changes:
            return
        self.interner.changes = []
        self._room_for(len(changes))
        self._ensure_ids(len(self.interner.names))
        changed = list(dict.fromkeys(changes))
        # an id that held a term lost it (removed, or reused for another name): unfile, then file what it holds now
        removed, garbage = _unfile_terms(self.slots, self.term_hash, self.location, np.array(changed, dtype=np.int64))
        self.used -= removed
        self.deleted += removed
        self.garbage += garbage
        self._file(changed)
        if self.garbage > max(1 << 16, self.bytes_used // 2):  # dead bytes of removed terms pile up
            self._build()

    def known_terms(self, texts: Sequence[str], tokenizer: Tokenizer,
                    entries: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(owner, term ids, counts)``: each text's terms that are in the vocabulary, with their counts.

        Documents in order; per document the terms in first-occurrence order,
        exactly as ``Counter(tokenizer.tokens(text))`` lists them. With
        ``entries`` (per term id, e.g. how many entries it has) only terms with
        ``entries[t] > 0`` are kept.

        One text is tokenized with its unknown tokens kept (not yet as strings)
        and remembered: learning the same text object next, with the vocabulary
        unchanged (the prequential order: score, then learn), reuses the pass.
        """
        self.sync()
        if len(texts) != 1:
            return self._known(texts, tokenizer, _NO_FILTER if entries is None else entries)
        owner, terms, counts, _, _ = self._tokenized(texts, tokenizer, keep=True)
        keep = _seen(terms, entries)
        return owner[keep], terms[keep], counts[keep]

    def known_terms_and_lengths(self, texts: Sequence[str], tokenizer: Tokenizer,
                                entries: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`known_terms` and each text's number of distinct terms, known or not (TF-IDF's document
        length). Every token is looked up (the pass learning makes), and one text's pass is remembered.

        >>> from sgm.model.interner import Interner
        >>> vocabulary = Interner()
        >>> _ = vocabulary.add("spam")
        >>> owner, terms, counts, lengths = TermLexicon(vocabulary).known_terms_and_lengths(
        ...     ["spam eggs spam", "Eggs ham"], Tokenizer(), np.array([1]))
        >>> owner.tolist(), terms.tolist(), counts.tolist(), lengths.tolist()
        ([0], [0], [2.0], [2, 2])
        """
        self.sync()
        owner, terms, counts, _, _ = self._tokenized(texts, tokenizer, keep=len(texts) == 1)
        lengths = np.bincount(owner, minlength=len(texts))
        keep = _seen(terms, entries)
        return owner[keep], terms[keep], counts[keep], lengths

    def all_terms(self, texts: Sequence[str], tokenizer: Tokenizer) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
        """``(owner, terms, counts, new)``: every term of each text with its count, for learning.

        Documents in order; per document the terms in first-occurrence order,
        exactly as ``Counter(tokenizer.tokens(text))`` lists them. A term in the
        vocabulary is its id; any other is ``-(k + 1)``, standing for the string
        ``new[k]`` (the caller interns ``new`` and substitutes the ids).

        >>> from sgm.model.interner import Interner
        >>> vocabulary = Interner()
        >>> _ = vocabulary.add("spam")
        >>> owner, terms, counts, new = TermLexicon(vocabulary).all_terms(["spam eggs spam", "Eggs"], Tokenizer())
        >>> owner.tolist(), terms.tolist(), counts.tolist(), new
        ([0, 0, 1], [0, -1, -1], [2.0, 1.0, 1.0], ['eggs'])
        """
        self.sync()
        owner, terms, counts, text, unknown = self._tokenized(texts, tokenizer)
        return owner, terms, counts, decode_names(text, unknown)

    def learn_terms(self, texts: Sequence[str], tokenizer: Tokenizer,
                    intern: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(owner, term ids, counts)`` of every term of each text, new terms interned on the way.

        As :meth:`all_terms`, with the new terms given to ``intern`` as UTF-8 bytes and their
        ``(start, length)`` rows (it returns their ids, e.g.
        :meth:`model.state.CountState.intern_encoded`; no Python string is made here)
        and their ids substituted. They are distinct and none is in the
        interner (the table holds every name it has). The new terms are filed in the table
        straight from the bytes the tokenizer saw (one compiled pass), so the
        next lookup need not read them back from the interner.
        """
        self.sync()
        owner, terms, counts, text, unknown = self._tokenized(texts, tokenizer)
        if len(unknown):
            new_ids = intern(text, unknown)
            missing = terms < 0
            terms[missing] = new_ids[-terms[missing] - 1]
            self._file_fresh(new_ids, text, np.ascontiguousarray(unknown[:, 1]))
        return owner, terms, counts

    def remembered_token_count(self, text: str, tokenizer: Tokenizer) -> int | None:
        """Tokens (with repeats: ``len(tokenizer.tokens(text))``) of the pass :meth:`known_terms` remembered for
        this same ``text`` object, or ``None`` when it holds none (it stays remembered for the learn that follows).

        A pool reads its length meta-feature here (:meth:`model.ensemble.Ensemble.lengths`) instead of
        tokenizing the text again. Presence features (``binary``) count each term once: ``None`` for them.

        >>> from sgm.model.interner import Interner
        >>> vocabulary = Interner()
        >>> _ = vocabulary.add("spam")
        >>> lexicon, text = TermLexicon(vocabulary), "Spam, spam and eggs"
        >>> lexicon.remembered_token_count(text, Tokenizer(ngrams=2)) is None
        True
        >>> _ = lexicon.known_terms([text], Tokenizer(ngrams=2))
        >>> lexicon.remembered_token_count(text, Tokenizer(ngrams=2)), len(Tokenizer(ngrams=2).tokens(text))
        (7, 7)
        """
        last = self._last
        if (last is None or last[0] is not text or last[1] != tokenizer or last[2] != self.interner.version
                or tokenizer.binary):
            return None
        return int(last[3][2].sum())  # counts are whole numbers: the sum is exact

    def share_pass(self, text: str, tokenizer: Tokenizer, other: "TermLexicon") -> bool:
        """Give ``other`` (another model's lexicon) the pass of ``text`` this one remembers (:meth:`known_terms`),
        as its own remembered pass, when that is the pass ``other`` would make: the same text object and
        tokenizer, this pass still valid (its interner unchanged since), and the two interners in lockstep
        (:attr:`model.interner.Interner.lineage` followed by both and equal: the same names at the same ids, the
        same free ids).
        ``other`` gets copies (a learn writes the new terms' ids into the arrays, and a state may keep them: two
        models' must not alias). Whether it was given.

        A pool's bases with one tokenizer learn the same documents: their vocabularies stay in lockstep unless
        one drops terms the other keeps (pruning, a memory bound) or was restored on its own.

        >>> from sgm.model.interner import Interner
        >>> first, second = Interner(), Interner()
        >>> for vocabulary in (first, second):
        ...     vocabulary.follow_lineage()
        ...     _ = vocabulary.add("spam")
        >>> lexicon, other, text = TermLexicon(first), TermLexicon(second), "spam and eggs"
        >>> _ = lexicon.known_terms([text], Tokenizer())
        >>> lexicon.share_pass(text, Tokenizer(), other), other.remembered_token_count(text, Tokenizer())
        (True, 3)
        >>> _ = second.add("ham")  # no longer in lockstep
        >>> lexicon.share_pass(text, Tokenizer(), other)
        False
        """
        last = self._last
        if (last is None or last[0] is not text or last[1] != tokenizer or last[2] != self.interner.version
                or self.interner.lineage is None or other.interner.lineage != self.interner.lineage):
            return False
        other._last = (text, tokenizer, other.interner.version, tuple(array.copy() for array in last[3]))
        return True

    def _tokenized(self, texts: Sequence[str], tokenizer: Tokenizer, keep: bool = False):
        """``(owner, terms, counts, text, unknown)`` of :func:`_all_terms` (the caller synced).

        The last single text tokenized with ``keep`` is remembered, valid while the
        interner's version stays: the next call for that same text object takes it
        (the arrays are then the caller's own; nothing is remembered any more).
        """
        last, self._last = self._last, None
        if (last is not None and len(texts) == 1 and last[0] is texts[0] and last[1] == tokenizer
                and last[2] == self.interner.version):
            if keep:
                self._last = last
            return last[3]
        result = self._compiled(texts, tokenizer, collect_unknown=True)
        if keep and len(texts) == 1:
            self._last = (texts[0], tokenizer, self.interner.version, result)
        return result

    def _known(self, texts: Sequence[str], tokenizer: Tokenizer, entries: np.ndarray):
        return self._compiled(texts, tokenizer, entries=entries)

    def _file_fresh(self, ids: np.ndarray, blob: np.ndarray, lengths: np.ndarray) -> None:
        """File terms the interner just added as ``ids`` (the last entries of its change log), from their bytes."""
        changes = self.interner.changes
        count = len(ids)
        if changes is None or len(changes) < count or changes[-count:] != ids.tolist():
            return  # not what was expected: the next sync files them from the interner
        self._room_for(count)
        del changes[-count:]
        self._ensure_ids(self.interner.capacity)  # (not len(names): that would build the pending names)
        self._file_bytes(ids, blob, lengths)

    def _compiled(self, texts: Sequence[str], tokenizer: Tokenizer, collect_unknown: bool = False,
                  entries: np.ndarray | None = None):
        encoded, lengths = _encoded(texts, tokenizer.lowercase)
        data = np.frombuffer(encoded, dtype=np.uint8)
        doc_starts = np.zeros(len(texts) + 1, dtype=np.int64)
        if len(texts) == 1:
            doc_starts[1] = len(data)
        else:
            np.cumsum(lengths, out=doc_starts[1:])
        bound = tokenizer.ngrams * (len(data) // 2 + len(texts)) + 1  # a document of b bytes has <= (b + 1) // 2 words
        out_owner = np.empty(bound, dtype=np.int64)
        out_terms = np.empty(bound, dtype=np.int64)
        out_counts = np.empty(bound, dtype=np.float64)
        args = (data, doc_starts, _CHAR_CLASS, tokenizer.lowercase, tokenizer.max_token_length, tokenizer.ngrams,
                self.slots, self.term_bytes, self.location, self.marks, self.serial, out_owner, out_terms, out_counts)
        if not collect_unknown:
            n, self.serial = _known_terms(*args, entries)
            return out_owner[:n], out_terms[:n], _presence(out_counts[:n], tokenizer)
        n, self.serial, text, unknown = _all_terms(*args)
        return out_owner[:n], out_terms[:n], _presence(out_counts[:n], tokenizer), text, unknown


def _seen(terms: np.ndarray, entries: np.ndarray | None) -> np.ndarray:
    """Which of ``terms`` (ids, or negative for a term not in the vocabulary) are known, and with ``entries``
    (per term id) have ``entries[t] > 0``."""
    keep = terms >= 0
    if entries is not None:
        known = terms[keep]
        seen = np.zeros(len(known), dtype=bool)
        inside = known < len(entries)
        seen[inside] = entries[known[inside]] > 0
        keep[keep] = seen
    return keep


def _presence(counts: np.ndarray, tokenizer: Tokenizer) -> np.ndarray:
    """``counts`` as the tokenizer gives them: each term once (1.0) for presence features."""
    if tokenizer.binary:
        counts[:] = 1.0
    return counts
