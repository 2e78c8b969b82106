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

from typing import Any, Sequence

import numpy as np

from . import smoothing
from .base import GenerativeTextModel, PreparedBatch
from .index import PostingCache


class _ClassTerms:
    """Per-class quantities of one model epoch (arrays over class ids)."""

    __slots__ = ("epoch", "scale", "delta", "denominator", "log_a", "log_prior")

    def __init__(self, epoch: int, scale: float, delta: float, denominator: np.ndarray, log_a: np.ndarray,
                 log_prior: np.ndarray) -> None:
        self.epoch = epoch
        self.scale = scale
        self.delta = delta
        self.denominator = denominator  # mu + D(l), true units
        self.log_a = log_a  # log a_l
        self.log_prior = log_prior  # theta * log p(l); -inf for unused ids


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

    # ------------------------------------------------------------ derived values
    def _delta(self) -> float:
        delta = self.params.get("delta", 0.0)
        return self.state.kneser_ney_delta() if delta == "kn" else float(delta)

    def class_terms(self) -> _ClassTerms:
        """Per-class arrays of the current epoch (recomputed after any update)."""
        state = self.state
        cached = self._class_terms
        if cached is not None and cached.epoch == state.epoch:
            return cached
        n = state.classes.capacity
        scale = state.clock.scale()
        delta = self._delta()
        beta = self.params.get("beta", 0.0)
        mu = self.params.get("mu", 0.0) if self.spec.dp else 0.0
        mass = state.cls_mass.get(slice(0, n)) * scale
        if self.spec.linear_discount:
            discount_total = beta * mass if self.spec.jm else np.zeros(n)
        else:  # ad/pd are not linear in the counts: sum the entry discounts
            used = state.ent_used
            counts = state.ent_count.get(slice(0, used)) * scale
            discount_total = np.bincount(state.ent_class[:used], smoothing.entry_discount(counts, self.spec, beta, delta),
                                         minlength=n)[:n]
        log_a = smoothing.log_smoothing_weight(mass, discount_total, mu)
        docs = state.cls_docs.get(slice(0, n))
        active = state.cls_refs[:n] > 0
        log_prior = np.full(n, -np.inf)
        if active.any():
            theta = self.params.get("theta", 1.0)
            log_prior[active] = theta * (np.log(docs[active]) - np.log(state.class_docs_total.value))
        self._class_terms = _ClassTerms(state.epoch, scale, delta, mu + discount_total, log_a, log_prior)
        return self._class_terms

    def background(self, terms: np.ndarray) -> np.ndarray:
        """``p_b(n)`` for known term ids."""
        state = self.state
        return smoothing.background_prob(state.term_mass.get(terms), state.total_mass.value, state.n_vocab, self.spec,
                                         self.params.get("ups", 0.0))

    def _build_postings(self, terms: np.ndarray, index: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """Posting weights of ``terms`` from the count tables (the lazy recomputation)."""
        state = self.state
        derived = self.class_terms()
        counts = state.ent_count.get(state.arena.slot[index]) * derived.scale
        discounts = smoothing.entry_discount(counts, self.spec, self.params.get("beta", 0.0), derived.delta)
        background = np.repeat(self.background(terms), lengths)
        weights = smoothing.posting_weight(counts, discounts, derived.denominator[state.arena.cls[index]], background)
        return np.maximum(weights, 0.0)  # a fully discounted entry adds nothing (guards -0.0 and round-off)

    # ------------------------------------------------------------ the kernel
    def _joint_log_scores(self, batch: PreparedBatch) -> np.ndarray:
        state = self.state
        derived = self.class_terms()
        n_docs, n_classes = batch.n_docs, state.classes.capacity
        terms, weights, owner = batch.terms, batch.weights, batch.owner
        length = np.bincount(owner, weights, minlength=n_docs)  # |w|_1
        smooth = np.bincount(owner, weights * np.log(self.background(terms)), minlength=n_docs)
        classes, posting_weights, lengths = self.postings.gather(state.arena, terms, state.epoch, self._build_postings)
        contributions = posting_weights * np.repeat(weights, lengths)
        if n_docs == 1:
            matched = np.bincount(classes, contributions, minlength=n_classes)[None, :]
        else:
            cell = np.repeat(owner, lengths) * n_classes + classes
            matched = np.bincount(cell, contributions, minlength=n_docs * n_classes).reshape(n_docs, n_classes)
        return (derived.log_prior[None, :] + length[:, None] * derived.log_a[None, :] + smooth[:, None]) + matched

    def stats(self) -> dict[str, Any]:
        out = super().stats()
        out["stale_postings_recomputed"] = self.postings.recomputed
        out["postings"] = self.postings.stored_postings(self.state.arena)
        return out
