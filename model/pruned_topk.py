"""Top-k with many labels, pruned with per-term upper bounds (MaxScore), exact to a certified bound.

The label score (MODEL.md section 5) of class ``l`` for a document with term weights ``w_n``::

    score(l) = base(l) + S + sum_n w_n w(l, n),   base(l) = theta log p(l) + |w|_1 log a_l,
    S = sum_n w_n log p_b(n),                     w(l, n) >= 0 (0 when l has no posting for n)

so ``score(l) <= prior_max + |w|_1 log_a_max + S + sum_{n: l in postings(n)} w_n max_l' w(l', n)``.

**Certified-negligible pruning.** With ``N`` active labels, ``best`` the best exact score found and
``kth`` the ``k``-th best, a class is left out only when an upper bound of its score is below the
threshold ``min(kth, best - margin)``, ``margin = log N + 40`` by default (a stated posterior tolerance
``tau`` sets ``margin = log N + log(1 + 1/tau)`` instead, below). Then

* the top ``k`` labels are exact: every class left out scores below the ``k``-th best, strictly,
  and the scores computed are the dense kernel's to the last bit (same operations, same order:
  :func:`model.loops.pruned.exact_matched`; the normalizer summed in class-id order; the top ``k``
  ranked on the log posteriors), so ties break the same way (lower class id first);
* the normalizer ``Z = sum_l exp(score(l))`` is computed over the classes scored, ``Z' = Z - R``,
  where the left-out mass ``R < N exp(best - margin) = exp(best) e^-40 <= Z e^-40``. Each
  reported posterior ``p' = exp(score - log Z')`` therefore satisfies

      p <= p' <= p / (1 - e^-40),  i.e.  0 <= p' / p - 1 < e^-40 / (1 - e^-40) < 4.3e-18 < 2^-52,

  below the rounding of the dense sum itself (:data:`RELATIVE_BOUND`; the property tests check it,
  and the same inequality for small margins where classes are left out, with room for rounding).

**A stated posterior tolerance** ``tau`` (``posterior_tolerance`` of the service; ``None``, the default,
is the bound above): ``margin = log N + log(1 + 1/tau)``, so ``R < Z tau / (1 + tau)`` and every
reported posterior satisfies ``p <= p' <= p (1 + tau)`` (plus the rounding of the sums); the top ``k``
labels stay exact whatever ``tau``, since the threshold is never above the ``k``-th best. (Two labels
whose log posteriors agree to the last bits may come in either order: the ranking is on the log
posteriors, and subtracting a normalizer that differs from the dense pass's rounds differently. With
the default margin the normalizer is the dense pass's to the last bit.) It pays where
the labels that the default margin keeps are not needed for the top ``k``: e.g. the labels without
postings of a spec whose ``a_l`` differs per label (visited one by one within the margin). It cannot
pay where the posterior mass itself is spread over most labels (common-word documents over Zipf-sized
labels at 100k: with ``tau = 1e-6`` even an oracle could not leave out one label, with ``1e-3`` 0.5% of
them; docs/PERFORMANCE.md).

**What each piece costs.** Per model epoch (after an update), shared with the dense kernel: the
per-class arrays ``theta log p(l)`` and ``log a_l`` (:meth:`model.label_model.LabelModel.class_terms`,
one compiled pass over the labels) and, here, their maxima over the active labels (one numpy pass).
Per document: the posting refresh and the term maxima of its stale terms (as the dense kernel), the
lists of the terms whose bounds are needed to keep unseen classes below the threshold (term at a
time, in decreasing ``w_n max w(., n)``), ``O(k)`` per posting read for the running threshold, and
for the classes that may reach it a binary search per term (few) or one walk of the document's lists
(many). The classes without any posting among the document's terms (their score is ``base(l) + S``):

* Jelinek-Mercer-only specs (``a_l = beta`` for every class with counts): their mass has a closed
  form, ``(sum_l p(l)**theta - sum_met p(l)**theta) beta**|w|_1 exp(S)``, and the best of them come
  from the prior-ordered index (:class:`PriorIndex`, kept up to date from the classes an update
  touched): ``O(k)`` steps down the prior order; classes without counts (``a_l = 1``) are scored
  explicitly (usually none). No pass over the labels.
* Other specs: they are bounded by ``prior_max + |w|_1 log_a_max + S`` (the per-epoch maxima); when
  that does not rule them out, one compiled pass over the labels settles them one by one (no
  postings, no ``exp`` below the threshold), skipping every block of :data:`BLOCK_SIZE` labels whose
  own maxima (per epoch, :func:`model.loops.pruned.block_maxima`) keep it below the threshold.
  Their mass is a power sum in ``|w|_1`` over the labels, with no closed form: within the default
  margin most blocks stay; with a stated tolerance most are skipped.

A document that meets more than ``N / BUDGET_DIVISOR`` labels, or keeps that many within the
threshold, is scored by the dense pass inside the kernel (:func:`model.loops.pruned.dense_topk`):
the certified margin then keeps most labels, and the dense pass scores them faster.
"""
from __future__ import annotations

