"""Multinomial Naive Bayes with generalized smoothing, TF-IDF and prior scaling.

The scoring kernel is the thesis's sparse posterior inference (MODEL.md
section 5, thesis algorithm 1)::

    score(l) = theta * log p(l) + |w|_1 * log a_l + sum_n w_n log p_b(n)
             + sum_n sum_{(l, w(l,n)) in postings(n)} w_n * w(l, n)

Every class gets the first three terms from per-class arrays; only classes in
the posting lists of the document's terms get the last one. The posting
weights ``w(l, n)`` live in a :class:`model.index.PostingCache`, computed
lazily (see that module), from the formulas in :mod:`model.smoothing`.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
from sortedcontainers import SortedList

from .base import GenerativeTextModel, PreparedBatch
from .postings import PostingCache
from .loops.scoring import accumulate_postings, dense_log_posterior
from .loops.topk import sparse_accumulate, sparse_topk_finish
from .arrays import CompensatedSum, grow
from .smoothing import label_smoothing, log_smoothing_weight, posting_weight

#: With at least this many classes, top-k of Jelinek-Mercer models skips the per-class pass (sparse top-k).
SPARSE_TOPK_MIN_CLASSES = 2048


class _ClassTerms:
    """Per-class quantities of one model epoch (arrays over class ids)."""

    __slots__ = ("epoch", "scale", "values", "denominator", "log_a", "log_prior")

    def __init__(self, epoch: int, scale: float, values: tuple[float, ...], denominator: np.ndarray,
                 log_a: np.ndarray, log_prior: np.ndarray) -> None:
        self.epoch = epoch
        self.scale = scale
        self.values = values  # the discounts' numbers in force (a Kneser-Ney delta moves with the counts)
        self.denominator = denominator  # mu + D(l), true units
        self.log_a = log_a  # log a_l
        self.log_prior = log_prior  # theta * log p(l); -inf for unused ids


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

    def _init_caches(self) -> None:
        self.postings = PostingCache()
        self._class_terms: _ClassTerms | None = None
        self._prior_index: _PriorIndex | None = None
        self._scratch: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # sparse accumulator
        self.smoothing = label_smoothing(self.spec, self.params)

    # ------------------------------------------------------------ derived values
    def class_terms(self) -> _ClassTerms:
        """Per-class arrays of the current epoch (recomputed after any update)."""
        state = self.state
        cached = self._class_terms
        if cached is not None and cached.epoch == state.epoch:
            return cached
        n = state.classes.capacity
        scale = state.clock.scale()
        smoothing = self.smoothing
        values = smoothing.values(state)
        mu = smoothing.mu
        mass = state.cls_mass.get(slice(0, n)) * scale
        discount_total = smoothing.label_totals(state, mass, scale, n, values)
        log_a = log_smoothing_weight(mass, discount_total, mu)
        docs = state.cls_docs.get(slice(0, n))
        active = state.cls_refs[:n] > 0
        log_prior = np.full(n, -np.inf)
        if active.any():
            theta = self.params.get("theta", 1.0)
            log_prior[active] = theta * (np.log(docs[active]) - np.log(state.class_docs_total.value))
        self._class_terms = _ClassTerms(state.epoch, scale, values, mu + discount_total, log_a, log_prior)
        return self._class_terms

    def background(self, terms: np.ndarray) -> np.ndarray:
        """``p_b(n)`` for known term ids."""
        state = self.state
        return self.smoothing.background_probability(state.term_mass.get(terms), state.total_mass.value, state.n_vocab)

    @property
    def pure_jelinek_mercer(self) -> bool:
        """``a_l = beta`` for every class: no Dirichlet mass, no ad/pd discount."""
        return self.smoothing.constant_weight is not None

    def _build_postings(self, terms: np.ndarray, index: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """Posting weights of ``terms`` from the count tables (the lazy recomputation)."""
        state = self.state
        classes = state.arena.cls[index]
        scale = state.clock.scale()
        counts = state.ent_count.get(state.arena.slot[index]) * scale
        constant = self.smoothing.constant_weight
        if constant is not None:  # mu + D(l) = a C(l) (Jelinek-Mercer: beta C(l)): no per-class pass needed
            values, denominator = self.smoothing.values(state), constant * state.cls_mass.get(classes) * scale
        else:
            derived = self.class_terms()
            values, denominator = derived.values, derived.denominator[classes]
        discounts = self.smoothing.discount(counts, values)
        term_background = self.background(terms)
        self.postings.log_background[terms] = np.log(term_background)  # read by the kernel, fresh as the postings
        background = np.repeat(term_background, lengths)
        weights = posting_weight(counts, discounts, denominator, background)
        return np.maximum(weights, 0.0)  # a fully discounted entry adds nothing (guards -0.0 and round-off)

    # ------------------------------------------------------------ the kernel
    def _joint_log_scores(self, batch: PreparedBatch) -> np.ndarray:
        state = self.state
        derived = self.class_terms()
        n_docs, n_classes = batch.n_docs, state.classes.capacity
        terms, weights, owner = batch.terms, batch.weights, batch.owner
        length = np.bincount(owner, weights, minlength=n_docs)  # |w|_1
        smooth = np.bincount(owner, weights * np.log(self.background(terms)), minlength=n_docs)
        self.postings.refresh(state.arena, terms, state.epoch, self._build_postings)
        scores = (derived.log_prior[None, :] + length[:, None] * derived.log_a[None, :]) + smooth[:, None]
        matched = np.zeros((n_docs, n_classes))
        accumulate_postings(owner, terms, weights, state.arena.start, state.arena.length, state.arena.cls,
                            self.postings.weight, matched)
        return scores + matched

    # ------------------------------------------------------------ sparse top-k
    def uses_sparse_topk(self) -> bool:
        return (self.family == "mnb" and self.pure_jelinek_mercer
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
        state = self.state
        if self._prior_index is None or self._prior_index.theta != self.params.get("theta", 1.0):
            self._prior_index = _PriorIndex(self.params.get("theta", 1.0))
        index = self._prior_index
        index.sync(state)
        theta = index.theta
        log_total = math.log(state.class_docs_total.value)
        log_power_sum = math.log(index.power_sum.value) - theta * log_total  # log sum_l p(l)**theta
        n_docs, terms, weights, owner = batch.n_docs, batch.terms, batch.weights, batch.owner
        length = np.bincount(owner, weights, minlength=n_docs)
        smooth = np.bincount(owner, weights * np.log(self.background(terms)), minlength=n_docs)
        base = length * math.log(self.smoothing.constant_weight) + smooth  # the shared part of every score
        arena = state.arena
        self.postings.refresh(arena, terms, state.epoch, self._build_postings)
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
                                    self.postings.weight, scratch, marked, touched)
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

    def _log_posteriors(self, batch: PreparedBatch, active: np.ndarray) -> np.ndarray:
        if self.family != "mnb":  # TDM adds document-level terms to the kernel
            return super()._log_posteriors(batch, active)
        state = self.state
        derived = self.class_terms()
        self.postings.refresh(state.arena, batch.terms, state.epoch, self._build_postings)
        out = np.empty((batch.n_docs, len(active)))
        dense_log_posterior(batch.n_docs, batch.owner, batch.terms, batch.weights, self.postings.log_background[batch.terms],
                            state.arena.start, state.arena.length, state.arena.cls, self.postings.weight, active,
                            derived.log_prior, derived.log_a, out)
        return out

    def stats(self) -> dict[str, Any]:
        out = super().stats()
        out["stale_postings_recomputed"] = self.postings.recomputed
        out["postings"] = self.postings.stored_postings(self.state.arena)
        return out
