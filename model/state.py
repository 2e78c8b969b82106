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
true value = stored value * ``clock.scale()``. Entries are compensated sums
(:class:`model.arrays.CompensatedArray`); the per-class, per-term and model
totals are exact (:class:`model.arrays.ExactArray`, :class:`model.arrays.ExactSum`):
each reads as the correctly rounded sum of its live documents' contributions,
equal bit for bit to a from-scratch re-summation (:meth:`CountState.resum_totals`)
whatever was learned and unlearned before. Read them with ``.get(index)`` / ``.value``.

Exactness of unlearning: each document keeps the weights it contributed
(:class:`DocRecord`), so removing it subtracts exactly what was added. Every
entry, class and term also counts the live documents referring to it; when
that count reaches zero the value is reset to exactly 0 and the entry leaves
the tables (floating-point residue can never keep a dead entry alive).
"""
from __future__ import annotations

import contextlib
import heapq
import itertools
import math
from typing import Any, Callable, Iterable, Iterator, Protocol, Sequence

import numpy as np

from .decay import REBASE_AFTER_HALF_LIVES, DecayClock
from .arena import TermArena
from .arrays import SPILL, CompensatedArray, ExactArray, ExactSum, distinct_sorted, grow
from .interner import Interner, encoded_characters
from .loops.entries import DONE, JOURNAL_FILL, NEED_ENTRIES, add_entries, count_terms, remove_entries
from .resummation import resum_totals

#: Weights below this (in true units) would underflow when rescaled; such documents expire.
EXPIRY_WEIGHT = 1e-280

#: What the memory bound in bytes (:meth:`CountState.approx_bytes`) charges beyond the state's arrays,
#: measured on this machine (docs/RELIABILITY.md, "Bounded memory"): a live document (its record, id,
#: three array headers, dictionary and heap slots), each of its terms (id, weight, raw count), a
#: term (name object, two dictionary slots, the vocabulary table, caches) plus each byte of its name,
#: and an entry (posting weights and discount caches of the scoring side).
DOC_BYTES, DOC_TERM_BYTES, TERM_BYTES, TERM_NAME_BYTES, ENTRY_BYTES = 900, 24, 300, 2, 48


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


#: Weighting callback: (term ids, raw counts, distinct terms of each term's document) -> weights,
#: over a batch's concatenated documents, called after the batch is counted.
Weigher = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


class DocumentObserver(Protocol):
    """Something kept in step with the live documents (TDM's document nodes, :mod:`model.document_nodes`).

    Every way a document enters (learning, one or a batch) or leaves
    (unlearning, forgetting, the memory bound, decay underflow) is reported.
    """

    def documents_added(self, state: "CountState", items: Sequence[tuple], records: list["DocRecord | None"]) -> None:
        """The state learned ``items`` (as given to :meth:`CountState.add_documents`); ``records[i]`` is the
        record of ``items[i]``, or ``None`` if it was not learned (it underflowed under decay)."""

    def document_removed(self, state: "CountState", doc_id: str) -> None:
        """The live document ``doc_id`` left the state."""


class CountState:
    """Sparse count tables with exact learn/unlearn and forward decay.

    This class knows nothing about smoothing or scoring; :class:`model.label_model.LabelModel`
    derives probabilities from it. An ``observer`` (:class:`DocumentObserver`)
    hears of every document that enters or leaves. ``epoch`` increases with every change, which
    is how derived caches (the posting lists) know they are stale.
    """

    def __init__(self, half_life: float | None = None, *, prune_below: float | None = None,
                 max_documents: int | None = None, max_bytes: int | None = None) -> None:
        self.clock = DecayClock(half_life)
        self.prune_below = prune_below
        self.max_documents = max_documents
        self.max_bytes = max_bytes
        #: Bytes per term of a document beyond DOC_TERM_BYTES that a family keeps (TDM's document postings).
        self.family_doc_term_bytes = 0
        #: Bytes per term id a family keeps beside the state (the tied term weights' arrays).
        self.family_term_bytes = 0
        #: Per-term-id arrays kept beside the state, by name: each has ``reserve(capacity)`` (room for new ids) and
        #: ``release(term)`` (an id given back), called as the state grows and releases term ids.
        self.term_followers: dict[str, Any] = {}
        self.doc_terms = 0  # terms summed over the live documents (their records' lengths)
        self.term_name_bytes = 0  # characters of the live terms' names
        self.classes = Interner()
        self.terms = Interner()
        # per class
        self.cls_docs = ExactArray()
        self.cls_mass = ExactArray()
        self.cls_refs = np.zeros(0, dtype=np.int64)
        self.cls_entries = np.zeros(0, dtype=np.int64)
        # per term
        self.term_mass = ExactArray()
        self.term_df = ExactArray()
        self.term_refs = np.zeros(0, dtype=np.int64)
        self.term_raw = np.zeros(0)
        self.arena = TermArena()  # term -> its entries; arena.length[n] = classes holding n
        # per (class, term) entry, addressed by slot
        self.ent_class = np.zeros(0, dtype=np.int32)
        self.ent_term = np.zeros(0, dtype=np.int32)
        self.ent_count = CompensatedArray()
        self.ent_refs = np.zeros(0, dtype=np.int32)
        self.free_stack = np.zeros(0, dtype=np.int64)  # freed slots, reused last-freed first
        self.free_top = 0
        self.ent_used = 0  # high-water mark of slots
        # slots changed since the last changed_entries() (the compiled entry loops note them), for
        # caches that follow the entries incrementally (a discount's per-label totals)
        self.journal = np.zeros(1024, dtype=np.int64)
        self.journal_fill = 0
        self.journal_reader: object = None
        # totals
        self.total_mass = ExactSum()
        self.total_docs = ExactSum()
        self.class_docs_total = ExactSum()  # sum_l N(l): differs from I when documents carry several classes
        self.n_docs = 0
        self.n_vocab = 0  # terms with at least one entry: V of the uniform background
        self.n1 = 0  # terms whose raw count is exactly 1 (Kneser-Ney estimate)
        self.n2 = 0
        # documents
        self.docs: dict[str, DocRecord] = {}
        self.seq = 0
        self._expiry: list[tuple[float, int, str]] = []
        self._active: tuple[int, np.ndarray] | None = None
        self.epoch = 0
        self.class_version = 0  # changes only when a class appears or leaves
        self.rebases = 0  # times the decay origin moved (every stored value was rescaled)
        #: Class ids whose document weight changed, for incremental consumers; None = not tracked.
        self.touched_classes: set[int] | None = None
        #: While a caller holds interned term ids (see :meth:`holding_term_ids`): terms whose last
        #: document left, released only when the hold ends so that no id is reused meanwhile.
        self._held_dead_terms: list[int] | None = None
        self.pruned_documents = 0
        self.pruned_entries = 0
        self.expired_documents = 0
        self.observer: DocumentObserver | None = None

    # ------------------------------------------------------------------ sizes
    @property
    def n_entries(self) -> int:
        """Live (class, term) entries, i.e. postings."""
        return self.ent_used - self.free_top

    @property
    def ent_free(self) -> list[int]:
        return self.free_stack[: self.free_top].tolist()

    def tracks_expiry(self) -> bool:
        return self.prune_below is not None or self.max_documents is not None or self.max_bytes is not None

    def approx_bytes(self) -> int:
        """The memory the model holds, in bytes, as the memory bound counts it (``O(1)``).

        The state's arrays at their allocated size, plus per live document,
        document term, term, name character and entry what its Python objects
        and the scoring caches cost (``DOC_BYTES`` ... ``ENTRY_BYTES``).
        """
        arena = self.arena
        arrays = (self.cls_refs.nbytes + self.cls_entries.nbytes + self.term_refs.nbytes + self.term_raw.nbytes
                  + self.ent_class.nbytes + self.ent_term.nbytes + self.ent_refs.nbytes + self.free_stack.nbytes
                  + arena.slot.nbytes + arena.cls.nbytes + arena.count.nbytes + arena.start.nbytes + arena.length.nbytes
                  + arena.capacity.nbytes)
        for sums in (self.cls_docs, self.cls_mass, self.term_mass, self.term_df, self.ent_count):
            arrays += sums.hi.nbytes + sums.lo.nbytes
        return int(arrays + DOC_BYTES * self.n_docs + (DOC_TERM_BYTES + self.family_doc_term_bytes) * self.doc_terms
                   + (TERM_BYTES + self.family_term_bytes) * len(self.terms) + TERM_NAME_BYTES * self.term_name_bytes
                   + ENTRY_BYTES * self.n_entries)

    def _release_term(self, t: int) -> None:
        """Give a term without documents its id back (and its arena region)."""
        self.term_name_bytes -= len(self.terms.names[t])
        self.terms.remove(t)
        self.arena.release(t)
        for follower in self.term_followers.values():
            follower.release(t)

    # ------------------------------------------------------------- interning
    def intern_terms(self, term_keys: list[str], added: list[int] | None = None, absent: bool = False) -> np.ndarray:
        """Term ids of ``term_keys``, adding new terms in first-seen order (their ids listed in ``added``).

        New keys must be strings (``TypeError`` otherwise, and nothing is
        added); keys already interned are strings by construction. With
        ``absent`` the caller guarantees distinct strings none of which is
        interned (the compiled lexicon's unknown tokens): they are added
        without being looked up.
        """
        if absent:
            ids = self.terms.add_new(term_keys)
            if added is not None:
                added.extend(ids.tolist())
            self.term_name_bytes += sum(map(len, term_keys))
        else:
            new: list[str] = []
            ids = self.terms.ids_of(term_keys, new, added)
            if new:
                self.term_name_bytes += sum(map(len, new))
        self._grow_term_arrays()
        return ids

    def intern_encoded(self, blob: np.ndarray, bounds: np.ndarray, added: list[int] | None = None) -> np.ndarray:
        """:meth:`intern_terms` with ``absent`` for new terms given as UTF-8 bytes (the compiled lexicon's):
        term ``k`` is ``blob[start : start + length]``, ``(start, length) = bounds[k]``; their strings are
        built when first asked for (:meth:`model.interner.Interner.add_new_encoded`)."""
        ids = self.terms.add_new_encoded(blob, bounds)
        if added is not None:
            added.extend(ids.tolist())
        self.term_name_bytes += encoded_characters(blob)
        self._grow_term_arrays()
        return ids

    def _grow_term_arrays(self) -> None:
        cap = self.terms.capacity
        if cap > len(self.term_refs):
            self.term_mass.grow(cap)
            self.term_df.grow(cap)
            self.term_refs = grow(self.term_refs, cap)
            self.term_raw = grow(self.term_raw, cap)
            self.arena.reserve_terms(cap)
            for follower in self.term_followers.values():
                follower.reserve(len(self.term_refs))

    @contextlib.contextmanager
    def holding_term_ids(self) -> Iterator[list[int]]:
        """Keep every term id valid while the caller uses ids from :meth:`intern_terms`.

        Inside, terms whose last document leaves (unlearning, expiry) keep their
        ids; on exit they are released, as are terms interned inside (ids
        appended to the yielded list) that no document ended up holding.
        """
        if self._held_dead_terms is not None:  # nested: the outer hold releases
            yield []
            return
        self._held_dead_terms, added = [], []
        try:
            yield added
        finally:
            # (ids stay valid inside: a term released there would be held, not freed)
            candidates = np.concatenate([np.array(self._held_dead_terms, dtype=np.int64),
                                         np.array(added, dtype=np.int64)])
            self._held_dead_terms = None
            if len(candidates):
                ids = distinct_sorted(candidates)
                for t in ids[(self.term_refs[ids] == 0) & (self.arena.length[ids] == 0)].tolist():
                    if self.terms.names[t] is not None:
                        self._release_term(t)

    def _class_ids(self, class_keys: Iterable[str]) -> tuple[int, ...]:
        ids = tuple(map(self.classes.ids.get, class_keys))
        if None not in ids:  # the common case: known classes
            return ids
        known = len(self.classes)
        ids = tuple(self.classes.add(c) for c in class_keys)
        if len(self.classes) != known:
            self.class_version += 1
        cap = self.classes.capacity
        if cap > len(self.cls_refs):
            self.cls_docs.grow(cap)
            self.cls_mass.grow(cap)
            self.cls_refs = grow(self.cls_refs, cap)
            self.cls_entries = grow(self.cls_entries, cap)
        return ids

    def _class_ids_of(self, class_keys_per_doc: list[Sequence[str]]) -> list[tuple[int, ...]]:
        """:meth:`_class_ids` of each document's class keys (looked up once per distinct key tuple)."""
        memo: dict[tuple[str, ...], tuple[int, ...]] = {}
        out = []
        for keys in class_keys_per_doc:
            keys = keys if type(keys) is tuple else tuple(keys)
            ids = memo.get(keys)
            if ids is None:
                ids = memo[keys] = self._class_ids(keys)
            out.append(ids)
        return out

    def _counters(self) -> np.ndarray:
        return np.array([self.ent_used, self.free_top, self.arena.used, self.arena.garbage, self.n_vocab,
                         self.journal_fill], dtype=np.int64)

    def _take_counters(self, counters: np.ndarray) -> None:
        (self.ent_used, self.free_top, self.arena.used, self.arena.garbage, self.n_vocab,
         self.journal_fill) = counters.tolist()  # Python ints in one call

    def _grow_entries(self, counters: np.ndarray) -> None:
        size = max(16, 2 * len(self.ent_refs))
        self.ent_class = grow(self.ent_class, size)
        self.ent_term = grow(self.ent_term, size)
        self.ent_count.grow(size)
        self.ent_refs = grow(self.ent_refs, size)
        self.free_stack = grow(self.free_stack, size)
        dropped = counters[JOURNAL_FILL] > len(self.journal)
        self.journal = grow(self.journal, size // 4)  # more changes than that: a pass over every entry is as cheap
        if dropped:  # slots past the old end were not noted: the longer journal must not pass for complete
            counters[JOURNAL_FILL] = len(self.journal) + 1

    def _add_entries(self, terms: np.ndarray, classes: np.ndarray, values: np.ndarray) -> None:
        """Add ``values`` to the (term, class) entries in order, creating missing ones (compiled)."""
        arena = self.arena
        counters = self._counters()
        at = 0
        while True:
            status, at = add_entries(terms, classes, values, at, arena.slot, arena.cls, arena.count, arena.start,
                                     arena.length, arena.capacity, self.ent_class, self.ent_term, self.ent_count.hi,
                                     self.ent_count.lo, self.ent_refs, self.free_stack, self.term_mass.hi,
                                     self.term_mass.lo, self.cls_entries, counters, *SPILL.reserve(len(terms)),
                                     self.journal)
            self.term_mass.take_spill(SPILL, terms)
            if status == DONE:
                break
            if status == NEED_ENTRIES:
                self._grow_entries(counters)
            else:
                arena.grow_arena(max(16, 2 * len(arena.slot)))
        self._take_counters(counters)
        if arena.garbage > 4096 and arena.garbage > arena.used // 2:
            arena.compact()

    # ------------------------------------------------------------ learning
    def add_document(self, doc_id: str, class_keys: Sequence[str], term_keys: list[str], raw_counts: np.ndarray,
                     ts: float | None, weigh: Weigher | None) -> DocRecord | None:
        """Count one document under each of ``class_keys`` (a batch of one).

        ``weigh`` maps (term ids, raw counts) to the weights actually learned,
        called after the document is counted in the document frequencies (so a
        document learned alone gets the IDF in force once it is counted).
        Returns the stored record, or ``None`` if the document is already too
        old to weigh anything (it underflows under decay).
        """
        return self.add_documents([(doc_id, class_keys, term_keys, raw_counts, ts)], weigh)[0]

    def add_documents(self, items: Sequence[tuple[str, Sequence[str], list[str], np.ndarray, float | None]],
                      weigh: Weigher | None) -> list[DocRecord | None]:
        """Learn a batch: every document is counted before any is weighted.

        ``items`` are ``(doc id, class keys, distinct terms, raw counts, ts)``,
        the terms as keys or as ids from :meth:`intern_terms`.
        With IDF weighting the whole batch sees the IDF after counting the
        batch, so a batch fit from an empty model equals batch TF-IDF. Without
        it the result is bitwise the same as adding the documents one by one:
        every sum is accumulated in document order. Ids must be new and
        distinct (the caller resolves re-learning first).
        """
        records = self._learn_batch(items, weigh)
        if self.observer is not None:
            self.observer.documents_added(self, items, records)
        return records

    def _learn_batch(self, items: Sequence[tuple], weigh: Weigher | None) -> list[DocRecord | None]:
        clock = self.clock
        split = self._first_rebase(items)
        if split is not None and len(items) > 1:
            # Learn what comes before the rebase with the old origin, as one by one would; the item
            # that moves the origin goes alone, so a later rebase cannot change how its factor rounds.
            cut = max(split, 1)
            return self.add_documents(items[:cut], weigh) + self.add_documents(items[cut:], weigh)
        if clock.half_life is None:  # no decay: every factor is 1, nothing expires or rebases
            times = clock.observe_all([item[4] for item in items])
            kept, factors = range(len(items)), [1.0] * len(items)
        else:
            times, kept, factors = [], [], []  # event times; the documents not already underflowed
            for position, item in enumerate(items):
                half_lives = clock.observe(item[4])
                if half_lives:
                    self._rebase(half_lives)
                t = clock.event_time(item[4])  # ts None: the model time at this document
                times.append(t)
                factor = clock.factor(t)
                if factor * clock.scale() < EXPIRY_WEIGHT:
                    self.expired_documents += 1
                else:
                    kept.append(position)
                    factors.append(factor)
        records: list[DocRecord | None] = [None] * len(items)
        if not kept:
            return records
        if len(kept) == 1:
            records[kept[0]] = self._add_one(items[kept[0]], factors[0], times[kept[0]], weigh)
            return records
        batch = items if len(kept) == len(items) else [items[p] for p in kept]
        n_batch = len(batch)
        single = n_batch == 1  # one document: its terms are distinct
        # -- count: document frequencies, raw counts (Kneser-Ney), documents per class
        lengths = np.fromiter(map(len, (item[2] for item in batch)), dtype=np.int64, count=n_batch)
        if isinstance(batch[0][2], np.ndarray):  # interned by the caller: join the id arrays
            terms = batch[0][2] if single else np.concatenate([item[2] for item in batch])
        else:
            terms = self.intern_terms(batch[0][2] if single else [t for item in batch for t in item[2]])
        raw = (np.asarray(batch[0][3], dtype=np.float64) if single
               else np.concatenate([np.asarray(item[3], dtype=np.float64) for item in batch]))
        factor_of = np.array(factors)
        owner = np.repeat(np.arange(n_batch), lengths)  # document of each term position
        term_factor = factor_of[owner]
        d1, d2 = count_terms(terms, term_factor, raw, self.term_df.hi, self.term_df.lo, self.term_refs, self.term_raw,
                             *SPILL.reserve(len(terms)))
        self.term_df.take_spill(SPILL, terms)
        self.n1 += d1
        self.n2 += d2
        # one (document, class) pair per class a document counts under, in document order
        doc_classes = self._class_ids_of([item[1] for item in batch])
        pair_class = np.fromiter(itertools.chain.from_iterable(doc_classes), dtype=np.int64)
        pair_doc = (np.arange(n_batch) if len(pair_class) == n_batch
                    else np.repeat(np.arange(n_batch), np.fromiter(map(len, doc_classes), dtype=np.int64)))
        pair_factor = factor_of[pair_doc]
        self.total_docs.add_many(factor_of)
        self.class_docs_total.add_many(pair_factor)
        self.n_docs += n_batch
        self.doc_terms += len(terms)
        if self.touched_classes is not None:
            self.touched_classes.update(pair_class.tolist())
        self.cls_docs.add(pair_class, pair_factor)  # in document order
        np.add.at(self.cls_refs, pair_class, 1)
        # -- weigh (after counting the whole batch), then add the contributions
        weights = raw if weigh is None else weigh(terms, raw, lengths[owner])
        ends = np.cumsum(lengths).tolist()
        begins = [0] + ends[:-1]
        first_seq = self.seq + 1
        self.seq += n_batch
        new_records = [DocRecord(classes, terms[begin:end], weights[begin:end], raw[begin:end], factor, times[p], seq)
                       for classes, begin, end, factor, p, seq in zip(doc_classes, begins, ends, factors, kept,
                                                                       range(first_seq, self.seq + 1))]
        self.docs.update(zip([item[0] for item in batch], new_records))
        if self.tracks_expiry():
            for item, record in zip(batch, new_records):
                heapq.heappush(self._expiry, (record.factor, record.seq, item[0]))
        for position, record in zip(kept, new_records):
            records[position] = record
        self._add_contributions(terms, weights * term_factor, owner, lengths, begins, pair_doc, pair_class, single)
        self.epoch += 1
        self._prune()
        return records

    def _add_one(self, item: tuple, factor: float, t: float, weigh: Weigher | None) -> DocRecord:
        """:meth:`add_documents` for one document, bit for bit, with fewer array operations."""
        doc_id, class_keys, term_keys, raw_counts, _ = item
        terms = term_keys if isinstance(term_keys, np.ndarray) else self.intern_terms(term_keys)
        raw = np.asarray(raw_counts, dtype=np.float64)
        n_terms = len(terms)
        term_factor = np.full(n_terms, factor)
        d1, d2 = count_terms(terms, term_factor, raw, self.term_df.hi, self.term_df.lo, self.term_refs, self.term_raw,
                             *SPILL.reserve(n_terms))
        self.term_df.take_spill(SPILL, terms)
        self.n1 += d1
        self.n2 += d2
        classes = self._class_ids(class_keys if type(class_keys) is tuple else tuple(class_keys))
        # (class ids distinct: one value per index, so the scalar exact additions below leave what one
        # ExactArray.add of them all would, bit for bit)
        self.total_docs.add(factor)
        for _ in classes:
            self.class_docs_total.add(factor)
        self.n_docs += 1
        self.doc_terms += n_terms
        if self.touched_classes is not None:
            self.touched_classes.update(classes)
        cls_docs, cls_refs = self.cls_docs, self.cls_refs
        for c in classes:  # in document order
            cls_docs.add_at(c, factor)
            cls_refs[c] += 1
        weights = raw if weigh is None else weigh(terms, raw, np.full(n_terms, n_terms, dtype=np.int64))
        self.seq += 1
        record = DocRecord(classes, terms, weights, raw, factor, t, self.seq)
        self.docs[doc_id] = record
        if self.tracks_expiry():
            heapq.heappush(self._expiry, (factor, self.seq, doc_id))
        contrib = weights * term_factor
        mass = float(np.bincount(np.zeros(n_terms, dtype=np.intp), contrib, minlength=1)[0])  # summed in order
        nonzero = contrib != 0.0
        if not nonzero.all():  # zero weights (IDF 0) make no entries
            terms, contrib = terms[nonzero], contrib[nonzero]
        if len(terms):
            if len(classes) == 1:
                self._add_entries(terms, np.full(len(terms), classes[0], dtype=np.int64), contrib)
            else:
                self._add_entries(np.tile(terms, len(classes)), np.repeat(np.array(classes, dtype=np.int64), len(terms)),
                                  np.tile(contrib, len(classes)))
        cls_mass = self.cls_mass
        for c in classes:
            cls_mass.add_at(c, mass)
        for _ in classes:
            self.total_mass.add(mass)
        self.epoch += 1
        self._prune()
        return record

    def _first_rebase(self, items: Sequence[tuple]) -> int | None:
        """Index of the first item whose event time moves the decay origin (None: no rebase)."""
        clock = self.clock
        if clock.half_life is None:
            return None
        now, origin = clock.now, clock.origin
        for index, item in enumerate(items):
            t = clock.event_time(item[4]) if item[4] is None else float(item[4])
            if origin is None:
                origin = t
            if now is None or t > now:
                now = t
            if (now - origin) / clock.half_life > REBASE_AFTER_HALF_LIVES:
                return index
        return None

    def _add_contributions(self, terms: np.ndarray, contrib: np.ndarray, owner: np.ndarray, lengths: np.ndarray,
                           begins: list[int], pair_doc: np.ndarray, pair_class: np.ndarray, single: bool) -> None:
        """Add each document's ``contrib`` (concatenated) under each of its classes, in document order."""
        doc_mass = np.bincount(owner, contrib, minlength=len(lengths))
        if len(pair_doc) == len(lengths):  # every document has one class: no replication needed
            pair_terms, pair_contrib = terms, contrib
            pair_of_term = pair_class[owner]
        else:
            pair_lengths = lengths[pair_doc]
            position = (np.repeat(np.array(begins, dtype=np.int64)[pair_doc] - (np.cumsum(pair_lengths) - pair_lengths),
                                  pair_lengths) + np.arange(int(pair_lengths.sum())))
            pair_terms, pair_contrib = terms[position], contrib[position]
            pair_of_term = np.repeat(pair_class, pair_lengths)
        nonzero = pair_contrib != 0.0
        if not nonzero.all():  # zero weights (IDF 0) make no entries
            pair_terms, pair_contrib, pair_of_term = pair_terms[nonzero], pair_contrib[nonzero], pair_of_term[nonzero]
        if len(pair_terms):
            self._add_entries(pair_terms, pair_of_term, pair_contrib)
        masses = doc_mass[pair_doc]
        self.cls_mass.add(pair_class, masses)  # in document order
        self.total_mass.add_many(masses)

    def remove_document(self, doc_id: str) -> DocRecord | None:
        """Unlearn a live document exactly; ``None`` if the id is not live."""
        record = self.docs.pop(doc_id, None)
        if record is None:
            return None
        self._remove_contributions(record)
        self._uncount_document(record)
        self.epoch += 1
        if self.observer is not None:
            self.observer.document_removed(self, doc_id)
        return record

    def _uncount_document(self, record: DocRecord) -> None:
        terms, factor = record.terms, record.factor
        self.term_df.add(terms, -factor)
        refs = self.term_refs[terms] - 1
        old_raw = self.term_raw[terms]
        new_raw = old_raw - record.raw
        dead = refs == 0
        new_raw[dead] = 0.0
        self.term_df.zero(terms[dead])
        self.term_df.clamp(terms)
        self.term_refs[terms] = refs
        self.term_raw[terms] = new_raw
        self._update_kn(old_raw, new_raw)
        for t in terms[dead].tolist():
            assert self.arena.length[t] == 0, "a term without documents has no entries"
            self.term_mass.zero(t)
            if self._held_dead_terms is not None:
                self._held_dead_terms.append(t)
            else:
                self._release_term(t)
        self.n_docs -= 1
        self.doc_terms -= len(record.terms)
        self.total_docs.add(-factor)
        self.total_docs.clamp()
        if self.touched_classes is not None:
            self.touched_classes.update(record.classes)
        for c in record.classes:
            self.cls_refs[c] -= 1
            self.class_docs_total.add(-factor)
            if self.cls_refs[c] == 0:
                assert self.cls_entries[c] == 0
                self.cls_docs.zero(c)
                self.cls_mass.zero(c)
                self.classes.remove(c)
                self.class_version += 1
            else:
                self.cls_docs.add(c, -factor)
                self.cls_docs.clamp([c])
        self.class_docs_total.clamp()
        if self.n_docs == 0:
            self.total_docs.zero()
            self.class_docs_total.zero()
            self.total_mass.zero()

    def _update_kn(self, old_raw: np.ndarray, new_raw: np.ndarray) -> None:
        self.n1 += int(np.count_nonzero(new_raw == 1.0)) - int(np.count_nonzero(old_raw == 1.0))
        self.n2 += int(np.count_nonzero(new_raw == 2.0)) - int(np.count_nonzero(old_raw == 2.0))

    def _remove_contributions(self, record: DocRecord) -> None:
        weights, terms = record.weights, record.terms
        nonzero = weights != 0.0
        if not nonzero.all():
            weights, terms = weights[nonzero], terms[nonzero]
        if not len(terms):
            return
        contrib = weights * record.factor
        mass = float(np.bincount(np.zeros(len(contrib), dtype=np.intp), contrib, minlength=1)[0])  # in order, as learned
        n_classes = len(record.classes)
        for c in record.classes:
            self.cls_mass.add(c, -mass)
            self.cls_mass.clamp([c])
            self.total_mass.add(-mass)
            self.total_mass.clamp()
        arena = self.arena
        counters = self._counters()
        remove_entries(np.tile(terms, n_classes), np.repeat(np.array(record.classes, dtype=np.int64), len(terms)),
                       np.tile(contrib, n_classes), arena.slot, arena.cls, arena.count, arena.start, arena.length,
                       self.ent_count.hi, self.ent_count.lo, self.ent_refs, self.free_stack, self.term_mass.hi,
                       self.term_mass.lo, self.cls_entries, self.cls_mass.hi, self.cls_mass.lo, counters,
                       *SPILL.reserve(n_classes * len(terms)), self.journal)
        self.term_mass.take_spill(SPILL, terms)
        self._take_counters(counters)
        # the loop zeroed terms and classes left without entries: their residuals go with them
        if self.term_mass.spill:
            self.term_mass.zero(terms[arena.length[terms] == 0])
        if self.cls_mass.spill:
            classes = np.array(record.classes, dtype=np.int64)
            self.cls_mass.zero(classes[self.cls_entries[classes] == 0])
        if self.n_entries == 0:
            self.total_mass.zero()

    # ----------------------------------------------------- decay and memory
    def _rebase(self, half_lives: int) -> None:
        """Move the decay origin forward by whole half-lives (exact rescaling)."""
        shrink = 2.0 ** -half_lives
        for doc_id in [d for d, r in self.docs.items() if r.factor * shrink < EXPIRY_WEIGHT]:
            self.remove_document(doc_id)
            self.expired_documents += 1
        n = self.ent_used
        for sums in (self.cls_docs, self.cls_mass, self.term_mass, self.term_df):
            sums.ldexp(-half_lives)
        self.ent_count.ldexp(-half_lives, n)
        if self.arena.counting:
            self.arena.copy_counts(self.ent_count.hi, self.ent_count.lo)
        for total in (self.total_mass, self.total_docs, self.class_docs_total):
            total.ldexp(-half_lives)
        for record in self.docs.values():
            record.factor = math.ldexp(record.factor, -half_lives)
        self._expiry = [(math.ldexp(f, -half_lives), s, d) for f, s, d in self._expiry]
        self.clock.shift_origin(half_lives)
        self.rebases += 1
        self.epoch += 1

    def _prune(self) -> None:
        """Apply the memory bound: drop documents too decayed or too many (oldest first)."""
        if not self.tracks_expiry():
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
            too_big = self.max_bytes is not None and self.approx_bytes() > self.max_bytes
            if not (too_light or too_many or too_big):
                break
            heapq.heappop(self._expiry)
            before = self.n_entries
            self.remove_document(doc_id)
            self.pruned_documents += 1
            self.pruned_entries += before - self.n_entries

    def resum_totals(self) -> int:
        """Re-sum every per-class, per-term and model total from the live documents; the number that differed
        (drift, repaired): :func:`model.resummation.resum_totals`."""
        return resum_totals(self)

    def restored(self) -> None:
        """After a restore replaced the tables: rebuild the expiry heap, drop cached reads, start a new epoch."""
        self.doc_terms = sum(len(r.terms) for r in self.docs.values())
        self.term_name_bytes = sum(len(name) for name in self.terms.ids)
        self.rebuild_expiry()
        if self.arena.counting:
            self.arena.copy_counts(self.ent_count.hi, self.ent_count.lo)
        self._active = None
        self.epoch += 1

    def rebuild_expiry(self) -> None:
        self._expiry = []
        if self.tracks_expiry():
            self._expiry = [(r.factor, r.seq, d) for d, r in self.docs.items()]
            heapq.heapify(self._expiry)

    # ------------------------------------------------------------- reading
    def kneser_ney_delta(self) -> float:
        """``n1 / (n1 + 2 n2)`` over raw term counts of the live documents (0.5 when undefined)."""
        if self.n1 + self.n2 == 0:
            return 0.5
        value = self.n1 / (self.n1 + 2 * self.n2)
        return min(max(value, 1e-6), 1.0)

    def changed_entries(self, reader: object) -> np.ndarray | None:
        """Entry slots learning or unlearning changed since ``reader``'s last call (repeats possible).

        ``None`` when the changes are not all known: more than the journal holds, or another
        reader took them since; the reader then redoes its pass over every entry. Decay moves
        every true value without touching a slot (see ``rebases`` and ``clock.scale()``).
        """
        fill, self.journal_fill = self.journal_fill, 0
        if self.journal_reader is not reader:
            self.journal_reader = reader
            return None
        return self.journal[:fill].copy() if fill <= len(self.journal) else None

    def active_classes(self) -> np.ndarray:
        """Ids of classes with at least one live document (ascending)."""
        cached = self._active
        if cached is None or cached[0] != self.class_version:
            cached = self._active = (self.class_version, np.flatnonzero(self.cls_refs[: self.classes.capacity] > 0))
        return cached[1]