import math

import numpy as np
from sortedcontainers import SortedList

from .arrays import ExactSum, grow
from .batch import PreparedBatch
from .loops.pruned import best_unmarked, block_maxima, clear_marks, pruned_candidates, term_maxima

_NONE = np.zeros(0, dtype=np.int64)
_ZERO = np.zeros(1)
#: Margin beyond log N (nats): the mass left out is below ``e^-MARGIN_NATS`` of the normalizer.
MARGIN_NATS = 40.0
#: The pruned path gives up (and the dense pass scores the document) once a document has met more than
#: ``1 / BUDGET_DIVISOR`` of the labels: the certified margin then keeps most of them, and the dense
#: pass scores every label faster than the pruned path scores that many (bench/topk_pruning.py).
BUDGET_DIVISOR = 8
#: Labels per block of the bound on the classes without postings (specs whose ``a_l`` differs per label):
#: a block whose largest prior and ``log a_l`` cannot reach the threshold is skipped whole.
BLOCK_SIZE = 64
#: Bound on ``p' / p - 1`` of every reported posterior (see the module docstring).
RELATIVE_BOUND = math.exp(-MARGIN_NATS) / (1.0 - math.exp(-MARGIN_NATS))


def check_tolerance(tolerance: float | None) -> float | None:
    """``tolerance`` if it is ``None`` (the default bound) or a number in ``(0, 1)``, else ``ValueError``.

    >>> check_tolerance(1e-6)
    1e-06
    >>> check_tolerance(0.0)
    Traceback (most recent call last):
    ...
    ValueError: posterior tolerance must lie in (0, 1) (or be None: exact to e^-40), got 0.0
    """
    if tolerance is None:
        return None
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0.0 < tolerance < 1.0:
        raise ValueError(f"posterior tolerance must lie in (0, 1) (or be None: exact to e^-40), got {tolerance!r}")
    return float(tolerance)


def tolerance_nats(tolerance: float | None = None) -> float:
    """Nats beyond ``log N`` for a relative posterior tolerance ``tau``: ``log(1 + 1/tau)``, so that the mass
    left out is below ``Z tau / (1 + tau)`` and ``p' / p - 1 <= tau``; ``None``: :data:`MARGIN_NATS`.

    >>> round(tolerance_nats(1e-6), 3), tolerance_nats()
    (13.816, 40.0)
    """
    if tolerance is None:
        return MARGIN_NATS
    return math.log1p(1.0 / check_tolerance(tolerance))


def relative_bound(tolerance: float | None = None) -> float:
    """The bound on ``p' / p - 1`` of every reported posterior: ``tau``, or :data:`RELATIVE_BOUND` by default
    (before the rounding of the sums).

    >>> round(relative_bound(1e-3), 15), relative_bound() < 2**-52
    (0.001, True)
    """
    nats = tolerance_nats(tolerance)
    return math.exp(-nats) / (1.0 - math.exp(-nats))


def margin(n_labels: int, tolerance: float | None = None) -> float:
    """The pruning margin in nats: ``log N + 40`` by default, so that ``N e^-margin = e^-40``; with a
    posterior tolerance ``tau``, ``log N + log(1 + 1/tau)``.

    >>> round(margin(100_000), 3), round(margin(100_000, 1e-6), 3)
    (51.513, 25.328)
    """
    return math.log(max(n_labels, 1)) + tolerance_nats(tolerance)


class PriorIndex:
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
        # exact (residuals kept beside the pair): under decay the labels' N(l) span hundreds of binades, and a
        # compensated pair lost old labels' weights beside newer ones that left again
        self.power_sum = ExactSum()
        self.massless: set[int] = set()  # classes without counts (only empty documents): a_l = 1, not beta
        self.rebases = -1
        #: Per class id, for the compiled kernel: ``N(l)**theta`` (stored units).
        self.power_of = np.zeros(0)

    def sync(self, state) -> None:
        if self.rebases != state.rebases or state.touched_classes is None:
            self.__init__(self.theta)
            self.rebases = state.rebases
            state.touched_classes = set(state.active_classes().tolist())
        touched, state.touched_classes = state.touched_classes, set()
        if len(self.power_of) < state.classes.capacity:
            self.power_of = grow(self.power_of, state.classes.capacity)
        for c in touched:
            old = self.key.pop(c, None)
            if old is not None:
                self.order.remove(old)
                self.power_sum.add(-self.power.pop(c))
            self.massless.discard(c)
            self.power_of[c] = 0.0
            if state.cls_refs[c] > 0:
                if state.cls_entries[c] == 0:
                    self.massless.add(c)
                weight = float(state.cls_docs.get(c))
                self.key[c] = (-weight, c)
                self.order.add((-weight, c))
                self.power[c] = weight**self.theta
                self.power_sum.add(self.power[c])
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


