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
``p_l(n)`` the label model of :class:`model.label_model.LabelModel` (generalized
smoothing over the background, as in MNB) estimated from *length-normalized* document counts
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
memory bound expires light documents); the document nodes
(:mod:`model.document_nodes`) are a cache kept in step with it, rebuilt after a
restore, plus one number per document that the state cannot give back after
TF-IDF weighting: the document's total weight ``|c_i|_1`` (see :meth:`TDM.extra_state`).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .base import GenerativeTextModel
from .arrays import distinct_sorted
from .batch import PreparedBatch
from .document_nodes import DocumentNodes, MissingLengthsError
from .label_model import LabelModel
from .loops.mixture import COUNTERS, log_mixtures
from .loops.scoring import any_stale
from .loops.node_postings import copy_needed, node_posting_ratios, nodes_keep_positive
from .loops.weights import LINEAR, POWER
from .persistence import ExtraState
from .smoothing import kernel_smoothing
from .spec import parse_spec

#: TDM's own defaults where the scale differs from MNB's: label counts are length-normalized
#: (``mu`` counts documents, not words), kernels see one document. Chosen on the development
#: splits of r8, r52 and webkb (docs/MODEL_NOTES.md); other numbers keep the spec defaults.
TDM_DEFAULTS = {"mu": 10.0, "ups": 1.0, "kmu": 5.0, "kdelta": 0.8}

#: Documents whose decayed weight falls below this expire when the model decays
#: and no ``prune_below`` is given: 20 half-lives, a millionth of a fresh document.
DEFAULT_NODE_FLOOR = 2.0**-20
KERNEL_SUMS = ("exact", "binned")
#: Name of the per-document array of ``|c_i|_1`` in the extra state (and in snapshots).
LENGTHS = "tdm_document_lengths"

#: Scratch size (cells) for dense per-chunk arrays in posting builds.
_CHUNK_CELLS = 1 << 22


