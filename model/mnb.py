"""Multinomial Naive Bayes with generalized smoothing, TF-IDF and prior scaling.

The scoring kernel is the label score of :class:`model.label_model.LabelModel`
(MODEL.md section 5, thesis algorithm 1), computed and normalized in one
compiled pass over the batch (:func:`model.loops.scoring.dense_log_posterior`).
With thousands of classes and a smoothing weight ``a_l`` that is the same for
every class (Jelinek-Mercer), top-k skips the per-class pass (:meth:`MNB._sparse_topk`).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
from sortedcontainers import SortedList

from .arrays import CompensatedSum, grow
from .base import GenerativeTextModel
from .batch import PreparedBatch
from .label_model import LabelModel
from .loops.topk import sparse_accumulate, sparse_topk_finish

#: With at least this many classes, top-k of Jelinek-Mercer models skips the per-class pass (sparse top-k).
SPARSE_TOPK_MIN_CLASSES = 2048


class _PriorIndex:
    """Classes ordered by prior, and ``sum_l N(l)**theta``, kept up to date incrementally.

    Both are in stored (forward-decay) units: decay scales every ``N(l)`` alike,
    so neither the order nor ``p(l) = N(l) / sum N`` changes as time passes.
    Updated from the classes the state reports as touched; rebuilt after a
    rebase (every stored value rescaled).
    """

    def __init__(self, theta: float) -> None:
        self.theta = theta
        self.order = SortedList()  # (-N(l), class id): best prior first, ties by id
        self.key: dict[int, tuple[float, int]] = {}
        self.power: dict[int, float] = {}
        self.power_sum = CompensatedSum()
        self.massless: set[int] = set()  # classes without counts (only empty documents): a_l = 1, not beta
        self.rebases = -1
        #: Per class id, for the compiled kernel: ``theta log N(l)`` and ``N(l)**theta`` (stored units).
        self.log_power = np.zeros(0)
        self.power_of = np.zeros(0)

    def sync(self, state) -> None:
        if self.rebases != state.rebases or state.touched_classes is None:
            self.__init__(self.theta)
            self.rebases = state.rebases
            state.touched_classes = set(state.active_classes().tolist())
        touched, state.touched_classes = state.touched_classes, set()
        if len(self.log_power) < state.classes.capacity:
            self.log_power = grow(self.log_power, state.classes.capacity)
            self.power_of = grow(self.power_of, state.classes.capacity)
        for c in touched:
            old = self.key.pop(c, None)
            if old is not None:
                self.order.remove(old)
                self.power_sum.add(-self.power.pop(c))
            self.massless.discard(c)
            if state.cls_refs[c] > 0:
                if state.cls_entries[c] == 0:
                    self.massless.add(c)
                weight = float(state.cls_docs.get(c))
                self.key[c] = (-weight, c)
                self.order.add((-weight, c))
                self.power[c] = weight**self.theta
                self.power_sum.add(self.power[c])
                self.log_power[c] = self.theta * math.log(weight)
                self.power_of[c] = self.power[c]

    def best_excluding(self, excluded, k: int) -> list[int]:
        """The ``k`` best classes by prior among those with ``excluded[c]`` false."""
        out = []
        for _, c in self.order:
            if not excluded[c]:
                out.append(c)
                if len(out) == k:
                    break
        return out


class MNB(GenerativeTextModel):
    """Multinomial Naive Bayes over a stream: exact sparse inference, decay, unlearning.

    Parameters
    ----------
    spec : str
        Affix string (see :mod:`model.spec`), e.g. ``"uc_pd_jm_dp_tXiX_ps"``.
    multilabel : {"per_label", "powerset"}
        How documents with several labels are counted: under each label, or as
        one class per label set.
    tokenizer : Tokenizer, optional
        Applied to text documents (default: :class:`model.text.Tokenizer`).
    half_life : float, optional
        Half-life of the time decay in event-time units (seconds); ``None``
        disables decay.
    prune_below, max_documents : optional
        The memory bound: documents whose decayed weight falls below
        ``prune_below``, and the oldest beyond ``max_documents``, are unlearned.
    **params
        The numbers of the spec, named as in MODEL.md: ``beta``, ``mu``,
        ``delta`` (a number or ``"kn"``), ``ups``, ``phi``, ``ups_idf``, ``theta``.

    Examples
    --------
    >>> m = MNB("uc_pd_jm_dp_ps", beta=0.3, mu=1, delta=0.6, ups=0.2, theta=1.0)
    >>> m.learn_one("cheap pills buy now", "spam", id="m1")
    True
    >>> m.learn_one("meeting notes for monday", "ham", id="m2")
    True
    >>> m.learn_one("buy cheap watches now", "spam", id="m3")
    True
    >>> m.predict_one("cheap watches")
    'spam'
    >>> round(m.predict_proba_one("monday meeting")["ham"], 3)
    0.679
    >>> m.forget("m2"); m.classes_
    True
    ['spam']
    """

    family = "mnb"

    def rebuild_caches(self) -> None:
        super().rebuild_caches()
        self.labels = LabelModel(self.spec, self.params)
        self._prior_index: _PriorIndex | None = None
        self._scratch: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # sparse accumulator

    # ------------------------------------------------------------ the kernel
    def _log_posteriors(self, batch: PreparedBatch, active: np.ndarray) -> np.ndarray:
        return self.labels.log_posteriors(self.state, batch, active)

    def _scoring_cache_arrays(self) -> list[np.ndarray]:
        return self.labels.cache_arrays()

    # ------------------------------------------------------------ sparse top-k
    def uses_sparse_topk(self) -> bool:
        """Top-k takes the sparse path: ``a_l`` is the same for every class, and there are many classes."""
        return (self.labels.smoothing.constant_weight is not None
                and len(self.state.classes) >= SPARSE_TOPK_MIN_CLASSES)

    def predict_topk_many(self, docs, k: int):
        if k < 1:
            raise ValueError("k must be at least 1")
        if not self.uses_sparse_topk():
            return super().predict_topk_many(docs, k)
        return self._sparse_topk(self._prepare(list(docs)), k)

    def _sparse_topk(self, batch: PreparedBatch, k: int) -> list[list[tuple[Any, float]]]:
        """Exact top-k without a pass over all classes (Jelinek-Mercer: ``a_l = beta`` for all).

        A class without a posting among the document's terms scores
        ``theta log p(l) + |w|_1 log beta + sum_n w_n log p_b(n)``: its rank is its
        prior's, so the best of them come from the prior-ordered index, and
        their share of the normalizer is ``(sum_l p(l)**theta - sum_matched
        p(l)**theta) * beta**|w|_1 * prod_n p_b(n)**w_n``. Cost per document:
        the postings touched plus ``k`` steps down the prior order.
        """
        state, labels = self.state, self.labels
        if self._prior_index is None or self._prior_index.theta != self.params.get("theta", 1.0):
            self._prior_index = _PriorIndex(self.params.get("theta", 1.0))
        index = self._prior_index
        index.sync(state)
        theta = index.theta
        log_total = math.log(state.class_docs_total.value)
        log_power_sum = math.log(index.power_sum.value) - theta * log_total  # log sum_l p(l)**theta
        n_docs, terms, weights, owner = batch.n_docs, batch.terms, batch.weights, batch.owner
        length = np.bincount(owner, weights, minlength=n_docs)
        smooth = np.bincount(owner, weights * np.log(labels.background(state, terms)), minlength=n_docs)
        base = length * math.log(labels.smoothing.constant_weight) + smooth  # the shared part of every score
        arena = state.arena
        labels.refresh(state, terms)
        capacity = state.classes.capacity
        if self._scratch is None or len(self._scratch[0]) < capacity:
            self._scratch = (np.zeros(capacity), np.zeros(capacity, dtype=np.bool_), np.zeros(capacity, dtype=np.int64))
        scratch, marked, touched = self._scratch
        bounds = np.searchsorted(owner, np.arange(n_docs + 1)).tolist()
        names = state.classes.names
        out = []
        massless = np.array(sorted(index.massless), dtype=np.int64)
        massless_list = massless.tolist()
        top_ids, top_scores = np.empty(k, dtype=np.int64), np.empty(k)
        power_total = math.exp(log_power_sum)
        theta_log_total = theta * log_total
        class_total_power = math.exp(theta_log_total)  # sum_l p(l)**theta = sum_l N(l)**theta / this
        for d in range(n_docs):
            lo, hi = bounds[d], bounds[d + 1]
            hit = sparse_accumulate(terms[lo:hi], weights[lo:hi], arena.start, arena.length, arena.cls,
                                    labels.postings.weight, scratch, marked, touched)
            for c in massless_list:  # scored explicitly too: excluded from the prior-ordered rest
                marked[c] = True
            others = index.best_excluding(marked, k)  # before the kernel below clears the marks
            base_d = float(base[d])
            # the explicit classes (with postings here, or without counts: log a_l = 0), compiled
            n_top, peak, total, matched_power = sparse_topk_finish(
                touched, hit, scratch, marked, massless, index.log_power, index.power_of, theta_log_total,
                base_d, float(smooth[d]), k, top_ids, top_scores)
            other_scores = [(float(index.log_power[c]) - theta_log_total) + base_d for c in others]  # as the kernel
            # the unmatched classes' total share: (sum_all p**theta - sum_matched p**theta) * exp(base)
            rest = power_total - matched_power / class_total_power
            log_rest = (math.log(rest) + base_d) if rest > 0 else -math.inf
            top = max(peak, log_rest)
            log_norm = top + math.log(total * math.exp(peak - top) + math.exp(log_rest - top))
            candidates = list(zip(top_scores[:n_top].tolist(), top_ids[:n_top].tolist())) + list(zip(other_scores, others))
            candidates.sort(key=lambda sc: (-sc[0], sc[1]))
            out.append([(self._class_name(names[c]), math.exp(score - log_norm)) for score, c in candidates[:k]])
        return out

    def stats(self) -> dict[str, Any]:
        out = super().stats()
        out.update(self.labels.stats(self.state))
        return out
