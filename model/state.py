"""The count tables a generative text model learns, and the documents behind them.

Everything here is a sum over the *live* documents (learned and not yet
unlearned, forgotten or pruned), so the state always equals what a model
trained from scratch on those documents would hold:

====================  ===================================  =========================
quantity              MODEL.md                             stored as
====================  ===================================  =========================
``ent_count[s]``      ``C(l, n)`` for entry ``s = (l, n)``  float64, by slot
``cls_mass[l]``       ``C(l) = sum_n C(l, n)``             float64, by class id
``cls_docs[l]``       ``N(l)``: documents of ``l``          float64, by class id
``term_mass[n]``      ``C(n) = sum_l C(l, n)``             float64, by term id
``term_df[n]``        ``I_n``: documents containing ``n``   float64, by term id
``total_mass``        ``C``                                float
``total_docs``        ``I``                                float
====================  ===================================  =========================

All of them are in *stored* units of forward decay (see :mod:`model.decay`):
true value = stored value * ``clock.scale()``.

Exactness of unlearning: each document keeps the weights it contributed
(:class:`DocRecord`), so removing it subtracts exactly what was added. Every
entry, class and term also counts the live documents referring to it; when
that count reaches zero the value is reset to exactly 0 and the entry leaves
the tables (floating-point residue can never keep a dead entry alive).
"""
from __future__ import annotations

import heapq
import math
from typing import Callable, Iterable, Sequence

import numpy as np

from .decay import DecayClock

#: Weights below this (in true units) would underflow when rescaled; such documents expire.
_UNDERFLOW = 1e-280


def grow(array: np.ndarray, size: int) -> np.ndarray:
    """Return ``array`` with room for ``size`` items (amortized doubling, zero-filled)."""
    if size <= len(array):
        return array
    bigger = np.zeros(max(size, 2 * len(array), 16), dtype=array.dtype)
    bigger[: len(array)] = array
    return bigger


class Interner:
    """Dense integer ids for names (terms or classes), reusing freed ids.

    >>> names = Interner()
    >>> names.add("spam"), names.add("ham"), names.add("spam")
    (0, 1, 0)
    >>> names.remove(0); names.add("eggs")
    0
    """

    __slots__ = ("ids", "names", "free")

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.names: list[str | None] = []
        self.free: list[int] = []

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def capacity(self) -> int:
        return len(self.names)

    def get(self, name: str) -> int | None:
        return self.ids.get(name)

    def add(self, name: str) -> int:
        index = self.ids.get(name)
        if index is not None:
            return index
        if self.free:
            index = self.free.pop()
            self.names[index] = name
        else:
            index = len(self.names)
            self.names.append(name)
        self.ids[name] = index
        return index

    def remove(self, index: int) -> None:
        name = self.names[index]
        if name is None:
            return
        del self.ids[name]
        self.names[index] = None
        self.free.append(index)


class DocRecord:
    """What one live document contributed: enough to remove it exactly.

    ``terms`` are all distinct term ids of the document (they count in the
    document frequencies); ``weights`` its (possibly TF-IDF) weight per term
    before decay, so the document added ``weights * factor`` to each of its
    classes; ``raw`` the raw occurrence counts (for the Kneser-Ney estimate).
    """

    __slots__ = ("classes", "terms", "weights", "raw", "factor", "ts", "seq")

    def __init__(self, classes: tuple[int, ...], terms: np.ndarray, weights: np.ndarray,
                 raw: np.ndarray, factor: float, ts: float, seq: int) -> None:
        self.classes = classes
        self.terms = terms
        self.weights = weights
        self.raw = raw
        self.factor = factor
        self.ts = ts
        self.seq = seq


#: Weighting callback: (term ids, raw counts) -> weights, read after the document is counted.
Weigher = Callable[[np.ndarray, np.ndarray], np.ndarray]


