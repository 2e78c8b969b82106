"""Tied Document Mixture (MODEL.md section 6, thesis section 5.5): a label is a
mixture of its training documents, each a hierarchically smoothed multinomial.

::

    p(w, l)  = p(l) * sum_{i in I_l} pi_i * prod_n p_li(n) ** w_n
    pi_i     = f_i / sum_{j in I_l} f_j               f_i: decay weight of document i
    p_li(n)  = (c_i(n) - K_i(n)) / (kmu + |c_i|_1) + a_i * p_l(n)
    a_i      = (kmu + K_i) / (kmu + |c_i|_1)          K_i = sum_n K_i(n)

``c_i`` are the document's (possibly TF-IDF) weights, ``K_i(n)`` the kernel
discount (``kjm``: ``kbeta * c``, ``kpd``: ``min(c, kdelta * c**kdelta)``,
both: ``kpd`` then ``kjm`` on the rest; ``kdp`` adds the mass ``kmu``), and
``p_l(n)`` the label model of :class:`model.mnb.MNB` (generalized smoothing
over the background) estimated from *length-normalized* document counts
``C(l, n) = sum_{i in I_l} f_i * c_i(n) / |c_i|_1``.

Sparse inference. Dividing each kernel by the label model::

    log p(w, l) = log p(l) + sum_n w_n log p_l(n)                      (MNB's kernel)
                + log sum_{i in I_l} pi_i a_i^|w|_1 exp(m_i)
    m_i         = sum_{n in w, c_i(n) > 0} w_n * v_i(n)
    v_i(n)      = log1p((c_i(n) - K_i(n)) / ((kmu + K_i) * p_l(n)))

The first line is the MNB label score. In the second, ``m_i`` is non-zero
only for documents sharing a term with ``w``: it is summed over the document
postings of the scored terms (an inverted index term -> (document node,
``v``), recomputed lazily like MNB's). The documents without a match share
``exp(m_i) = 1``, so with ``T_l = sum_i pi_i a_i^Q`` over *all* documents of
``l`` (``Q = |w|_1``)::

    sum_i pi_i a_i^Q exp(m_i) = T_l + sum_{matched i} pi_i a_i^Q expm1(m_i)

which needs no subtraction. ``T_l`` is a sum of ``exp(Q log a_i)`` over
groups of documents with equal ``a_i`` (exact; with ``kjm`` alone one group
per label); ``kernel_sum="binned"`` merges nearby ``a_i`` instead (bounded
error, see :class:`TDM`).

A document learned under several labels is a node of each of them. The
documents themselves live in the :class:`model.state.CountState` (its
memory bound expires light documents); this module keeps the document nodes
as a cache rebuilt from the state, plus one number per document that the
state cannot give back after TF-IDF weighting: the document's total weight
``|c_i|_1`` (see :meth:`TDM.extra_state`).
"""
from __future__ import annotations

import json
import math
from typing import Any, Sequence

import numpy as np

from .base import PreparedBatch
from .mnb import MNB
from .smoothing import Smoothing, kernel_smoothing, log_smoothing_weight
from .spec import parse_spec
from .arrays import grow
from .state import CountState, DocRecord

#: TDM's own defaults where the scale differs from MNB's: label counts are length-normalized
#: (``mu`` counts documents, not words), kernels see one document. Chosen on the development
#: splits of r8, r52 and webkb (docs/MODEL_NOTES.md); other numbers keep the spec defaults.
TDM_DEFAULTS = {"mu": 10.0, "ups": 1.0, "kmu": 5.0, "kdelta": 0.8}

#: Documents whose decayed weight falls below this expire when the model decays
#: and no ``prune_below`` is given: 20 half-lives, a millionth of a fresh document.
DEFAULT_NODE_FLOOR = 2.0**-20
KERNEL_SUMS = ("exact", "binned")

_EMPTY_NODES = np.zeros(0, dtype=np.int32)
_EMPTY_FLOATS = np.zeros(0)
#: Scratch size (cells) for dense per-chunk arrays in scoring and posting builds.
_CHUNK_CELLS = 1 << 22


