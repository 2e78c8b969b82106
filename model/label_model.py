"""The label model both families share: ``p_l(n)`` of every label over the count tables (MODEL.md sections 1-5).

MNB scores with it alone; TDM smooths its document kernels towards it and adds
the document mixture. It holds no counts (they live in the
:class:`model.state.CountState`, passed to every call), only what derives from
them, valid for one state epoch:

- per class: ``a_l``, ``mu + D(l)`` and ``theta log p(l)`` (:class:`ClassTerms`);
- per term: the posting weights ``w(l, n)`` and ``log p_b(n)``, recomputed lazily
  (:class:`model.postings.PostingCache`).

The label score (MODEL.md section 5, thesis algorithm 1)::

    score(l) = theta * log p(l) + |w|_1 * log a_l + sum_n w_n log p_b(n)
             + sum_n sum_{(l, w(l,n)) in postings(n)} w_n * w(l, n)

Every class gets the first three terms from per-class arrays; only classes in
the posting lists of the document's terms get the last one.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from .batch import PreparedBatch
from .loops.scoring import any_stale, dense_log_posterior, label_joint_scores
from .loops.weights import class_terms as compiled_class_terms, posting_ratios
from .postings import PostingCache
from .smoothing import Smoothing, label_smoothing, log_smoothing_weight, posting_weight
from .spec import ModelSpec

if TYPE_CHECKING:  # pragma: no cover
    from .state import CountState

_EMPTY = np.zeros(0)


class ClassTerms:
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


class LabelModel:
    """Smoothed label distributions and their posting lists, derived from a count state.

    Parameters
    ----------
    spec, params
        The model's parsed spec and resolved numbers (:func:`model.spec.resolve_params`).
    """

    def __init__(self, spec: ModelSpec, params: Mapping[str, Any]) -> None:
        self.smoothing: Smoothing = label_smoothing(spec, params)
        self.theta = params.get("theta", 1.0)
        self.postings = PostingCache()
        self._class_terms: ClassTerms | None = None
        #: Training counts can be fractional (learn-time TF-IDF weights): the refresh keeps each entry's
        #: discounted count per arena position. Whole counts (raw counts, no decay) need no kept pairs: the
        #: refresh discounts each distinct whole count once per call, and the pairs would cost 16 bytes per
        #: arena position (4 per one-entry term).
        self.learn_weighted = spec.weighting is not None and not spec.weighting.startswith("qidf")

    # ------------------------------------------------------------ derived values
    def class_terms(self, state: "CountState") -> ClassTerms:
        """Per-class arrays of the current epoch (recomputed after any update)."""
        cached = self._class_terms
        if cached is not None and cached.epoch == state.epoch:
            return cached
        n = state.classes.capacity
        scale = state.clock.scale()
        smoothing = self.smoothing
        values = smoothing.values(state)
        mu = smoothing.mu
        chain = smoothing.chain
        if chain.forms is None:  # a method without a compiled form: numpy
            mass = state.cls_mass.get(slice(0, n)) * scale
            discount_total = smoothing.label_totals(state, mass, scale, n, values)
            log_a = log_smoothing_weight(mass, discount_total, mu)
            docs = state.cls_docs.get(slice(0, n))
            active = state.cls_refs[:n] > 0
            log_prior = np.full(n, -np.inf)
            if active.any():
                log_prior[active] = self.theta * (np.log(docs[active]) - np.log(state.class_docs_total.value))
            self._class_terms = ClassTerms(state.epoch, scale, values, mu + discount_total, log_a, log_prior)
            return self._class_terms
        head, rest = _EMPTY, _EMPTY
        if not chain.linear:
            head = chain.head_totals(state, scale, n, values)
            if head is None:  # no kept totals (kn under decay): the chain's pass over every entry
                head = chain.label_totals(state, state.cls_mass.get(slice(0, n)) * scale, scale, n, values)
            else:
                rest = np.array(values[1:], dtype=np.float64)
        denominator, log_a, log_prior = np.empty(n), np.empty(n), np.empty(n)
        compiled_class_terms(n, state.cls_mass.hi, state.cls_mass.lo, state.cls_docs.hi, state.cls_docs.lo,
                             state.cls_refs, scale, mu, self.theta, state.class_docs_total.value, head, rest,
                             chain.forms, np.array(values, dtype=np.float64), denominator, log_a, log_prior)
        self._class_terms = ClassTerms(state.epoch, scale, values, denominator, log_a, log_prior)
        return self._class_terms

    def background(self, state: "CountState", terms: np.ndarray) -> np.ndarray:
        """``p_b(n)`` for known term ids."""
        return self.smoothing.background_probability(state.term_mass.get(terms), state.total_mass.value, state.n_vocab)

    def refresh(self, state: "CountState", terms: np.ndarray) -> None:
        """Recompute the posting lists of ``terms`` that an update made stale (the lazy step)."""
        postings, arena = self.postings, state.arena
        if (len(postings.computed_at) >= len(arena.start) and arena.counting
                and not any_stale(postings.computed_at, terms, state.epoch)):
            return  # compiled check: the common answer when scoring is that every list is fresh
        smoothing = self.smoothing
        forms = smoothing.chain.forms
        affine = smoothing.background.affine(state.total_mass.value, state.n_vocab) if len(terms) else None
        if forms is None or affine is None:  # a method without a compiled form: numpy
            self.postings.refresh(state.arena, terms, state.epoch,
                                  lambda stale, index, lengths: self._build_postings(state, stale, index, lengths))
            return
        scale = state.clock.scale()
        constant = smoothing.constant_weight
        if constant is not None:  # mu + D(l) = a C(l) (Jelinek-Mercer: beta C(l)): no per-class pass needed
            values, denominator, by_mass = smoothing.values(state), np.array([constant]), True
        else:
            derived = self.class_terms(state)
            values, denominator, by_mass = derived.values, derived.denominator, False
        if not arena.counting:  # from the first score on, the entry loops keep the arena's count copy
            arena.copy_counts(state.ent_count.hi, state.ent_count.lo)
        postings.reserve(arena)
        args = (terms, postings.computed_at, state.epoch, arena.start, arena.length, arena.cls, arena.count,
                scale, forms, np.array(values, dtype=np.float64), denominator,
                by_mass, state.cls_mass.hi, state.cls_mass.lo, state.term_mass.hi, state.term_mass.lo, *affine,
                postings.log_background, *postings.kept_discounts(len(arena.slot), tuple(values),
                                                                  self.learn_weighted or state.clock.half_life is not None),
                *postings.whole_count_memo())
        n, stale = posting_ratios(*args, postings.ratio, postings.position)
        if n < 0:  # the scratch is too small: grow it, then compute (nothing was changed)
            postings.reserve_scratch(-n)
            n, stale = posting_ratios(*args, postings.ratio, postings.position)
        postings.store(n, stale)

    def _build_postings(self, state: "CountState", terms: np.ndarray, index: np.ndarray,
                        lengths: np.ndarray) -> np.ndarray:
        """Posting weights of ``terms`` from the count tables."""
        classes = state.arena.cls[index]
        scale = state.clock.scale()
        counts = state.ent_count.get(state.arena.slot[index]) * scale
        constant = self.smoothing.constant_weight
        if constant is not None:  # mu + D(l) = a C(l) (Jelinek-Mercer: beta C(l)): no per-class pass needed
            values, denominator = self.smoothing.values(state), constant * state.cls_mass.get(classes) * scale
        else:
            derived = self.class_terms(state)
            values, denominator = derived.values, derived.denominator[classes]
        discounts = self.smoothing.discount(counts, values)
        term_background = self.background(state, terms)
        self.postings.log_background[terms] = np.log(term_background)  # read by the kernel, fresh as the postings
        background = np.repeat(term_background, lengths)
        weights = posting_weight(counts, discounts, denominator, background)
        return np.maximum(weights, 0.0)  # a fully discounted entry adds nothing (guards -0.0 and round-off)

    # ------------------------------------------------------------ scores
    def log_posteriors(self, state: "CountState", batch: PreparedBatch, active: np.ndarray) -> np.ndarray:
        """Normalized log posteriors over the ``active`` classes: the label score, compiled and fused."""
        derived = self.class_terms(state)
        self.refresh(state, batch.terms)
        out = np.empty((batch.n_docs, len(active)))
        arena = state.arena
        dense_log_posterior(batch.n_docs, batch.owner, batch.terms, batch.weights,
                            self.postings.log_background, arena.start, arena.length, arena.cls,
                            self.postings.weight, active, derived.log_prior, derived.log_a, out)
        return out

    def joint_log_scores(self, state: "CountState", batch: PreparedBatch) -> np.ndarray:
        """The label score of every class id, unnormalized: shape ``(batch.n_docs, class capacity)``."""
        derived = self.class_terms(state)
        self.refresh(state, batch.terms)  # also brings log p_b(n) of the batch's terms up to date
        out = np.empty((batch.n_docs, state.classes.capacity))
        arena = state.arena
        label_joint_scores(batch.owner, batch.terms, batch.weights, self.postings.log_background, arena.start,
                           arena.length, arena.cls, self.postings.weight, derived.log_prior, derived.log_a, out)
        return out

    # ------------------------------------------------------------ bookkeeping
    def cache_arrays(self) -> list[np.ndarray]:
        """Arrays kept only to score fast (posting weights, a discount's cache)."""
        return [v for v in vars(self.postings).values() if isinstance(v, np.ndarray)] + self.smoothing.cache_arrays()

    def stats(self, state: "CountState") -> dict[str, Any]:
        return {"stale_postings_recomputed": self.postings.recomputed,
                "postings": self.postings.stored_postings(state.arena)}