class TDM(GenerativeTextModel):
    """Tied Document Mixture over a stream: exact sparse inference, decay, unlearning, expiry.

    Same API as :class:`model.mnb.MNB` (a sibling: both score with a
    :class:`model.label_model.LabelModel`); the spec carries kernel affixes
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
    node_pruning : bool
        Leave out of each label's mixture the groups, posting lists and document nodes whose
        total is provably below float64 round-off of that label's mixture or of the best label's
        joint score (:mod:`model.loops.mixture` states the inequality): every posterior stays
        within ``2**-51`` of the unpruned one, every log posterior of a label with posterior above
        ``1e-6`` within ``1e-9``, and scoring stops reading long common-word posting lists once no
        document node not met yet can matter. ``False`` sums everything (exact log posteriors
        even for labels far below round-off of the best).
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
    #: Score a document by the node pass of :func:`model.loops.mixture.log_mixtures` (every node summed
    #: directly, no groups, no stop tests) when its postings number at least this many times the nodes
    #: (then nearly every node is met and every posting is read anyway); ``math.inf``: never. Chosen by
    #: ``bench.tdm_dense`` (docs/PERFORMANCE.md, must-show 4); exact either way (tests/test_tdm_node_pass.py).
    node_pass_after = 2.0

    def __init__(self, spec: str = "tdm_uc_jm_dp_kpd_kdp", *, kernel_sum: str = "exact",
                 kernel_bin_width: float = 0.05, node_pruning: bool = True, prune_below: float | None = None,
                 half_life: float | None = None, **kwargs: Any) -> None:
        if kernel_sum not in KERNEL_SUMS:
            raise ValueError(f"kernel_sum must be one of {KERNEL_SUMS}, got {kernel_sum!r}")
        if not (kernel_bin_width > 0 and math.isfinite(kernel_bin_width)):
            raise ValueError("kernel_bin_width must be positive")
        self.kernel_sum = kernel_sum
        self.kernel_bin_width = float(kernel_bin_width)
        self.node_pruning = bool(node_pruning)
        self._extra_lengths: dict[str, float] | None = None
        if prune_below is None and half_life is not None:
            prune_below = DEFAULT_NODE_FLOOR
        free = parse_spec(spec).free_params
        for name, value in TDM_DEFAULTS.items():
            if name in free and kwargs.get(name) is None:
                kwargs[name] = value
        super().__init__(spec, prune_below=prune_below, half_life=half_life, **kwargs)
        # a document posting: node and count, and in the weight cache node and weight (max_bytes counts it)
        self.state.family_doc_term_bytes = 24

    # ------------------------------------------------------------ state and caches
    def rebuild_caches(self) -> None:
        """(Re)build the caches: the label model and the document nodes (from the state's documents)."""
        super().rebuild_caches()
        self.labels = LabelModel(self.spec, self.params)
        state = self.state
        self.nodes = DocumentNodes(kernel_smoothing(self.spec, self.params), state)
        state.observer = self.nodes  # every document that enters or leaves the state passes the nodes
        if state.docs:
            try:
                self.nodes.rebuild(state, self._extra_lengths, self._learns_with_idf())
            except MissingLengthsError:
                self.nodes.missing_lengths = True  # a restore in progress: the lengths come next
        self._extra_lengths = None

    def _training_weigher(self):
        # learns c / |c|_1; that depends on the document alone, so only learn-time TF-IDF
        # makes learning depend on earlier documents (base _learns_with_idf)
        return self.nodes.normalizing(super()._training_weigher())

    def config(self) -> dict[str, Any]:
        out = super().config()
        out["kernel_sum"] = self.kernel_sum
        out["kernel_bin_width"] = self.kernel_bin_width
        if not self.node_pruning:  # named only when off, so configurations of the default are unchanged
            out["node_pruning"] = False
        return out

    # ------------------------------------------------------------ state beyond the CountState
    def extra_state(self) -> ExtraState:
        """The TDM options and ``|c_i|_1`` of every live document (one value each, in the state's order).

        The lengths are needed to restore models that learn TF-IDF weights
        (``ti``, ``tXi``, ``tiX``, ``tXiX``); others could recompute them from raw counts.
        """
        lengths = self.nodes.document_lengths()
        return ExtraState({"kernel_sum": self.kernel_sum, "kernel_bin_width": self.kernel_bin_width},
                          {LENGTHS: np.array([lengths[d] for d in self.state.docs], dtype=np.float64)})

    def restore_extra_state(self, extra: ExtraState) -> None:
        """Take :meth:`extra_state` back after the CountState was replaced (rebuilds the nodes)."""
        self._restore_tied(extra)  # (a TDM has none: refuses per-term arrays)
        lengths = extra.per_document.get(LENGTHS)
        if lengths is None or len(lengths) != len(self.state.docs):
            raise ValueError("TDM snapshot: document lengths missing or not one per document")
        self.kernel_sum = str(extra.meta.get("kernel_sum", self.kernel_sum))
        self.kernel_bin_width = float(extra.meta.get("kernel_bin_width", self.kernel_bin_width))
        self._extra_lengths = dict(zip(self.state.docs, np.asarray(lengths, dtype=np.float64).tolist()))
        self.rebuild_caches()

    # ------------------------------------------------------------ document posting weights
    def _build_document_weights(self, terms: np.ndarray) -> None:
        """Recompute ``v_i(n)`` for the postings of ``terms`` (the lazy step; O(their postings))."""
        state, labels, nodes_table = self.state, self.labels, self.nodes
        nodes_table.drop_dead_postings(terms)
        fills = nodes_table.post_fill[terms]
        term_list = terms.tolist()
        if not fills.sum():
            nodes_table.store_weights(term_list, None, None, fills, state.epoch)
            return
        derived = labels.class_terms(state)
        label_forms, kernel_forms = labels.smoothing.chain.forms, nodes_table.smoothing.chain.forms
        if label_forms is not None and kernel_forms is not None:  # the compiled step: same operations, in place
            class_a, background = np.exp(derived.log_a), labels.background(state, terms)
            if self._kernel_keeps_nothing(derived, class_a, background):
                nodes_table.store_zero_weights(terms, fills, state.epoch)
                return
            nodes, ratio = np.empty(int(fills.sum()), dtype=np.int32), np.empty(int(fills.sum()))
            node_posting_ratios(terms, nodes_table.post_start, nodes_table.post_fill, nodes_table.post_node,
                                nodes_table.post_count, nodes_table.node_class, nodes_table.node_factor,
                                nodes_table.node_length, nodes_table.node_discount, derived.scale, label_forms,
                                np.array(derived.values, dtype=np.float64), class_a, derived.denominator,
                                background, kernel_forms, np.array(nodes_table.values, dtype=np.float64),
                                float(nodes_table.smoothing.mu), np.zeros(state.classes.capacity), nodes, ratio)
            weights = np.log1p(ratio)
            np.maximum(weights, 0.0, out=weights)  # a fully discounted posting adds nothing
            nodes_table.store_weights(term_list, nodes, weights, fills, state.epoch)
            return
        index = nodes_table.posting_index(terms)
        nodes, counts = nodes_table.post_node[index], nodes_table.post_count[index]
        owner = np.repeat(np.arange(len(terms)), fills)
        classes = nodes_table.node_class[nodes].astype(np.int64)
        # C(l, n) of the label model, summed afresh from the documents holding n
        contributions = nodes_table.node_factor[nodes] * (counts / nodes_table.node_length[nodes])
        n_classes = state.classes.capacity
        keys = owner * n_classes + classes
        if len(terms) * n_classes <= _CHUNK_CELLS:
            label_counts = np.bincount(keys, contributions, minlength=len(terms) * n_classes)[keys]
        else:
            distinct, inverse = np.unique(keys, return_inverse=True)
            label_counts = np.bincount(inverse, contributions, minlength=len(distinct))[inverse]
        label_counts *= derived.scale
        label_discounts = labels.smoothing.discount(label_counts, derived.values)
        background = labels.background(state, terms)[owner]
        # p_l(n) = a_l * (p_b(n) + (C(l,n) - D(l,n)) / (mu + D(l)))
        label_prob = np.exp(derived.log_a[classes]) * (background + (label_counts - label_discounts) / derived.denominator[classes])
        kernel_kept = counts - nodes_table.smoothing.discount(counts, nodes_table.values)
        weights = np.log1p(kernel_kept / ((nodes_table.smoothing.mu + nodes_table.node_discount[nodes]) * label_prob))
        np.maximum(weights, 0.0, out=weights)  # a fully discounted posting adds nothing
        nodes_table.store_weights(term_list, nodes, weights, fills, state.epoch)

    def _kernel_keeps_nothing(self, derived, class_a: np.ndarray, background: np.ndarray) -> bool:
        """Whether every posting weight :func:`model.loops.node_postings.node_posting_ratios` would give is
        exactly ``+0.0`` (then the compiled step is skipped; ``kdelta=1`` or ``kbeta=1`` tunes into this).

        The kernel's first discount step takes the whole count (``kjm`` with ``kbeta=1``: ``1.0 * c``, ``kpd``
        with ``kdelta=1``: ``min(c, 1.0 * c**1.0)``, both exactly ``c``) and the later steps, of nothing, add
        exactly 0 (their numbers finite and >= 0), so ``c - K(c) = +0.0`` for every (positive, finite) posting
        count. Each ratio is then ``+0.0`` exactly when its denominator ``(kmu + K_i) * p_l(n)`` is positive
        (or +inf), not 0 or NaN; that is checked from lower bounds (rounding is monotone): ``kmu + K_i > 0``
        for live nodes, ``p_l(n) >= a_l * p_b(n) > 0`` when the label chain is empty or one ``jm`` step with
        ``0 <= beta <= 1`` (then ``C - D(C) >= 0``), ``mu + D(l) > 0``, and every ``C(l, n)`` finite (a sum of
        node factors times ``c_i(n) / |c_i|_1 <= 1``). Anything else: ``False`` (the full computation).
        """
        nodes_table = self.nodes
        forms, values = nodes_table.smoothing.chain.forms, np.array(nodes_table.values, dtype=np.float64)
        if not len(forms) or forms[0] not in (LINEAR, POWER) or values[0] != 1.0:
            return False
        if not (np.isfinite(values).all() and (values >= 0.0).all()):
            return False
        label_forms, label_values = self.labels.smoothing.chain.forms, derived.values
        if len(label_forms) > 1 or (len(label_forms) == 1 and not (label_forms[0] == LINEAR
                                                                    and 0.0 <= label_values[0] <= 1.0)):
            return False
        if not (len(background) and np.isfinite(background).all()):
            return False
        low_mass, low_a = nodes_keep_positive(nodes_table.n_nodes, nodes_table.node_alive, nodes_table.node_class,
                                              nodes_table.node_discount, float(nodes_table.smoothing.mu),
                                              nodes_table.node_factor, nodes_table.node_length, class_a,
                                              derived.denominator, float(derived.scale))
        return low_mass > 0.0 and low_mass * (low_a * float(background.min())) > 0.0

    # ------------------------------------------------------------ the kernel
    def _log_posteriors(self, batch: PreparedBatch, active: np.ndarray) -> np.ndarray:
        scores = self._joint_log_scores(batch)
        if len(active) != scores.shape[1]:
            scores = scores[:, active]
        peak = scores.max(axis=1, keepdims=True)
        scores -= peak
        scores -= np.log(np.exp(scores).sum(axis=1, keepdims=True))
        return scores

    def _joint_log_scores(self, batch: PreparedBatch) -> np.ndarray:
        """Unnormalized ``log p(w, l)`` of every class id (``-inf`` for unused ids): label score plus mixture."""
        scores = self.labels.joint_log_scores(self.state, batch)  # theta log p(l) + sum_n w_n log p_l(n)
        scores += self._log_mixture(batch, scores)
        return scores

    def _log_mixture(self, batch: PreparedBatch, label_scores: np.ndarray) -> np.ndarray:
        """``log sum_{i in I_l} pi_i prod_n (p_li(n) / p_l(n)) ** w_n`` per document and class (-inf: no nodes).

        One compiled loop (:func:`model.loops.mixture.log_mixtures`): the closed form over the groups
        of equal ``a_i`` plus the matched documents, read from the document postings of the scored
        terms, or, for a document whose postings number :attr:`node_pass_after` times the nodes, the
        node pass (every node's term summed directly; exact kernel sums only); with
        :attr:`node_pruning` it leaves out what is provably below float64 round-off (the inequality is
        in that module's docstring).
        """
        state = self.state
        nodes_table = self.nodes
        nodes_table.sync(state)
        n_docs = batch.n_docs
        out = np.full(label_scores.shape, -np.inf)
        groups = nodes_table.group_table(self.kernel_bin_width if self.kernel_sum == "binned" else None)
        if not len(groups.classes):
            return out
        terms, weights, owner = batch.terms, batch.weights, batch.owner
        if any_stale(nodes_table.weight_epoch, terms, state.epoch):  # compiled: the common answer is none
            known = terms[terms < len(nodes_table.post_fill)]  # terms beyond it have no document postings
            self._build_document_weights(distinct_sorted(known[nodes_table.weight_epoch[known] != state.epoch]))
        if copy_needed(terms, nodes_table.cache_len, nodes_table.cache_cap, nodes_table.term_bound):
            # zero weights left uncopied (store_zero_weights) beside weighted terms: log_mixtures reads their nodes
            known = terms[terms < len(nodes_table.post_fill)]
            nodes_table.copy_uncopied(distinct_sorted(known[nodes_table.uncopied(known)]))
        row_start = np.array([0, len(terms)]) if n_docs == 1 else np.searchsorted(owner, np.arange(n_docs + 1))
        acc, met, met_nodes = nodes_table.scratch()
        # the node pass (every node summed, no groups) where the postings outnumber the nodes node_pass_after times
        node_pass = self.node_pass_after if self.kernel_sum == "exact" else math.inf
        log_mixtures(row_start, terms, weights, label_scores, nodes_table.cache_start, nodes_table.cache_len,
                     nodes_table.cache_node, nodes_table.cache_weight, nodes_table.term_bound, nodes_table.node_class,
                     nodes_table.node_log_pi, nodes_table.node_log_a, groups.classes, groups.starts, groups.sizes,
                     groups.log_mass, groups.log_a, max(nodes_table.n_nodes, 1), self.node_pruning, node_pass, acc,
                     met, met_nodes, out, nodes_table.counters)
        return out

    def _scoring_cache_arrays(self) -> list[np.ndarray]:
        return self.labels.cache_arrays()

    def stats(self) -> dict[str, Any]:
        out = super().stats()
        out.update(self.labels.stats(self.state))
        nodes_table = self.nodes
        out["document_nodes"] = nodes_table.live_nodes
        out["document_postings"] = nodes_table.live_postings
        out["document_weights_recomputed"] = nodes_table.weights_recomputed
        out.update({f"scoring_{name}": int(value) for name, value in zip(COUNTERS, nodes_table.counters.tolist())})
        out["node_compactions"] = nodes_table.compactions
        groups = nodes_table.groups
        out["kernel_groups"] = 0 if groups is None else len(groups.log_a)
        return out
