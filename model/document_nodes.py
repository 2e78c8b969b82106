"""The document nodes of a Tied Document Mixture (:mod:`model.tdm`) and their inverted index.

A node is one (document, label) pair: a TDM label is a mixture of its documents,
each smoothed by its own kernel (MODEL.md section 6). Per node the model needs
its class, decay factor, total weight ``|c_i|_1``, kernel discount ``K_i`` and
``log a_i``; per term the postings ``(node, c_i(n))`` of the documents holding
it, and (computed by the model, valid for one state epoch) their weights
``v_i(n)``; per label the nodes grouped by equal ``a_i`` (:meth:`DocumentNodes.group_table`).

The documents themselves live in the :class:`model.state.CountState`; the nodes
are a cache over them, kept in step as the state's observer and rebuilt from it
after a restore, with one number per document the state cannot give back after
TF-IDF weighting: ``|c_i|_1`` (part of the TDM's extra state).
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from .arrays import distinct_sorted, grow
from .loops.node_postings import append_runs, mark_zero_weights, release_unfit, store_cached, store_cached_zeros
from .smoothing import Smoothing, log_smoothing_weight
from .state import CountState, DocRecord

_EMPTY_FLOATS = np.zeros(0)
_FIRST = np.zeros(1, dtype=np.int64)  # the start of a batch of one document, for np.add.reduceat

class MissingLengthsError(ValueError):
    """A TF-IDF weighted TDM was restored without its document lengths (its extra state)."""


class Groups:
    """Documents of every label grouped by their smoothing weight, concatenated by class.

    ``log_mass[g]`` is ``log(sum of pi_i)`` over the documents of group ``g``
    and ``log_a[g]`` their common (or, binned, representative) ``log a_i``;
    groups of one class are contiguous, ``starts``/``sizes`` delimit them and
    ``classes`` names them.
    """

    __slots__ = ("classes", "starts", "sizes", "log_mass", "log_a")

    def __init__(self, classes, starts, sizes, log_mass, log_a) -> None:
        self.classes, self.starts, self.sizes, self.log_mass, self.log_a = classes, starts, sizes, log_mass, log_a


class DocumentNodes:
    """The document nodes of a TDM and their inverted index (a cache over the CountState).

    A node is one (document, label) pair. Per node: its class, its stored decay
    factor (the document's, in the state's forward-decay units), ``|c_i|_1``,
    ``K_i`` and ``log a_i``. Per term: the postings ``(node, c_i(n))`` of the
    documents holding it, in a growable array; removed nodes stay in the
    arrays (marked dead) until the term is next read, and node ids are never
    reused until a full compaction renumbers them, so a dead id can never be
    mistaken for a live one. The postings of all terms live in one arena (term
    ``t`` owns ``post_node``/``post_count[post_start[t]:][:post_cap[t]]``, the
    first ``post_fill[t]`` used, nodes ascending): appending is one compiled
    loop and the compiled weight step reads the regions in place. A term's ``post_start``, ``post_cap``,
    ``post_fill`` and ``post_dead`` are the columns of one row of :attr:`post_table` (views), so that the
    loops reading them together for a term take one cache miss, not four.
    """

    #: Renumber nodes once more than this many (and more than the live ones) are dead.
    compact_after = 1024
    #: Repack the posting arena once more than this many slots (and half of it) are garbage.
    repack_after = 1 << 16

    def __init__(self, smoothing: Smoothing, state: CountState) -> None:
        self.smoothing = smoothing  # the kernels' discounts K_i(n) and mass kmu
        self.values = smoothing.values(state)  # their numbers in force (a Kneser-Ney kdelta follows the counts)
        self.origin: float | None = None  # decay origin the node factors are stored against
        # nodes
        self.node_class = np.zeros(0, dtype=np.int32)
        self.node_factor = np.zeros(0)
        self.node_length = np.zeros(0)
        self.node_discount = np.zeros(0)
        self.node_log_a = np.zeros(0)
        self.node_log_pi = np.zeros(0)  # log of the node's mixture weight in its label (kept by group_table)
        self.node_alive = np.zeros(0, dtype=bool)
        self.node_doc: list[str | None] = []
        self.n_nodes = 0  # high-water mark of node ids
        self.live_nodes = 0
        self.doc_nodes: dict[str, tuple[DocRecord, tuple[int, ...], float]] = {}
        self.class_nodes: list[set[int]] = []
        # postings by term id: regions of one arena (moved to its end when full; the old one is garbage)
        self.post_node = np.zeros(0, dtype=np.int32)
        self.post_count = np.zeros(0)
        self._set_post_table(np.zeros((0, 4), dtype=np.int64))
        self.post_used = 0  # the arena's high-water mark
        self.post_garbage = 0  # arena slots no region owns
        self.live_postings = 0
        # derived: posting weights v per term (valid for one state epoch) in one flat cache that the
        # compiled scoring loop reads (term t: nodes and weights at cache_start[t], cache_len[t] of them,
        # nodes ascending; cache_len[t] > cache_cap[t]: weights all +0.0, nodes not copied, store_zero_weights),
        # each term's largest weight (its bound), and the label groups
        self.weight_epoch = np.full(0, -1, dtype=np.int64)
        self.cache_start = np.zeros(0, dtype=np.int64)
        self.cache_len = np.zeros(0, dtype=np.int64)
        self.cache_cap = np.zeros(0, dtype=np.int64)  # slots each region owns (a list may grow into them)
        self.term_bound = np.zeros(0)
        self.cache_node = np.zeros(0, dtype=np.int32)
        self.cache_weight = np.zeros(0)
        self.cache_used = 0
        self.cache_live = 0
        self.dirty_classes: set[int] = set()
        self.class_groups: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.class_log_total = np.zeros(0)
        self.groups: Groups | None = None
        self.bin_width: float | None = None
        # what the weigher saw in the current batch: (weights c, |c|_1 at each position), concatenated
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []
        self.weights_recomputed = 0
        self.counters = np.zeros(8, dtype=np.int64)  # what scoring read and skipped (model.loops.mixture.COUNTERS)
        self._scratch = (np.zeros(0), np.zeros(0, dtype=np.bool_), np.zeros(0, dtype=np.int32))
        self.compactions = 0
        self.repacks = 0  # of the posting arena
        self.missing_lengths = False  # restored without extra_state(): unusable until it is given

    # ------------------------------------------------------------ kernel constants
    def kernel_log_a(self, length: np.ndarray, discount: np.ndarray) -> np.ndarray:
        """``log a_i = log((kmu + K_i) / (kmu + |c_i|_1))``; 0 (``a_i = 1``) for an empty kernel."""
        return log_smoothing_weight(length, discount, self.smoothing.mu)

    def kernel_log_a_one(self, length: float, discount: float) -> float:
        """:meth:`kernel_log_a` of one node: the sums and the quotient in Python floats (the same IEEE operations
        as the arrays'), the ``log`` numpy's on a one-value array, as there; the array form where a special
        case (a total of 0, an infinity, a NaN) needs its handling."""
        mu = float(self.smoothing.mu)
        total = mu + length
        kept = mu + discount
        if 0.0 < total < math.inf and 0.0 < kept < math.inf:
            return float(np.log(np.array([kept / total]))[0])
        return float(self.kernel_log_a(np.array([length]), np.array([discount]))[0])

    # ------------------------------------------------------------ weighing hook
    def normalizing(self, weigh):
        """Wrap the model's weigher: the state learns ``c / |c|_1`` (length-normalized counts).

        The weigher sees a batch's documents concatenated; each document's
        block is as long as its number of distinct terms (the weigher's third
        argument), which delimits the blocks. The unnormalized weights are
        kept for :meth:`add`, which needs ``c`` and ``|c|_1``.
        """
        pending = self._pending

        def normalized(terms: np.ndarray, raw: np.ndarray, distinct: np.ndarray) -> np.ndarray:
            weights = raw.copy() if weigh is None else np.asarray(weigh(terms, raw, distinct), dtype=np.float64)
            if not len(weights):
                pending.append((weights, weights))
                return weights
            total = len(weights)
            if distinct[0] == total:  # one document (a learn_one): the steps below for one block, fewer of them
                length = np.add.reduceat(weights, _FIRST)  # the same call on the same start: the same sum
                if 0.0 < length[0] < math.inf:  # then no division by 0 or of inf (a finite sum has finite terms)
                    pending.append((weights, np.full(total, length[0])))
                    return weights / length[0]  # IEEE division: as by the repeated length, bit for bit
                length_at = np.repeat(length, total)
            else:
                sizes, position = [], 0
                distinct_list = distinct.tolist()
                while position < total:
                    size = int(distinct_list[position])
                    sizes.append(size)
                    position += size
                if position != total:
                    raise RuntimeError("TDM: the weigher's batch is not made of whole documents")
                starts = np.cumsum([0] + sizes[:-1])
                length_at = np.repeat(np.add.reduceat(weights, starts), sizes)
            pending.append((weights, length_at))
            with np.errstate(divide="ignore", invalid="ignore"):
                return np.where(length_at > 0, weights / length_at, 0.0)

        return normalized

    # ------------------------------------------------------------ growth
    def _reserve_nodes(self, count: int) -> None:
        size = self.n_nodes + count
        if size > len(self.node_class):
            for name in ("node_class", "node_factor", "node_length", "node_discount", "node_log_a", "node_log_pi", "node_alive"):
                setattr(self, name, grow(getattr(self, name), size))

    def _set_post_table(self, table: np.ndarray) -> None:
        """Per term id one row ``(start, capacity, fill, dead)`` of its posting region (dead: postings of removed
        nodes not dropped yet); ``post_start``, ``post_cap``, ``post_fill``, ``post_dead`` are its columns."""
        self.post_table = table
        self.post_start, self.post_cap, self.post_fill, self.post_dead = (table[:, 0], table[:, 1], table[:, 2],
                                                                          table[:, 3])

    def _reserve_terms(self, size: int) -> None:
        if size > len(self.post_fill):
            old = len(self.weight_epoch)
            rows = len(self.post_table)
            table = np.zeros((max(size, 2 * rows, 16), 4), dtype=np.int64)  # as grow() sizes the other term arrays
            table[:rows] = self.post_table
            self._set_post_table(table)
            self.weight_epoch = grow(self.weight_epoch, size)
            self.weight_epoch[old:] = -1
            self.cache_start = grow(self.cache_start, size)
            self.cache_len = grow(self.cache_len, size)
            self.cache_cap = grow(self.cache_cap, size)
            self.term_bound = grow(self.term_bound, size)

    def _reserve_classes(self, size: int) -> None:
        while len(self.class_nodes) < size:
            self.class_nodes.append(set())
        if size > len(self.class_log_total):
            old = len(self.class_log_total)
            self.class_log_total = grow(self.class_log_total, size)
            self.class_log_total[old:] = -np.inf

    def term_postings(self, term: int) -> tuple[np.ndarray, np.ndarray]:
        """Views of the nodes (ascending, dead ones included until the term is next read) and counts of a term."""
        start, fill = int(self.post_start[term]), int(self.post_fill[term])
        return self.post_node[start : start + fill], self.post_count[start : start + fill]

    def posting_index(self, terms: np.ndarray) -> np.ndarray:
        """Arena positions of the postings of ``terms``, concatenated in order."""
        fills = self.post_fill[terms]
        ends = np.cumsum(fills)
        return np.repeat(self.post_start[terms] - (ends - fills), fills) + np.arange(int(ends[-1]) if len(ends) else 0)

    def _append_runs(self, run_terms: np.ndarray, run_bounds: np.ndarray, nodes: np.ndarray,
                     counts: np.ndarray) -> None:
        """Append ``nodes[run_bounds[r]:run_bounds[r + 1]]`` and their counts to the postings of ``run_terms[r]``
        (distinct terms), in one compiled loop (a second one after growing the arena when a moving region
        needs more room than it has); their weights become stale."""
        room, used, garbage = append_runs(run_terms, run_bounds, nodes, counts, self.post_table, self.post_node,
                                          self.post_count, self.post_used, self.weight_epoch)
        if room:
            self.post_node = grow(self.post_node, room)
            self.post_count = grow(self.post_count, len(self.post_node))
            room, used, garbage = append_runs(run_terms, run_bounds, nodes, counts, self.post_table, self.post_node,
                                              self.post_count, self.post_used, self.weight_epoch)
        self.post_used = used
        self.post_garbage += garbage
        if self.post_garbage > max(self.repack_after, self.post_used // 2):
            self._repack()

    def _repack(self) -> None:
        """Copy every region to a fresh arena, each with capacity ``max(4, fill)`` (drops the garbage)."""
        terms = np.flatnonzero(self.post_cap)
        index = self.posting_index(terms)
        fills = self.post_fill[terms]
        caps = np.maximum(fills, 4)
        starts = np.cumsum(caps) - caps
        target = np.repeat(starts - (np.cumsum(fills) - fills), fills) + np.arange(len(index))
        node, count = np.zeros(max(int(caps.sum()), 16), dtype=np.int32), np.zeros(max(int(caps.sum()), 16))
        node[target], count[target] = self.post_node[index], self.post_count[index]
        self.post_node, self.post_count = node, count
        self.post_start[terms], self.post_cap[terms] = starts, caps
        self.post_used, self.post_garbage = int(caps.sum()), 0
        self.repacks += 1

    # ------------------------------------------------------------ adding and removing documents
    def documents_added(self, state: CountState, items: Sequence[tuple], records: list[DocRecord | None]) -> None:
        """The state's :class:`model.state.DocumentObserver` hook: nodes for what a batch learned."""
        self.add(state, [(item[0], record) for item, record in zip(items, records)])

    def document_removed(self, state: CountState, doc_id: str) -> None:
        """The state's :class:`model.state.DocumentObserver` hook: a document left."""
        self.remove(state, doc_id)

    def add(self, state: CountState, records: Sequence[tuple[str, DocRecord | None]]) -> None:
        """Register the documents of a batch the state just learned (``None``: not learned).

        ``records`` are all items of the batch in order, so that their blocks
        line up with what the weigher saw.
        """
        self.check_complete()
        self._follow_rebase(state)
        if not self._pending:
            return  # nothing was weighed: no document of the batch was kept
        if len(self._pending) != 1:
            self._pending.clear()
            raise RuntimeError("TDM: expected one weigher call per learned batch")
        weights, length_at = self._pending.pop()
        batch_terms, batch_nodes, batch_counts = [], [], []
        offset = 0
        for doc_id, record in records:
            if record is None:
                continue
            size = len(record.terms)
            block = weights[offset : offset + size]
            length = float(length_at[offset]) if size else 0.0
            offset += size
            if state.docs.get(doc_id) is not record:
                continue  # pruned by the memory bound while its batch was learned
            if doc_id in self.doc_nodes:
                self.remove(state, doc_id)
            self._add_nodes(state, doc_id, record, block, length, batch_terms, batch_nodes, batch_counts)
        if offset != len(weights):
            raise RuntimeError("TDM: learned records do not match the weighed batch")
        self._flush_postings(batch_terms, batch_nodes, batch_counts)

    def _add_nodes(self, state: CountState, doc_id: str, record: DocRecord, weights: np.ndarray, length: float,
                   batch_terms: list, batch_nodes: list, batch_counts: list) -> None:
        positive = weights > 0
        terms, counts = record.terms[positive], weights[positive]
        discount = float(self.smoothing.discount(counts, self.values).sum())
        log_a = self.kernel_log_a_one(length, discount)
        self._reserve_nodes(len(record.classes))
        self._reserve_classes(state.classes.capacity)
        ids = []
        for class_id in record.classes:
            node = self.n_nodes
            self.n_nodes += 1
            self.node_class[node] = class_id
            self.node_factor[node] = record.factor
            self.node_length[node] = length
            self.node_discount[node] = discount
            self.node_log_a[node] = log_a
            self.node_alive[node] = True
            self.node_doc.append(doc_id)
            self.class_nodes[class_id].add(node)
            self.dirty_classes.add(class_id)
            ids.append(node)
        self.live_nodes += len(ids)
        self.doc_nodes[doc_id] = (record, tuple(ids), length)
        if len(terms):
            for node in ids:
                batch_terms.append(terms)
                batch_nodes.append(np.full(len(terms), node, dtype=np.int32))
                batch_counts.append(counts)

    def _flush_postings(self, batch_terms: list, batch_nodes: list, batch_counts: list) -> None:
        if not batch_terms:
            return
        if len(batch_terms) == 1:  # one node: its terms are distinct, one posting each (nothing is written to them)
            terms, nodes, counts = batch_terms[0], batch_nodes[0], batch_counts[0]
        else:
            terms = np.concatenate(batch_terms)
            nodes = np.concatenate(batch_nodes)
            counts = np.concatenate(batch_counts)
        self._reserve_terms(int(terms.max()) + 1)
        self.live_postings += len(terms)
        terms = terms.astype(np.int64, copy=False)
        if len(batch_terms) == 1:
            self._append_runs(terms, np.arange(len(terms) + 1), nodes, counts)
            return
        order = np.argsort(terms, kind="stable")  # each term's postings in node order (nodes ascend in the batch)
        terms, nodes, counts = terms[order], nodes[order], counts[order]
        distinct, first = np.unique(terms, return_index=True)
        self._append_runs(distinct, np.append(first, len(terms)), nodes, counts)

    def remove(self, state: CountState, doc_id: str) -> None:
        """Forget the nodes of a document the state no longer holds."""
        known = self.doc_nodes.pop(doc_id, None)
        if known is None:
            return
        record, ids, length = known
        for node in ids:
            class_id = int(self.node_class[node])
            self.node_alive[node] = False
            self.node_factor[node] = 0.0
            self.node_log_pi[node] = -np.inf  # the node pass sums every node id: a removed one adds nothing
            self.node_doc[node] = None
            self.class_nodes[class_id].discard(node)
            self.dirty_classes.add(class_id)
        self.live_nodes -= len(ids)
        terms = self._posting_terms(record, length)
        if len(terms):
            self.post_dead[terms] += len(ids)
            self.live_postings -= len(terms) * len(ids)
        # a term no document holds any more loses its (all dead) postings, so its id can be reused
        held = record.terms[record.terms < len(self.post_fill)]
        for term in held[state.term_refs[held] == 0].tolist():
            self._clear_term(term)
        retired = self.n_nodes - self.live_nodes
        if retired > self.compact_after and retired > self.live_nodes:
            self.compact()

    @staticmethod
    def _posting_terms(record: DocRecord, length: float) -> np.ndarray:
        # the record holds c / |c|_1: positive exactly where c is
        return record.terms[record.weights > 0] if length > 0 else record.terms[:0]

    def _clear_term(self, term: int) -> None:
        self.post_garbage += int(self.post_cap[term])
        self.post_start[term] = self.post_cap[term] = 0
        self.post_fill[term] = 0
        self.post_dead[term] = 0
        self.weight_epoch[term] = -1
        self._release_cached(term)

    def _compact_term(self, term: int) -> None:
        nodes, counts = self.term_postings(term)
        keep = self.node_alive[nodes]
        kept = int(keep.sum())
        nodes[:kept], counts[:kept] = nodes[keep], counts[keep]  # the masks copy before the writes
        self.post_fill[term] = kept
        self.post_dead[term] = 0

    def compact(self) -> None:
        """Drop dead postings everywhere and renumber the live nodes densely."""
        for term in np.flatnonzero(self.post_dead).tolist():
            self._compact_term(term)
        live = np.flatnonzero(self.node_alive[: self.n_nodes])
        renumber = np.full(max(self.n_nodes, 1), -1, dtype=np.int32)
        renumber[live] = np.arange(len(live), dtype=np.int32)
        index = self.posting_index(np.flatnonzero(self.post_fill))
        self.post_node[index] = renumber[self.post_node[index]]
        for name in ("node_class", "node_factor", "node_length", "node_discount", "node_log_a", "node_log_pi", "node_alive"):
            array = getattr(self, name)
            moved = np.zeros_like(array)
            moved[: len(live)] = array[live]
            setattr(self, name, moved)
        self.node_doc = [self.node_doc[j] for j in live.tolist()]
        self.n_nodes = len(live)
        self.doc_nodes = {d: (r, tuple(int(renumber[j]) for j in ids), length)
                          for d, (r, ids, length) in self.doc_nodes.items()}
        self.class_nodes = [set() for _ in self.class_nodes]
        for node, class_id in enumerate(self.node_class[: self.n_nodes].tolist()):
            self.class_nodes[class_id].add(node)
        self.weight_epoch[:] = -1  # the cached weights name the old node ids
        self.cache_len[:] = 0
        self.cache_cap[:] = 0
        self.term_bound[:] = 0.0
        self.cache_used = self.cache_live = 0
        self.dirty_classes.update(range(len(self.class_nodes)))
        self.compactions += 1

    # ------------------------------------------------------------ posting weights (computed by the model)
    def drop_dead_postings(self, terms: np.ndarray) -> None:
        """Drop the postings of removed nodes from the lists of ``terms`` (before their weights are computed)."""
        for term in terms[self.post_dead[terms] != 0].tolist():
            self._compact_term(term)

    def store_weights(self, terms: list[int], nodes: np.ndarray | None, weights: np.ndarray | None,
                      fills: np.ndarray, epoch: int) -> None:
        """Keep the postings' nodes and weights ``v_i(n)`` of ``terms`` for ``epoch`` (concatenated, ``fills``
        per term, nodes ascending within a term; ``None``: no postings; no term twice) and each term's largest
        weight. A term whose cached region has room is rewritten in place; the others get a new region at the
        cache's end with a quarter to spare (a common word's list grows by about one per learned message)."""
        term_array = np.asarray(terms, dtype=np.int64)
        if weights is None or not len(weights):
            self.weight_epoch[term_array] = epoch
            self._release_cached_many(term_array)
            return
        # two compiled steps around making room (which may move the kept regions: their starts are read after it)
        released, total = release_unfit(term_array, np.asarray(fills, dtype=np.int64), epoch, self.weight_epoch,
                                        self.cache_cap)
        self.cache_live -= int(released)
        self._reserve_cache(int(total))
        self.cache_used = int(store_cached(term_array, np.asarray(fills, dtype=np.int64), nodes, weights,
                                           self.cache_used, self.cache_start, self.cache_len, self.cache_cap,
                                           self.cache_node, self.cache_weight, self.term_bound))
        self.cache_live += int(total)
        self.weights_recomputed += len(terms)

    def store_zero_weights(self, terms: np.ndarray, fills: np.ndarray, epoch: int) -> None:
        """:meth:`store_weights` of weights that are all ``+0.0`` (a kernel that keeps nothing; ``fills`` = the
        terms' posting counts, no dead postings left), without the copy: each term's postings are counted
        (``cache_len``, which the scoring loop's choice of the node pass reads) and its bound set to 0, but its
        nodes stay in the posting arena (``cache_len > cache_cap``, :meth:`uncopied`). The scoring loop reads no
        posting of a document whose every weight is 0; a document that also holds a weighted term has the
        uncopied terms copied first (:meth:`copy_uncopied`): what it reads is then what the copy would have held.
        The arena's first ``cache_len`` postings of such a term are those nodes until it is stale again: every
        change of a term's postings (an append, dropping dead postings, a cleared or renumbered term) marks its
        weights stale, and repacking the arena keeps each term's postings in order."""
        term_array = np.asarray(terms, dtype=np.int64)
        released = mark_zero_weights(term_array, np.asarray(fills, dtype=np.int64), epoch, self.weight_epoch,
                                     self.cache_len, self.cache_cap, self.term_bound)
        self.cache_live -= int(released)
        self.weights_recomputed += len(term_array)

    def uncopied(self, terms: np.ndarray) -> np.ndarray:
        """Which of ``terms`` (ids below the term tables' size) hold zero weights not copied (:meth:`store_zero_weights`)."""
        return self.cache_len[terms] > self.cache_cap[terms]

    def copy_uncopied(self, terms: np.ndarray) -> None:
        """Copy the nodes (with weights +0.0) of the uncopied ``terms`` (distinct) into the weight cache: what
        :meth:`store_zero_weights` stood for, from the same arena postings."""
        term_array = np.asarray(terms, dtype=np.int64)
        fills = self.cache_len[term_array]
        total = int((fills + fills // 4 + 2).sum())
        self._reserve_cache(total)
        self.cache_used = int(store_cached_zeros(term_array, fills, self.post_start, self.post_node, self.cache_used,
                                                 self.cache_start, self.cache_len, self.cache_cap, self.cache_node,
                                                 self.cache_weight, self.term_bound))
        self.cache_live += total

    def cached_postings(self, term: int) -> tuple[np.ndarray, np.ndarray]:
        """The nodes (ascending) and weights ``v_i(n)`` of ``term`` as scoring reads them (for tests and benches;
        valid while ``weight_epoch[term]`` is the state's epoch): its cached region, or for uncopied zero weights
        the arena's postings with weights +0.0."""
        size = int(self.cache_len[term])
        if size > self.cache_cap[term]:
            start = int(self.post_start[term])
            return self.post_node[start : start + size].copy(), np.zeros(size)
        start = int(self.cache_start[term])
        return self.cache_node[start : start + size], self.cache_weight[start : start + size]

    def _release_cached(self, term: int) -> None:
        if term < len(self.cache_cap) and (self.cache_cap[term] or self.cache_len[term]):  # len: uncopied zeros
            self.cache_live -= int(self.cache_cap[term])
            self.cache_len[term] = self.cache_cap[term] = 0
            self.term_bound[term] = 0.0

    def _release_cached_many(self, terms: np.ndarray) -> None:
        """:meth:`_release_cached` of every term of ``terms`` (repeats allowed), in a few array operations."""
        inside = terms[terms < len(self.cache_cap)]
        held = distinct_sorted(inside[(self.cache_cap[inside] != 0) | (self.cache_len[inside] != 0)])
        if len(held):
            self.cache_live -= int(self.cache_cap[held].sum())
            self.cache_len[held] = self.cache_cap[held] = 0
            self.term_bound[held] = 0.0

    def _reserve_cache(self, need: int) -> None:
        """Room for ``need`` more cached postings: compact (copy the live regions, with their spare slots) once
        more than half is garbage, else grow; either way amortized O(1) per stored posting."""
        if self.cache_used + need <= len(self.cache_node):
            return
        if self.cache_used - self.cache_live > self.cache_live:
            held = np.flatnonzero(self.cache_cap)
            caps = self.cache_cap[held]
            index = np.repeat(self.cache_start[held] - (np.cumsum(caps) - caps), caps) + np.arange(int(caps.sum()))
            size = max(2 * (self.cache_live + need), 64)
            moved_node = np.zeros(size, dtype=np.int32)
            moved_weight = np.zeros(size)
            moved_node[: len(index)] = self.cache_node[index]
            moved_weight[: len(index)] = self.cache_weight[index]
            self.cache_node, self.cache_weight = moved_node, moved_weight
            self.cache_start[held] = np.cumsum(caps) - caps
            self.cache_used = len(index)
        if self.cache_used + need > len(self.cache_node):
            self.cache_node = grow(self.cache_node, self.cache_used + need)
            self.cache_weight = grow(self.cache_weight, self.cache_used + need)

    def scratch(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Zeroed per-node scratch of the scoring loop (it leaves them zeroed): sums, met marks, met ids."""
        if len(self._scratch[0]) < self.n_nodes:
            size = max(self.n_nodes, 2 * len(self._scratch[0]), 64)
            self._scratch = (np.zeros(size), np.zeros(size, dtype=np.bool_), np.zeros(size, dtype=np.int32))
        return self._scratch

    def document_lengths(self) -> dict[str, float]:
        """``|c_i|_1`` of every live document."""
        return {d: length for d, (_, _, length) in self.doc_nodes.items()}

    # ------------------------------------------------------------ decay and the kernel discount
    def _follow_rebase(self, state: CountState) -> None:
        """After the state moved its decay origin, reread the (rescaled) document factors."""
        origin = state.clock.origin
        if origin == self.origin:
            return
        self.origin = origin
        for record, ids, _ in self.doc_nodes.values():
            self.node_factor[list(ids)] = record.factor
        self.dirty_classes.update(range(len(self.class_nodes)))

    def check_complete(self) -> None:
        if self.missing_lengths:
            raise MissingLengthsError("this TF-IDF weighted TDM was restored without its extra_state(): "
                                      "call restore_extra_state() first")

    def sync(self, state: CountState) -> None:
        """Bring node constants up to date before scoring (decay origin, a Kneser-Ney kdelta)."""
        self.check_complete()
        self._follow_rebase(state)
        if self.smoothing.follows_counts:
            values = self.smoothing.values(state)
            if values != self.values:
                self.values = values
                self._recompute_discounts()

    def _recompute_discounts(self) -> None:
        """``K_i`` and ``a_i`` of every node for a new ``kdelta`` (O(postings); only ``kdelta="kn"``)."""
        for record, ids, length in self.doc_nodes.values():
            positive = record.weights > 0
            counts = record.weights[positive] * length
            discount = float(self.smoothing.discount(counts, self.values).sum())
            nodes = list(ids)
            self.node_discount[nodes] = discount
            self.node_log_a[nodes] = self.kernel_log_a(np.array([length]), np.array([discount]))[0]
        self.weight_epoch[:] = -1
        self.dirty_classes.update(range(len(self.class_nodes)))

    # ------------------------------------------------------------ the no-match sums
    def group_table(self, bin_width: float | None) -> Groups:
        """Per-label groups of equal (or binned) ``log a_i`` with their mixture mass."""
        if bin_width != self.bin_width:
            self.bin_width = bin_width
            self.dirty_classes.update(range(len(self.class_nodes)))
        if self.groups is not None and not self.dirty_classes:
            return self.groups
        for class_id in self.dirty_classes:
            members = self.class_nodes[class_id] if class_id < len(self.class_nodes) else ()
            if not members:
                self.class_groups.pop(class_id, None)
                if class_id < len(self.class_log_total):
                    self.class_log_total[class_id] = -np.inf
                continue
            nodes = np.fromiter(members, dtype=np.int64, count=len(members))
            nodes.sort()  # a fixed summation order: results do not depend on set iteration
            log_a = self.node_log_a[nodes]
            factor = self.node_factor[nodes]
            bits = log_a.view(np.int64)
            if bits.min() == bits.max():  # one group (kjm alone, or equal kernels): what np.unique would give
                values, inverse = log_a[:1].copy(), np.zeros(len(log_a), dtype=np.intp)
            elif bin_width is None:
                values, inverse = np.unique(log_a, return_inverse=True)
            else:
                _, inverse = np.unique(np.floor(log_a / bin_width), return_inverse=True)
                # representative: the middle of the values actually in the bin (error <= bin_width / 2)
                low = np.full(inverse.max() + 1, np.inf)
                high = np.full(inverse.max() + 1, -np.inf)
                np.minimum.at(low, inverse, log_a)
                np.maximum.at(high, inverse, log_a)
                values = 0.5 * (low + high)
            mass = np.bincount(inverse, factor, minlength=len(values))
            total = float(mass.sum())
            self.class_log_total[class_id] = math.log(total)
            self.node_log_pi[nodes] = np.log(factor) - math.log(total)
            with np.errstate(divide="ignore"):
                self.class_groups[class_id] = (values, np.log(mass) - math.log(total))
        self.dirty_classes.clear()
        classes = np.array(sorted(self.class_groups), dtype=np.int64)
        parts = [self.class_groups[c] for c in classes.tolist()]
        sizes = np.array([len(p[0]) for p in parts], dtype=np.int64)
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
        log_a = np.concatenate([p[0] for p in parts]) if parts else _EMPTY_FLOATS
        log_mass = np.concatenate([p[1] for p in parts]) if parts else _EMPTY_FLOATS
        self.groups = Groups(classes, starts, sizes, log_mass, log_a)
        return self.groups

    # ------------------------------------------------------------ restore
    def rebuild(self, state: CountState, lengths: dict[str, float] | None, weighted: bool) -> None:
        """Recreate every node from the state's live documents (after a restore or copy).

        ``|c_i|_1`` comes from ``lengths`` (the model's extra state) or, for
        models that learn raw counts, from the record's raw counts.
        """
        self.__init__(self.smoothing, state)
        self.origin = state.clock.origin
        batch_terms, batch_nodes, batch_counts = [], [], []
        for doc_id, record in sorted(state.docs.items(), key=lambda item: item[1].seq):
            if lengths is not None and doc_id in lengths:
                length = float(lengths[doc_id])
            elif not weighted:
                length = float(record.raw.sum())
            else:
                raise MissingLengthsError(f"TDM restore: the length |c|_1 of TF-IDF weighted document {doc_id!r} "
                                          "is missing (restore the model's extra_state())")
            self._add_nodes(state, doc_id, record, record.weights * length, length, batch_terms, batch_nodes,
                            batch_counts)
        self._flush_postings(batch_terms, batch_nodes, batch_counts)