class CountState:
    """Sparse count tables with exact learn/unlearn and forward decay.

    This class knows nothing about smoothing or scoring; :class:`model.mnb.MNB`
    derives probabilities from it. ``epoch`` increases with every change, which
    is how derived caches (the posting lists) know they are stale.
    """

    def __init__(self, half_life: float | None = None, *, prune_below: float | None = None,
                 max_documents: int | None = None) -> None:
        self.clock = DecayClock(half_life)
        self.prune_below = prune_below
        self.max_documents = max_documents
        self.classes = Interner()
        self.terms = Interner()
        # per class
        self.cls_docs = np.zeros(0)
        self.cls_mass = np.zeros(0)
        self.cls_refs = np.zeros(0, dtype=np.int64)
        self.cls_entries = np.zeros(0, dtype=np.int64)
        # per term
        self.term_mass = np.zeros(0)
        self.term_df = np.zeros(0)
        self.term_refs = np.zeros(0, dtype=np.int64)
        self.term_raw = np.zeros(0)
        self.term_entries = np.zeros(0, dtype=np.int64)  # classes holding the term
        self.term_slots: list[list[int]] = []
        # per (class, term) entry, addressed by slot
        self.ent_class = np.zeros(0, dtype=np.int32)
        self.ent_term = np.zeros(0, dtype=np.int32)
        self.ent_count = np.zeros(0)
        self.ent_refs = np.zeros(0, dtype=np.int32)
        self.ent_free: list[int] = []
        self.ent_used = 0  # high-water mark of slots
        self.slot_of: dict[int, int] = {}  # (term << 32 | class) -> slot
        # totals
        self.total_mass = 0.0
        self.total_docs = 0.0
        self.class_docs_total = 0.0  # sum_l N(l): differs from I when documents carry several classes
        self.n_docs = 0
        self.n_vocab = 0  # terms with at least one entry: V of the uniform background
        self.n1 = 0  # terms whose raw count is exactly 1 (Kneser-Ney estimate)
        self.n2 = 0
        # documents
        self.docs: dict[str, DocRecord] = {}
        self.seq = 0
        self._expiry: list[tuple[float, int, str]] = []
        self.epoch = 0
        self.pruned_documents = 0
        self.pruned_entries = 0
        self.expired_documents = 0

    # ------------------------------------------------------------------ sizes
    @property
    def n_entries(self) -> int:
        return len(self.slot_of)

    def _track_expiry(self) -> bool:
        return self.prune_below is not None or self.max_documents is not None

    # ------------------------------------------------------------- interning
    def _term_ids(self, term_keys: Sequence[str]) -> np.ndarray:
        add = self.terms.add
        ids = [add(t) for t in term_keys]
        cap = self.terms.capacity
        if cap > len(self.term_mass):
            self.term_mass = grow(self.term_mass, cap)
            self.term_df = grow(self.term_df, cap)
            self.term_refs = grow(self.term_refs, cap)
            self.term_raw = grow(self.term_raw, cap)
            self.term_entries = grow(self.term_entries, cap)
        while len(self.term_slots) < cap:
            self.term_slots.append([])
        return np.array(ids, dtype=np.int64)

    def _class_ids(self, class_keys: Iterable[str]) -> tuple[int, ...]:
        ids = tuple(self.classes.add(c) for c in class_keys)
        cap = self.classes.capacity
        if cap > len(self.cls_docs):
            self.cls_docs = grow(self.cls_docs, cap)
            self.cls_mass = grow(self.cls_mass, cap)
            self.cls_refs = grow(self.cls_refs, cap)
            self.cls_entries = grow(self.cls_entries, cap)
        return ids

    def _new_entry(self, key: int, class_id: int, term_id: int) -> int:
        if self.ent_free:
            slot = self.ent_free.pop()
        else:
            slot = self.ent_used
            self.ent_used += 1
            if slot >= len(self.ent_count):
                size = slot + 1
                self.ent_class = grow(self.ent_class, size)
                self.ent_term = grow(self.ent_term, size)
                self.ent_count = grow(self.ent_count, size)
                self.ent_refs = grow(self.ent_refs, size)
        self.ent_class[slot] = class_id
        self.ent_term[slot] = term_id
        self.ent_count[slot] = 0.0
        self.ent_refs[slot] = 0
        self.slot_of[key] = slot
        self.term_slots[term_id].append(slot)
        self.cls_entries[class_id] += 1
        if self.term_entries[term_id] == 0:
            self.n_vocab += 1
        self.term_entries[term_id] += 1
        return slot

    def _free_entry(self, slot: int) -> None:
        class_id = int(self.ent_class[slot])
        term_id = int(self.ent_term[slot])
        del self.slot_of[(term_id << 32) | class_id]
        self.term_slots[term_id].remove(slot)
        self.ent_count[slot] = 0.0
        self.ent_refs[slot] = 0
        self.ent_free.append(slot)
        self.cls_entries[class_id] -= 1
        if self.cls_entries[class_id] == 0:
            self.cls_mass[class_id] = 0.0  # exactly: no residue from rounding
        self.term_entries[term_id] -= 1
        if self.term_entries[term_id] == 0:
            self.n_vocab -= 1
            self.term_mass[term_id] = 0.0
        if not self.slot_of:
            self.total_mass = 0.0

    # ------------------------------------------------------------ learning
    def add_document(self, doc_id: str, class_keys: Sequence[str], term_keys: Sequence[str],
                     raw_counts: Sequence[float], ts: float | None, weigh: Weigher | None) -> DocRecord | None:
        """Count one document under each of ``class_keys``.

        ``weigh`` maps (term ids, raw counts) to the weights actually learned,
        called after the document is counted in the document frequencies (so a
        document learned alone gets the IDF in force once it is counted).
        Returns the stored record, or ``None`` if the document is already too
        old to weigh anything (it underflows under decay).
        """
        assert doc_id not in self.docs, "caller removes an existing id first"
        half_lives = self.clock.observe(ts)
        if half_lives:
            self._rebase(half_lives)
        factor = self.clock.factor(ts)
        if factor * self.clock.scale() < _UNDERFLOW:
            self.expired_documents += 1
            return None
        record = self._count_document(doc_id, class_keys, term_keys, raw_counts, ts, factor)
        if weigh is not None:
            record.weights = weigh(record.terms, record.raw)
        self._add_contributions(record, +1)
        self.epoch += 1
        self._prune()
        return record

    def add_documents(self, items: Sequence[tuple[str, Sequence[str], Sequence[str], Sequence[float], float | None]],
                      weigh: Weigher | None) -> list[DocRecord | None]:
        """Learn a batch at once: every document is counted before any is weighted.

        With IDF weighting the whole batch then sees the IDF after counting the
        batch, so a batch fit from an empty model equals batch TF-IDF. Ids must
        be new and distinct (the caller resolves re-learning first).
        """
        records: list[DocRecord | None] = []
        for doc_id, class_keys, term_keys, raw_counts, ts in items:
            half_lives = self.clock.observe(ts)
            if half_lives:
                self._rebase(half_lives)
        for doc_id, class_keys, term_keys, raw_counts, ts in items:
            factor = self.clock.factor(ts)
            if factor * self.clock.scale() < _UNDERFLOW:
                self.expired_documents += 1
                records.append(None)
                continue
            records.append(self._count_document(doc_id, class_keys, term_keys, raw_counts, ts, factor))
        for record in records:
            if record is not None:
                if weigh is not None:
                    record.weights = weigh(record.terms, record.raw)
                self._add_contributions(record, +1)
        self.epoch += 1
        self._prune()
        return records

    def remove_document(self, doc_id: str) -> DocRecord | None:
        """Unlearn a live document exactly; ``None`` if the id is not live."""
        record = self.docs.pop(doc_id, None)
        if record is None:
            return None
        self._add_contributions(record, -1)
        self._uncount_document(record)
        self.epoch += 1
        return record

    def _count_document(self, doc_id: str, class_keys: Sequence[str], term_keys: Sequence[str],
                        raw_counts: Sequence[float], ts: float | None, factor: float) -> DocRecord:
        terms = self._term_ids(term_keys)
        raw = np.asarray(raw_counts, dtype=np.float64)
        classes = self._class_ids(class_keys)
        self.term_df[terms] += factor
        self.term_refs[terms] += 1
        old_raw = self.term_raw[terms]
        new_raw = old_raw + raw
        self.term_raw[terms] = new_raw
        self._update_kn(old_raw, new_raw)
        self.total_docs += factor
        self.n_docs += 1
        # raw counts double as the weights until a weigher replaces them
        for c in classes:
            self.cls_docs[c] += factor
            self.cls_refs[c] += 1
            self.class_docs_total += factor
        self.seq += 1
        record = DocRecord(classes, terms, raw, raw, factor, self.clock.event_time(ts), self.seq)
        self.docs[doc_id] = record
        if self._track_expiry():
            heapq.heappush(self._expiry, (factor, self.seq, doc_id))
        return record

    def _uncount_document(self, record: DocRecord) -> None:
        terms, factor = record.terms, record.factor
        df = self.term_df[terms] - factor
        refs = self.term_refs[terms] - 1
        old_raw = self.term_raw[terms]
        new_raw = old_raw - record.raw
        dead = refs == 0
        df[dead] = 0.0
        new_raw[dead] = 0.0
        np.maximum(df, 0.0, out=df)
        self.term_df[terms] = df
        self.term_refs[terms] = refs
        self.term_raw[terms] = new_raw
        self._update_kn(old_raw, new_raw)
        for t in terms[dead].tolist():
            assert not self.term_slots[t], "a term without documents has no entries"
            self.term_mass[t] = 0.0
            self.terms.remove(t)
        self.n_docs -= 1
        self.total_docs = 0.0 if self.n_docs == 0 else max(self.total_docs - factor, 0.0)
        for c in record.classes:
            self.cls_refs[c] -= 1
            self.class_docs_total -= factor
            if self.cls_refs[c] == 0:
                assert self.cls_entries[c] == 0
                self.cls_docs[c] = 0.0
                self.cls_mass[c] = 0.0
                self.classes.remove(c)
            else:
                self.cls_docs[c] = max(self.cls_docs[c] - factor, 0.0)
        if self.n_docs == 0:
            self.class_docs_total = 0.0
            self.total_mass = 0.0

    def _update_kn(self, old_raw: np.ndarray, new_raw: np.ndarray) -> None:
        self.n1 += int(np.count_nonzero(new_raw == 1.0)) - int(np.count_nonzero(old_raw == 1.0))
        self.n2 += int(np.count_nonzero(new_raw == 2.0)) - int(np.count_nonzero(old_raw == 2.0))

    def _add_contributions(self, record: DocRecord, sign: int) -> None:
        weights, terms = record.weights, record.terms
        nonzero = weights != 0.0
        if not nonzero.all():  # zero weights (IDF 0) make no entries
            weights, terms = weights[nonzero], terms[nonzero]
        contrib = weights * record.factor
        if len(terms) == 0:
            return
        mass = float(contrib.sum())
        term_list = terms.tolist()
        for c in record.classes:
            keys = [(t << 32) | c for t in term_list]
            if sign > 0:
                slots = list(map(self.slot_of.get, keys))
                if None in slots:
                    for i, slot in enumerate(slots):
                        if slot is None:
                            slots[i] = self._new_entry(keys[i], c, term_list[i])
                index = np.array(slots, dtype=np.int64)
                self.ent_count[index] += contrib
                self.ent_refs[index] += 1
                self.cls_mass[c] += mass
                self.term_mass[terms] += contrib
                self.total_mass += mass
            else:
                index = np.fromiter(map(self.slot_of.__getitem__, keys), dtype=np.int64, count=len(keys))
                counts = self.ent_count[index] - contrib
                refs = self.ent_refs[index] - 1
                np.maximum(counts, 0.0, out=counts)
                counts[refs == 0] = 0.0
                self.ent_count[index] = counts
                self.ent_refs[index] = refs
                for slot in index[refs == 0].tolist():
                    self._free_entry(slot)
                self.cls_mass[c] = max(self.cls_mass[c] - mass, 0.0)
                term_mass = self.term_mass[terms] - contrib
                np.maximum(term_mass, 0.0, out=term_mass)
                self.term_mass[terms] = term_mass
                self.total_mass = max(self.total_mass - mass, 0.0)

    # ----------------------------------------------------- decay and memory
    def _rebase(self, half_lives: int) -> None:
        """Move the decay origin forward by whole half-lives (exact rescaling)."""
        shrink = 2.0 ** -half_lives
        for doc_id in [d for d, r in self.docs.items() if r.factor * shrink < _UNDERFLOW]:
            self.remove_document(doc_id)
            self.expired_documents += 1
        n = self.ent_used
        for name in ("cls_docs", "cls_mass", "term_mass", "term_df"):
            setattr(self, name, np.ldexp(getattr(self, name), -half_lives))
        self.ent_count[:n] = np.ldexp(self.ent_count[:n], -half_lives)
        self.total_mass = math.ldexp(self.total_mass, -half_lives)
        self.total_docs = math.ldexp(self.total_docs, -half_lives)
        self.class_docs_total = math.ldexp(self.class_docs_total, -half_lives)
        for record in self.docs.values():
            record.factor = math.ldexp(record.factor, -half_lives)
        self._expiry = [(math.ldexp(f, -half_lives), s, d) for f, s, d in self._expiry]
        self.clock.shift_origin(half_lives)
        self.epoch += 1

    def _prune(self) -> None:
        """Apply the memory bound: drop documents too decayed or too many (oldest first)."""
        if not self._track_expiry():
            return
        scale = self.clock.scale()
        while self._expiry:
            factor, seq, doc_id = self._expiry[0]
            record = self.docs.get(doc_id)
            if record is None or record.seq != seq:
                heapq.heappop(self._expiry)  # stale heap item: already removed or re-learned
                continue
            too_light = self.prune_below is not None and factor * scale < self.prune_below
            too_many = self.max_documents is not None and self.n_docs > self.max_documents
            if not (too_light or too_many):
                break
            heapq.heappop(self._expiry)
            before = self.n_entries
            self.remove_document(doc_id)
            self.pruned_documents += 1
            self.pruned_entries += before - self.n_entries

    def rebuild_expiry(self) -> None:
        self._expiry = []
        if self._track_expiry():
            self._expiry = [(r.factor, r.seq, d) for d, r in self.docs.items()]
            heapq.heapify(self._expiry)

    # ------------------------------------------------------------- reading
    def kneser_ney_delta(self) -> float:
        """``n1 / (n1 + 2 n2)`` over raw term counts of the live documents (0.5 when undefined)."""
        if self.n1 + self.n2 == 0:
            return 0.5
        value = self.n1 / (self.n1 + 2 * self.n2)
        return min(max(value, 1e-6), 1.0)

    def active_classes(self) -> np.ndarray:
        """Ids of classes with at least one live document."""
        return np.flatnonzero(self.cls_refs[: self.classes.capacity] > 0)