def _log_expm1(values: np.ndarray) -> np.ndarray:
    """``log(exp(x) - 1) = x + log(1 - exp(-x))`` for ``x > 0``, without overflow."""
    return values + np.log(-np.expm1(-values))


class MissingLengthsError(ValueError):
    """A TF-IDF weighted TDM was restored without its document lengths (its extra state)."""


class _Groups:
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
    mistaken for a live one.
    """

    #: Renumber nodes once more than this many (and more than the live ones) are dead.
    compact_after = 1024

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
        self.node_alive = np.zeros(0, dtype=bool)
        self.node_doc: list[str | None] = []
        self.n_nodes = 0  # high-water mark of node ids
        self.live_nodes = 0
        self.doc_nodes: dict[str, tuple[DocRecord, tuple[int, ...], float]] = {}
        self.class_nodes: list[set[int]] = []
        # postings by term id
        self.post_node: list[np.ndarray] = []
        self.post_count: list[np.ndarray] = []
        self.post_fill = np.zeros(0, dtype=np.int64)
        self.post_dead = np.zeros(0, dtype=np.int64)
        self.live_postings = 0
        # derived: posting weights v per term (valid for one state epoch), label groups
        self.weight_epoch = np.full(0, -1, dtype=np.int64)
        self.post_weight: list[np.ndarray] = []
        self.dirty_classes: set[int] = set()
        self.class_groups: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.class_log_total = np.zeros(0)
        self.groups: _Groups | None = None
        self.bin_width: float | None = None
        # what the weigher saw in the current batch: (weights c, |c|_1 at each position), concatenated
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []
        self.weights_recomputed = 0
        self.compactions = 0
        self.missing_lengths = False  # restored without extra_state(): unusable until it is given

    # ------------------------------------------------------------ kernel constants
    def kernel_log_a(self, length: np.ndarray, discount: np.ndarray) -> np.ndarray:
        """``log a_i = log((kmu + K_i) / (kmu + |c_i|_1))``; 0 (``a_i = 1``) for an empty kernel."""
        return log_smoothing_weight(length, discount, self.smoothing.mu)

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
            sizes, position, total = [], 0, len(weights)
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
            for name in ("node_class", "node_factor", "node_length", "node_discount", "node_log_a", "node_alive"):
                setattr(self, name, grow(getattr(self, name), size))

    def _reserve_terms(self, size: int) -> None:
        if size > len(self.post_fill):
            old = len(self.weight_epoch)
            self.post_fill = grow(self.post_fill, size)
            self.post_dead = grow(self.post_dead, size)
            self.weight_epoch = grow(self.weight_epoch, size)
            self.weight_epoch[old:] = -1
        extra = len(self.post_fill) - len(self.post_node)
        if extra > 0:
            self.post_node.extend([_EMPTY_NODES] * extra)
            self.post_count.extend([_EMPTY_FLOATS] * extra)
            self.post_weight.extend([_EMPTY_FLOATS] * extra)

    def _reserve_classes(self, size: int) -> None:
        while len(self.class_nodes) < size:
            self.class_nodes.append(set())
        if size > len(self.class_log_total):
            old = len(self.class_log_total)
            self.class_log_total = grow(self.class_log_total, size)
            self.class_log_total[old:] = -np.inf

    def _append_postings(self, term: int, nodes: np.ndarray, counts: np.ndarray) -> None:
        fill = int(self.post_fill[term])
        need = fill + len(nodes)
        node_array = self.post_node[term]
        if need > len(node_array):
            size = max(need, 2 * len(node_array), 4)
            bigger_nodes = np.empty(size, dtype=np.int32)
            bigger_nodes[:fill] = node_array[:fill]
            bigger_counts = np.empty(size)
            bigger_counts[:fill] = self.post_count[term][:fill]
            self.post_node[term], self.post_count[term] = bigger_nodes, bigger_counts
            node_array = bigger_nodes
        node_array[fill:need] = nodes
        self.post_count[term][fill:need] = counts
        self.post_fill[term] = need
        self.weight_epoch[term] = -1

    # ------------------------------------------------------------ adding and removing documents
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
        log_a = float(self.kernel_log_a(np.array([length]), np.array([discount]))[0])
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
        terms = np.concatenate(batch_terms)
        nodes = np.concatenate(batch_nodes)
        counts = np.concatenate(batch_counts)
        self._reserve_terms(int(terms.max()) + 1)
        self.live_postings += len(terms)
        if len(batch_terms) == 1:  # one node: its terms are distinct
            for position, term in enumerate(terms.tolist()):
                self._append_postings(term, nodes[position : position + 1], counts[position : position + 1])
            return
        order = np.argsort(terms, kind="stable")
        terms, nodes, counts = terms[order], nodes[order], counts[order]
        distinct, first = np.unique(terms, return_index=True)
        bounds = np.append(first, len(terms)).tolist()
        for k, term in enumerate(distinct.tolist()):
            lo, hi = bounds[k], bounds[k + 1]
            self._append_postings(term, nodes[lo:hi], counts[lo:hi])

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
        self.post_node[term] = _EMPTY_NODES
        self.post_count[term] = _EMPTY_FLOATS
        self.post_weight[term] = _EMPTY_FLOATS
        self.post_fill[term] = 0
        self.post_dead[term] = 0
        self.weight_epoch[term] = -1

    def _compact_term(self, term: int) -> None:
        fill = int(self.post_fill[term])
        nodes = self.post_node[term][:fill]
        keep = self.node_alive[nodes]
        kept = int(keep.sum())
        self.post_node[term] = nodes[keep].copy()
        self.post_count[term] = self.post_count[term][:fill][keep].copy()
        self.post_fill[term] = kept
        self.post_dead[term] = 0

    def compact(self) -> None:
        """Drop dead postings everywhere and renumber the live nodes densely."""
        for term in np.flatnonzero(self.post_dead).tolist():
            self._compact_term(term)
        live = np.flatnonzero(self.node_alive[: self.n_nodes])
        renumber = np.full(max(self.n_nodes, 1), -1, dtype=np.int32)
        renumber[live] = np.arange(len(live), dtype=np.int32)
        for term in np.flatnonzero(self.post_fill).tolist():
            fill = int(self.post_fill[term])
            self.post_node[term][:fill] = renumber[self.post_node[term][:fill]]
        for name in ("node_class", "node_factor", "node_length", "node_discount", "node_log_a", "node_alive"):
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
        self.weight_epoch[:] = -1
        self.dirty_classes.update(range(len(self.class_nodes)))
        self.compactions += 1

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
    def group_table(self, bin_width: float | None) -> _Groups:
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
            if bin_width is None:
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
            with np.errstate(divide="ignore"):
                self.class_groups[class_id] = (values, np.log(mass) - math.log(total))
        self.dirty_classes.clear()
        classes = np.array(sorted(self.class_groups), dtype=np.int64)
        parts = [self.class_groups[c] for c in classes.tolist()]
        sizes = np.array([len(p[0]) for p in parts], dtype=np.int64)
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
        log_a = np.concatenate([p[0] for p in parts]) if parts else _EMPTY_FLOATS
        log_mass = np.concatenate([p[1] for p in parts]) if parts else _EMPTY_FLOATS
        self.groups = _Groups(classes, starts, sizes, log_mass, log_a)
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


class DocumentNodeState(CountState):
    """A :class:`CountState` that keeps a TDM's document nodes in step with its documents.

    Every way a document enters (learning, one or a batch) or leaves
    (unlearning, forgetting, the memory bound, decay underflow) passes through
    these two methods.
    """

    nodes: DocumentNodes

    def add_document(self, doc_id, class_keys, term_keys, raw_counts, ts, weigh):
        return self.add_documents([(doc_id, class_keys, term_keys, raw_counts, ts)], weigh)[0]

    def add_documents(self, items, weigh):
        records = super().add_documents(items, weigh)
        self.nodes.add(self, [(item[0], record) for item, record in zip(items, records)])
        return records

    def remove_document(self, doc_id):
        record = super().remove_document(doc_id)
        if record is not None:
            self.nodes.remove(self, doc_id)
        return record


class TDM(MNB):
    """Tied Document Mixture over a stream: exact sparse inference, decay, unlearning, expiry.

    Same API as :class:`model.mnb.MNB`; the spec carries kernel affixes
    (``kjm``, ``kdp``, ``kpd``) besides MNB's label-level ones.

    Parameters
    ----------
    spec : str
        Affix string, e.g. ``"tdm_uc_jm_dp_kpd_kdp"`` (the thesis's best) or ``"tdm_u_jm_kjm"``.
    kernel_sum : {"exact", "binned"}
        How the documents without a matching term are summed per label.
        ``"exact"`` groups documents with equal smoothing weight ``a_i`` (one
        group per label with ``kjm`` alone). ``"binned"`` merges the ``log a_i``
        of a label into bins of width ``kernel_bin_width``: for a scored
        document of weight ``|w|_1`` every log joint score is then within
        ``|w|_1 * kernel_bin_width / 2`` of the exact one, and every log
        posterior within ``|w|_1 * kernel_bin_width``.
    kernel_bin_width : float
        Bin width in ``log a`` (only for ``kernel_sum="binned"``).
    prune_below : float, optional
        Documents whose decayed weight falls below this expire (counted in
        ``stats()["pruned_documents"]``). Default: ``2**-20`` (20 half-lives)
        when the model decays, so memory stays bounded on an endless stream;
        no expiry without decay. (To keep nearly everything under decay pass
        a tiny weight such as ``1e-300``; ``None`` means the default so that
        a configuration round trip gives the same model.)
    **kwargs
        As for :class:`model.mnb.MNB`; kernel numbers ``kbeta``, ``kmu``,
        ``kdelta`` (a number or ``"kn"``). Defaults as in :mod:`model.spec`
        except :data:`TDM_DEFAULTS` (``mu=10, ups=1, kmu=5, kdelta=0.8``).

    Examples
    --------
    >>> m = TDM("tdm_uc_jm_dp_kpd_kdp", beta=0.5, mu=5, ups=0.2, kdelta=0.6, kmu=20)
    >>> m.learn_many(["cheap pills buy now", "buy cheap watches now", "meeting notes for monday",
    ...               "monday lunch with the team"], ["spam", "spam", "ham", "ham"], ids=["m1", "m2", "m3", "m4"])
    4
    >>> m.predict_one("cheap watches")
    'spam'
    >>> round(m.predict_proba_one("team meeting")["ham"], 3)
    0.681
    >>> m.forget("m3"), m.stats()["document_nodes"]
    (True, 3)
    """

    family = "tdm"
    state_class = DocumentNodeState

    def __init__(self, spec: str = "tdm_uc_jm_dp_kpd_kdp", *, kernel_sum: str = "exact",
                 kernel_bin_width: float = 0.05, prune_below: float | None = None,
                 half_life: float | None = None, **kwargs: Any) -> None:
        if kernel_sum not in KERNEL_SUMS:
            raise ValueError(f"kernel_sum must be one of {KERNEL_SUMS}, got {kernel_sum!r}")
        if not (kernel_bin_width > 0 and math.isfinite(kernel_bin_width)):
            raise ValueError("kernel_bin_width must be positive")
        self.kernel_sum = kernel_sum
        self.kernel_bin_width = float(kernel_bin_width)
        self._extra_lengths: dict[str, float] | None = None
        if prune_below is None and half_life is not None:
            prune_below = DEFAULT_NODE_FLOOR
        free = parse_spec(spec).free_params
        for name, value in TDM_DEFAULTS.items():
            if name in free and kwargs.get(name) is None:
                kwargs[name] = value
        super().__init__(spec, prune_below=prune_below, half_life=half_life, **kwargs)

    # ------------------------------------------------------------ state and caches
    def _init_caches(self) -> None:
        """(Re)build the caches: MNB's label postings and the document nodes from the state's documents."""
        super()._init_caches()
        state = self.state
        if not isinstance(state, DocumentNodeState):
            # a plain CountState handed over by code that knows nothing of TDM: it gains the
            # node hooks (the subclass adds behaviour only, no fields)
            state.__class__ = DocumentNodeState
        state.nodes = DocumentNodes(kernel_smoothing(self.spec, self.params), state)
        if state.docs:
            try:
                state.nodes.rebuild(state, self._extra_lengths, self._learns_weighted())
            except MissingLengthsError:
                state.nodes.missing_lengths = True  # a restore in progress: the lengths come next
        self._extra_lengths = None

    def _learns_weighted(self) -> bool:
        kind = self.spec.weighting
        return kind is not None and not kind.startswith("qidf")

    @property
    def nodes(self) -> DocumentNodes:
        return self.state.nodes

    def _training_weigher(self):
        return self.state.nodes.normalizing(super()._training_weigher())

    def _learns_with_idf(self) -> bool:
        # the weigher always normalizes by the document's own length, which does not depend on
        # earlier documents: only learn-time TF-IDF does
        return self._learns_weighted()

    def config(self) -> dict[str, Any]:
        out = super().config()
        out["kernel_sum"] = self.kernel_sum
        out["kernel_bin_width"] = self.kernel_bin_width
        return out

    # ------------------------------------------------------------ persistent state beyond the CountState
    def extra_state(self) -> dict[str, Any]:
        """State beyond the CountState and config, JSON-able: the TDM options and ``|c_i|_1``
        of every live document (``{"document_lengths": {doc_id: float}, ...}``).

        The lengths are needed to restore models that learn TF-IDF weights
        (``ti``, ``tXi``, ``tiX``, ``tXiX``); others recompute them from raw counts.
        """
        return {"kernel_sum": self.kernel_sum, "kernel_bin_width": self.kernel_bin_width,
                "document_lengths": {d: length for d, (_, _, length) in self.state.nodes.doc_nodes.items()}}

    def restore_extra_state(self, data: dict[str, Any]) -> None:
        """Give :meth:`extra_state` back after the CountState was replaced (rebuilds the nodes)."""
        self.kernel_sum = str(data.get("kernel_sum", self.kernel_sum))
        self.kernel_bin_width = float(data.get("kernel_bin_width", self.kernel_bin_width))
        self._extra_lengths = {str(k): float(v) for k, v in dict(data.get("document_lengths", {})).items()}
        self._init_caches()

    # model.snapshot hooks: the lengths as one array in the snapshot's document order
    def _snapshot_arrays(self) -> dict[str, np.ndarray]:
        lengths = self.extra_state()["document_lengths"]
        return {"tdm_document_lengths": np.array([lengths[d] for d in self.state.docs], dtype=np.float64)}

    def _snapshot_meta(self) -> dict[str, Any]:
        return {"kernel_sum": self.kernel_sum, "kernel_bin_width": self.kernel_bin_width}

    def _restore_extra(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        lengths = arrays.get("tdm_document_lengths")
        if lengths is None or len(lengths) != len(self.state.docs):
            raise ValueError("TDM snapshot: document lengths missing or not one per document")
        self.restore_extra_state({**meta, "document_lengths": dict(zip(self.state.docs, lengths.tolist()))})

    def _checksum_extra(self) -> bytes:
        lengths = self.extra_state()["document_lengths"]
        options = json.dumps([self.kernel_sum, self.kernel_bin_width]).encode()
        return options + np.array([lengths[d] for d in sorted(lengths)], dtype=np.float64).tobytes()

    # ------------------------------------------------------------ document posting weights
    def _build_document_weights(self, terms: np.ndarray) -> None:
        """Recompute ``v_i(n)`` for the postings of ``terms`` (the lazy step; O(their postings))."""
        nodes_table = self.state.nodes
        for term in terms.tolist():
            if nodes_table.post_dead[term]:
                nodes_table._compact_term(term)
        fills = nodes_table.post_fill[terms]
        if not fills.sum():
            for term in terms.tolist():
                nodes_table.post_weight[term] = _EMPTY_FLOATS
            nodes_table.weight_epoch[terms] = self.state.epoch
            return
        term_list = terms.tolist()
        nodes = np.concatenate([nodes_table.post_node[t][: nodes_table.post_fill[t]] for t in term_list])
        counts = np.concatenate([nodes_table.post_count[t][: nodes_table.post_fill[t]] for t in term_list])
        owner = np.repeat(np.arange(len(terms)), fills)
        classes = nodes_table.node_class[nodes].astype(np.int64)
        derived = self.class_terms()
        # C(l, n) of the label model, summed afresh from the documents holding n
        contributions = nodes_table.node_factor[nodes] * (counts / nodes_table.node_length[nodes])
        n_classes = self.state.classes.capacity
        keys = owner * n_classes + classes
        if len(terms) * n_classes <= _CHUNK_CELLS:
            label_counts = np.bincount(keys, contributions, minlength=len(terms) * n_classes)[keys]
        else:
            distinct, inverse = np.unique(keys, return_inverse=True)
            label_counts = np.bincount(inverse, contributions, minlength=len(distinct))[inverse]
        label_counts *= derived.scale
        label_discounts = self.smoothing.discount(label_counts, derived.values)
        background = self.background(terms)[owner]
        # p_l(n) = a_l * (p_b(n) + (C(l,n) - D(l,n)) / (mu + D(l)))
        label_prob = np.exp(derived.log_a[classes]) * (background + (label_counts - label_discounts) / derived.denominator[classes])
        kernel_kept = counts - nodes_table.smoothing.discount(counts, nodes_table.values)
        weights = np.log1p(kernel_kept / ((nodes_table.smoothing.mu + nodes_table.node_discount[nodes]) * label_prob))
        np.maximum(weights, 0.0, out=weights)  # a fully discounted posting adds nothing
        bounds = np.cumsum(fills)[:-1]
        for term, part in zip(term_list, np.split(weights, bounds)):
            nodes_table.post_weight[term] = part
        nodes_table.weight_epoch[terms] = self.state.epoch
        nodes_table.weights_recomputed += len(terms)

    # ------------------------------------------------------------ the kernel
    def _joint_log_scores(self, batch: PreparedBatch) -> np.ndarray:
        scores = super()._joint_log_scores(batch)  # theta log p(l) + sum_n w_n log p_l(n)
        scores += self._log_mixture(batch, scores.shape[1])
        return scores

    def _log_mixture(self, batch: PreparedBatch, n_classes: int) -> np.ndarray:
        """``log sum_{i in I_l} pi_i prod_n (p_li(n) / p_l(n)) ** w_n`` per document and class (-inf: no nodes)."""
        state = self.state
        nodes_table = state.nodes
        nodes_table.sync(state)
        n_docs = batch.n_docs
        out = np.full((n_docs, n_classes), -np.inf)
        lengths = np.bincount(batch.owner, batch.weights, minlength=n_docs)  # |w|_1 of each document
        groups = nodes_table.group_table(self.kernel_bin_width if self.kernel_sum == "binned" else None)
        if len(groups.classes):
            # T_l = sum of pi_i a_i^Q over all documents of l: per group, then log-sum-exp per label
            chunk = max(1, _CHUNK_CELLS // max(len(groups.log_a), 1))
            for lo in range(0, n_docs, chunk):
                exponents = groups.log_mass[None, :] + lengths[lo : lo + chunk, None] * groups.log_a[None, :]
                peak = np.maximum.reduceat(exponents, groups.starts, axis=1)
                total = np.add.reduceat(np.exp(exponents - np.repeat(peak, groups.sizes, axis=1)), groups.starts, axis=1)
                out[lo : lo + chunk, groups.classes] = peak + np.log(total)
        # the matched documents add pi_i a_i^Q expm1(m_i)
        known = batch.terms < len(nodes_table.post_fill)  # terms beyond it have no document postings
        terms, weights, owner = batch.terms[known], batch.weights[known], batch.owner[known]
        if not len(terms):
            return out
        needed = np.unique(terms)
        stale = needed[nodes_table.weight_epoch[needed] != state.epoch]
        if len(stale):
            self._build_document_weights(stale)
        n_nodes = max(nodes_table.n_nodes, 1)
        rows_per_chunk = max(1, _CHUNK_CELLS // max(n_nodes, n_classes))
        bounds = np.searchsorted(owner, np.arange(0, n_docs + rows_per_chunk, rows_per_chunk).clip(max=n_docs))
        for chunk, (lo, hi) in enumerate(zip(bounds[:-1].tolist(), bounds[1:].tolist())):
            if lo < hi:
                self._add_matched(out, chunk * rows_per_chunk, terms[lo:hi], weights[lo:hi], owner[lo:hi], lengths,
                                  n_nodes, n_classes)
        return out

    def _add_matched(self, out: np.ndarray, first_row: int, terms: np.ndarray, weights: np.ndarray,
                     owner: np.ndarray, lengths: np.ndarray, n_nodes: int, n_classes: int) -> None:
        """Add the matched documents' terms to ``out`` for a chunk of scored documents."""
        nodes_table = self.state.nodes
        post_node, post_weight, post_fill = nodes_table.post_node, nodes_table.post_weight, nodes_table.post_fill
        rows = owner - first_row
        n_rows = int(rows[-1]) + 1
        ends = np.cumsum(np.bincount(rows, minlength=n_rows)).tolist()
        term_list = terms.tolist()
        fill_list = post_fill[terms].tolist()
        # m_i per (scored document, node): one small dense sum per document, over its postings only
        hits, sums_of_hits, begin = [], [], 0
        for row, end in enumerate(ends):
            row_terms = [t for t, f in zip(term_list[begin:end], fill_list[begin:end]) if f]
            if row_terms:
                row_fills = post_fill[row_terms]
                nodes = np.concatenate([post_node[t][:f] for t, f in zip(row_terms, row_fills.tolist())])
                contributions = (np.concatenate([post_weight[t] for t in row_terms])
                                 * np.repeat(weights[begin:end][np.array(fill_list[begin:end]) > 0], row_fills))
                matched = np.bincount(nodes, contributions, minlength=n_nodes)
                hit = np.flatnonzero(matched > 0)
                hits.append(hit + row * n_nodes)
                sums_of_hits.append(matched[hit])
            begin = end
        if not hits:
            return
        hit = np.concatenate(hits)
        matched = np.concatenate(sums_of_hits)
        row_of, node_of = np.divmod(hit, n_nodes)
        classes = nodes_table.node_class[node_of].astype(np.int64)
        log_terms = (np.log(nodes_table.node_factor[node_of]) - nodes_table.class_log_total[classes]
                     + lengths[first_row + row_of] * nodes_table.node_log_a[node_of] + _log_expm1(matched))
        # log-sum-exp per (scored document, class), each stabilized by its own maximum
        cell = row_of * n_classes + classes
        peak = np.full(n_rows * n_classes, -np.inf)
        np.maximum.at(peak, cell, log_terms)
        sums = np.bincount(cell, np.exp(log_terms - peak[cell]), minlength=n_rows * n_classes)
        touched = np.flatnonzero(sums > 0)
        row_index, class_index = np.divmod(touched, n_classes)
        row_index += first_row
        out[row_index, class_index] = np.logaddexp(out[row_index, class_index], peak[touched] + np.log(sums[touched]))

    def stats(self) -> dict[str, Any]:
        out = super().stats()
        nodes_table = self.state.nodes
        out["document_nodes"] = nodes_table.live_nodes
        out["document_postings"] = nodes_table.live_postings
        out["document_weights_recomputed"] = nodes_table.weights_recomputed
        out["node_compactions"] = nodes_table.compactions
        groups = nodes_table.groups
        out["kernel_groups"] = 0 if groups is None else len(groups.log_a)
        return out
