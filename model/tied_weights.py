"""Tied term weights (the ``tw`` affix): one factor per term, shared by every label, learned online.

The MNB label score becomes::

    score(l) = theta log p(l) + sum_n sbar_n w_n log p_l(n)

with ``w_n`` the scored document's term weight (after TF-IDF and ``fw``'s ``g(n)``) and ``sbar_n >= 0`` one
factor per term, tied across the labels (the WANBIA-C idea of Zaidi et al., 2013: naive Bayes with its
per-term weights fitted for the conditional likelihood). A factor above 1 trusts a term's evidence more
than naive Bayes does, one below 1 less: correlated or uninformative terms stop counting many times over.

The factors are fitted one learned document at a time, as the service learns. Before a document ``d`` with
labels ``Y`` is counted, the model as it is (which has not seen ``d``: an honest, out-of-sample view)
scores it with the current factors ``s``, and one AdaGrad step moves ``s`` up the gradient of
``log p(Y | d)`` (mean over ``Y``'s active labels)::

    G_n  = w_n (mean_{y in Y} log p_y(n) - sum_l p(l | d) log p_l(n))
    q_n += G_n^2
    s_n  = max(0, s_n + eta G_n / (sqrt(q_n) + 1e-8))

Scoring uses ``sbar``, the mean of ``s`` over the steps taken so far (Polyak-Ruppert averaging), kept
lazily: a term's running total is brought up to date only when a step touches it. Measured in
``bench/topic_levers_online.py`` (r52, webkb, r8): one pass with AdaGrad and the average beat both a
constant step and an offline L-BFGS-B fit of the same factors.

``log p_l(n) = log a_l + log p_b(n) + w(l, n)`` (the posting weight, 0 for labels without the term), so in
``G_n`` the background cancels: the gradient costs one pass over the document's postings and one over the
labels, as scoring does. It is summed as ``sum_{l != y} p(l|d) (log p_y(n) - log p_l(n))``, not as the
difference of the two sums: when the model is nearly sure of ``y`` the gradient is small, and as a
difference it would be rounding, whose sign AdaGrad's first step (a move of ``eta`` whatever the size)
would follow.

The factors are fitted, not counted: unlearning, decay and the memory bound leave them as they are (as
they leave an ensemble's fitted weights). A term whose last document leaves the model gives its id back,
and its factor goes with it: if the term returns, it starts again at 1.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np

from .arrays import grow
from .batch import PreparedBatch
from .persistence import ExtraState, SnapshotError

if TYPE_CHECKING:  # pragma: no cover
    from .label_model import LabelModel
    from .state import CountState

#: Added to AdaGrad's root sum of squares (the usual 1e-8): without it a term's first step moves it by ``eta``
#: however small its gradient, so a gradient below what float64 resolves in its parts (a document the model is
#: all but sure of) would move it as far as a real one. Measured on the page's tuned r8 / r52 / webkb
#: configurations (test accuracy, one run): without it 0.9712 / 0.9470 / 0.9169 with the gradient as a
#: difference of sums, 0.9749 / 0.9467 / 0.9119 summed over the other labels (the sign of rounding then
#: decided ~2% of first steps); with both, 0.9721 / 0.9470 / 0.9148.
ADAGRAD_EPS = 1e-8
#: The arrays of the tied weights in snapshots (by term id), in their order.
ARRAYS = ("tw_s", "tw_squares", "tw_total", "tw_last")


class TiedTermWeights:
    """The per-term factors ``s`` and their AdaGrad and averaging state, aligned with a state's term ids.

    Parameters
    ----------
    eta : float
        The AdaGrad step: a term's first step moves its factor by ``eta`` (or to 0).

    Examples
    --------
    >>> from sgm.model import MNB
    >>> m = MNB("u_jm_tw", beta=0.5, tw_eta=0.5)
    >>> m.learn_many(["cheap pills now", "team meeting now", "cheap pills offer", "meeting notes now",
    ...               "pills offer now", "team notes"], ["spam", "ham", "spam", "ham", "spam", "ham"])
    6
    >>> m.tied_steps  # the first two had no active label to step towards: "ham" was new at the second
    4
    >>> {t: round(v, 3) for t, v in m.tied_term_weights(["now", "pills", "team"]).items()}
    {'now': 1.275, 'pills': 1.696, 'team': 1.125}
    """

    __slots__ = ("eta", "s", "squares", "total", "last", "steps")

    def __init__(self, eta: float) -> None:
        self.eta = float(eta)
        self.s = np.ones(0)
        self.squares = np.zeros(0)  # sum of squared gradients per term (AdaGrad)
        self.total = np.zeros(0)  # sum of s over the steps up to last[n]
        self.last = np.zeros(0, dtype=np.int64)  # the step count when total[n] was brought up to date
        self.steps = 0  # steps taken (documents that moved the factors)

    @classmethod
    def following(cls, state: "CountState", eta: float) -> "TiedTermWeights":
        """New factors (all 1) for ``state``'s term ids, kept in step as it adds and releases them."""
        tied = cls(eta)
        tied.reserve(max(len(state.term_refs), state.terms.capacity))
        state.term_followers["tied_weights"] = tied  # (replaces the factors of an earlier model on this state)
        state.family_term_bytes = 8 * len(ARRAYS)
        return tied

    # ------------------------------------------------------------ following the term ids
    def reserve(self, capacity: int) -> None:
        """Room for term ids below ``capacity`` (new ids: factor 1, nothing accumulated)."""
        old = len(self.s)
        if capacity <= old:
            return
        self.s = grow(self.s, capacity)
        self.s[old:] = 1.0
        self.squares = grow(self.squares, capacity)
        self.total = grow(self.total, capacity)
        self.last = grow(self.last, capacity)

    def release(self, term: int) -> None:
        """The term's id was given back: its factor starts again at 1 if the id is used again."""
        if term < len(self.s):
            self.s[term], self.squares[term], self.total[term], self.last[term] = 1.0, 0.0, 0.0, 0

    # ------------------------------------------------------------ scoring
    def averaged(self, terms: np.ndarray) -> np.ndarray:
        """``sbar`` of ``terms``: the mean of each factor over the steps so far (1 before any step)."""
        if self.steps == 0:
            return np.ones(len(terms))
        s = self.s[terms]
        return (self.total[terms] + s * (self.steps - self.last[terms])) / self.steps

    def by_name(self, state: "CountState", terms: Iterable[str] | None = None) -> dict[str, float]:
        """``sbar`` of the named ``terms`` (default: every term ``state`` holds); 1 for a term it does not hold."""
        if terms is None:
            terms = [name for name in state.terms.names if name is not None]
        terms = list(terms)
        ids = state.terms.ids
        found = np.array([ids.get(t, -1) for t in terms], dtype=np.int64)
        values = np.ones(len(terms))
        known = found >= 0
        values[known] = self.averaged(found[known])
        return dict(zip(terms, values.tolist()))

    def scaled(self, batch: PreparedBatch) -> PreparedBatch:
        """``batch`` with each term weight times its averaged factor."""
        if not len(batch.terms) or self.steps == 0:
            return batch
        return PreparedBatch(batch.terms, batch.weights * self.averaged(batch.terms), batch.owner, batch.n_docs)

    # ------------------------------------------------------------ learning
    def gradient(self, labels: "LabelModel", state: "CountState", batch: PreparedBatch, active: np.ndarray,
                 targets: Sequence[int]) -> np.ndarray:
        """``G_n`` of one document (``batch``: its known terms and weights before the factors) towards the
        class ids ``targets`` (active), scored over the ``active`` class ids with the current factors."""
        terms, weights = batch.terms, batch.weights
        current = PreparedBatch(terms, weights * self.s[terms], batch.owner, 1)
        posterior = np.exp(labels.log_posteriors(state, current, active)[0])  # also refreshes the postings
        log_a = labels.class_terms(state).log_a
        log_a_active = log_a[active]
        column = np.full(state.classes.capacity, -1, dtype=np.int64)
        column[active] = np.arange(len(active))
        positions, lengths = state.arena.ranges(terms)
        classes = state.arena.cls[positions]
        posting_weight = labels.postings.weight[positions]
        held = column[classes]  # every class holding a term has documents; guarded all the same
        p = np.where(held >= 0, posterior[held], 0.0)
        owner = np.repeat(np.arange(len(terms)), lengths)
        direction = np.zeros(len(terms))
        for y in targets:
            # sum over the other labels l of p_l (log p_y(n) - log p_l(n)): each part small when p_y is near 1,
            # where the difference of the two sums would be rounding (and AdaGrad's first step takes its sign)
            others = posterior.copy()
            others[column[y]] = 0.0
            is_y = classes == y
            held_by_y = np.bincount(owner, posting_weight * is_y, minlength=len(terms))  # w(y, n)
            held_by_others = np.bincount(owner, posting_weight * np.where(is_y, 0.0, p), minlength=len(terms))
            direction += (float(others @ (log_a[y] - log_a_active)) + held_by_y * float(others.sum())) - held_by_others
        return weights * direction / len(targets)

    def step(self, terms: np.ndarray, gradient: np.ndarray) -> None:
        """One projected AdaGrad step of the factors of ``terms`` (distinct) along ``gradient``."""
        s = self.s[terms]
        self.total[terms] += s * (self.steps - self.last[terms])
        self.steps += 1
        squares = self.squares[terms] + gradient * gradient
        self.squares[terms] = squares
        s = np.maximum(s + self.eta * gradient / (np.sqrt(squares) + ADAGRAD_EPS), 0.0)
        self.s[terms] = s
        self.total[terms] += s
        self.last[terms] = self.steps

    # ------------------------------------------------------------ snapshots
    def extra_state(self, extra: ExtraState, state: "CountState") -> ExtraState:
        """``extra`` with the step count (meta ``tied_steps``) and the per-term arrays over ``state``'s term ids."""
        capacity = state.terms.capacity
        self.reserve(capacity)
        arrays = (self.s, self.squares, self.total, self.last)  # in ARRAYS' order
        return ExtraState({**extra.meta, "tied_steps": self.steps}, extra.per_document,
                          {**extra.per_term, **{name: array[:capacity] for name, array in zip(ARRAYS, arrays)}})

    def restore_extra_state(self, extra: ExtraState, state: "CountState") -> None:
        """Take :meth:`extra_state` back (:class:`~model.persistence.SnapshotError` if it does not fit ``state``)."""
        arrays, steps, capacity = extra.per_term, extra.meta.get("tied_steps"), state.terms.capacity
        if sorted(arrays) != sorted(ARRAYS):
            raise SnapshotError(f"tied term weights need the arrays {list(ARRAYS)}, got {sorted(arrays)}")
        if any(a.ndim != 1 or len(a) != capacity for a in arrays.values()):
            raise SnapshotError(f"tied term weight arrays must hold one value per term id ({capacity})")
        if type(steps) is not int or steps < 0:
            raise SnapshotError(f"tied term weights: the step count must be a count, got {steps!r}")
        s, squares, total, last = (arrays[name] for name in ARRAYS)
        if (any(a.dtype.kind != "f" or not np.isfinite(a).all() for a in (s, squares, total)) or (s < 0).any()
                or (squares < 0).any() or last.dtype.kind != "i" or (last < 0).any() or (last > steps).any()):
            raise SnapshotError("tied term weight arrays out of range (negative, not finite, or ahead of the steps)")
        self.steps = steps
        self.s, self.squares = s.astype(np.float64), squares.astype(np.float64)
        self.total, self.last = total.astype(np.float64), last.astype(np.int64)
        self.reserve(max(len(state.term_refs), capacity))