class PrunedResult:
    """Per document: the top classes (ids, best first) and their log posteriors, the classes scored
    exactly with theirs (for a posterior threshold), or ``None`` where the dense pass must decide."""

    __slots__ = ("top", "scored", "floor")

    def __init__(self) -> None:
        self.top: list = []
        self.scored: list = []
        self.floor = -math.inf  # every class not in ``scored`` has a log posterior below this


class PrunedTopK:
    """The pruned top-k of one :class:`model.label_model.LabelModel` (its scratch and its caches).

    Parameters
    ----------
    labels : LabelModel
        Whose class terms and posting lists are read.
    """

    def __init__(self, labels) -> None:
        self.labels = labels
        self.term_max = np.zeros(0)
        self.term_max_at = np.zeros(0, dtype=np.int64)
        self.scratch: tuple[np.ndarray, ...] | None = None
        self.maxima: tuple[int, float, float] | None = None  # (epoch, prior_max, log_a_max)
        self.blocks: tuple | None = None  # (epoch, labels, block_prior, block_log_a)
        self.index: PriorIndex | None = None
        #: Counters (a metric and the benchmark's evidence): documents, postings read, candidates, dense fallbacks.
        self.counts = {"documents": 0, "lists": 0, "lists_read": 0, "candidates": 0, "dense": 0}

    def _reserve(self, state) -> None:
        capacity, terms = state.classes.capacity, len(state.arena.start)
        if len(self.term_max) < terms:
            old = len(self.term_max)
            self.term_max = grow(self.term_max, terms)
            self.term_max_at = grow(self.term_max_at, terms)
            self.term_max_at[old:] = -1
        if self.scratch is None or len(self.scratch[0]) < capacity:
            self.scratch = (np.zeros(capacity), np.zeros(capacity, dtype=np.bool_),
                            np.zeros(capacity, dtype=np.int64), np.zeros(capacity, dtype=np.int64),
                            np.zeros(capacity), np.zeros(capacity, dtype=np.bool_))

    def _maxima(self, state, derived) -> tuple[float, float]:
        if self.maxima is None or self.maxima[0] != state.epoch:
            n = state.classes.capacity
            active = state.cls_refs[:n] > 0
            prior_max = float(derived.log_prior[:n][active].max()) if active.any() else -math.inf
            log_a_max = float(derived.log_a[:n][active].max()) if active.any() else 0.0
            self.maxima = (state.epoch, prior_max, log_a_max)
        return self.maxima[1], self.maxima[2]

    def _blocks(self, state, derived, active: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per epoch, the largest ``theta log p(l)`` and ``log a_l`` of each :data:`BLOCK_SIZE` active labels."""
        if self.blocks is None or self.blocks[0] != state.epoch or self.blocks[1] != len(active):
            n_blocks = (len(active) + BLOCK_SIZE - 1) // BLOCK_SIZE
            block_prior, block_log_a = np.empty(n_blocks), np.empty(n_blocks)
            block_maxima(active, derived.log_prior, derived.log_a, BLOCK_SIZE, block_prior, block_log_a)
            self.blocks = (state.epoch, len(active), block_prior, block_log_a)
        return self.blocks[2], self.blocks[3]

    def rank(self, state, batch: PreparedBatch, k: int, active: np.ndarray,
             want_scored: bool = False, tolerance: float | None = None) -> list[PrunedResult | None]:
        """Top-``k`` of the ``active`` classes for every document of ``batch``, each with its exact log
        posterior to within :func:`relative_bound` of ``tolerance`` (:data:`RELATIVE_BOUND` by default;
        exactly the dense pass's where the kernel chose it: too many classes met, or unseen classes not
        ruled out); the classes scored when ``want_scored``. The top-``k`` labels are exact for every
        ``tolerance``. ``None`` only where nothing could be scored (defensive: the caller takes the dense
        pass)."""
        labels = self.labels
        derived = labels.class_terms(state)
        labels.refresh(state, batch.terms)
        self._reserve(state)
        arena, postings = state.arena, labels.postings
        term_maxima(batch.terms, state.epoch, arena.start, arena.length, postings.weight, self.term_max,
                    self.term_max_at)
        prior_max, log_a_max = self._maxima(state, derived)
        constant = labels.smoothing.constant_weight
        index = None
        if constant is not None:
            theta = labels.theta
            if self.index is None or self.index.theta != theta:
                self.index = PriorIndex(theta)
            index = self.index
            index.sync(state)
            log_a_max = math.log(constant)  # classes with counts; those without are scored explicitly
        n_active = len(active)
        cut = margin(n_active, tolerance)
        budget = max(n_active // BUDGET_DIVISOR, k) if BUDGET_DIVISOR > 1 else 2**62  # 1: no budget (tests)
        acc, marked, touched, cand_ids, cand_scores, chosen = self.scratch
        top_ids, top_scores = np.empty(k, dtype=np.int64), np.empty(k)
        log_background = postings.log_background[batch.terms]
        bounds = np.searchsorted(batch.owner, np.arange(batch.n_docs + 1)).tolist()
        counts = self.counts
        out: list[PrunedResult | None] = []
        if index is not None:
            massless = np.array(sorted(index.massless), dtype=np.int64)
            power_of = index.power_of
            inv_scale = math.exp(-labels.theta * math.log(state.class_docs_total.value))
            power_total = index.power_sum.value * inv_scale
            log_constant = math.log(constant)
            block_prior = block_log_a = _ZERO  # never scanned: the closed form gives their mass
        else:
            massless, power_of, inv_scale, power_total, log_constant = _NONE, _ZERO, 0.0, 0.0, 0.0
            block_prior, block_log_a = self._blocks(state, derived, active)
        for d in range(batch.n_docs):
            lo, hi = bounds[d], bounds[d + 1]
            terms = batch.terms[lo:hi]
            dense, n_hit, n_cand, floor, read, closed, log_norm, n_best, length, smooth = pruned_candidates(
                terms, batch.weights[lo:hi], log_background[lo:hi], arena.start, arena.length,
                arena.cls, postings.weight, self.term_max, derived.log_prior, derived.log_a, prior_max, log_a_max,
                cut, k, budget, index is not None, massless, power_of, power_total, inv_scale, log_constant, active,
                BLOCK_SIZE, block_prior, block_log_a, acc, marked, touched, chosen, cand_ids, cand_scores, top_ids,
                top_scores)
            counts["documents"] += 1
            counts["lists"] += hi - lo
            counts["lists_read"] += read
            counts["dense" if dense else "candidates"] += 1 if dense else n_cand
            result = PrunedResult()
            top = list(zip(top_ids[:n_best].tolist(), top_scores[:n_best].tolist()))
            if want_scored:
                result.scored = list(zip(cand_ids[:n_cand].tolist(), cand_scores[:n_cand].tolist()))
            if closed:  # the best classes without postings here
                extra, complete = _best_unmet(index, marked, derived, active, length, smooth, k)
                counts["candidates"] += len(extra)
                extra = [(c, score - log_norm) for c, score in extra]
                if not complete:  # the classes not listed score no more than the last listed
                    floor = max(floor, min(value for _, value in extra))
                top = sorted(top + extra, key=lambda pair: (-pair[1], pair[0]))[:k]
                if want_scored:
                    result.scored += extra
            clear_marks(touched, n_hit, marked)
            result.top = top
            result.floor = floor
            out.append(result)
        return out



def _best_unmet(index: PriorIndex, marked: np.ndarray, derived, active: np.ndarray, length: float, smooth: float,
                k: int) -> tuple[list, bool]:
    """The best ``k`` classes not ``marked`` by exact score ``base(l) + S`` (a constant ``a_l``), with any
    that tie with the ``k``-th, and whether every such class is listed.

    Their order is their priors' up to the last bits of ``log a_l`` (and exact ties, ``theta = 0`` among
    them, break by id): the walk down the prior order goes on while a class could still tie with the
    ``k``-th; past a few hundred steps (many classes met, or flat priors) one compiled pass over the
    labels gives the same answer.
    """
    log_prior, log_a = derived.log_prior, derived.log_a
    picked: list[tuple[int, float]] = []
    kth = math.inf
    for steps, (_, c) in enumerate(index.order):
        if steps > 4 * k + 256:
            ids, scores = np.empty(k, dtype=np.int64), np.empty(k)
            n = best_unmarked(active, marked, log_prior, log_a, length, smooth, k, ids, scores)
            return list(zip(ids[:n].tolist(), scores[:n].tolist())), n < k
        if marked[c]:
            continue
        score = ((float(log_prior[c]) + length * float(log_a[c])) + smooth) + 0.0
        if len(picked) >= k and score < kth - 1e-9 * (1.0 + abs(kth)):
            return picked, False
        picked.append((c, score))
        if len(picked) >= k:
            kth = sorted((value for _, value in picked), reverse=True)[k - 1]
    return picked, True
