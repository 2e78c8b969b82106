"""A dense reference of the tied term weights (the ``tw`` affix of MNB), written from the spec's formulas
(docs of issue 19: TW_SPEC) and independent of ``model/``.

On top of :class:`tests.reference.DenseReference` it keeps, per term NAME, the four numbers ``s`` (the factor,
starts 1), ``q`` (AdaGrad's sum of squared gradients), ``total`` and ``last`` (the lazy running sum of ``s`` for
the average), and one global step counter ``t``. Every ``learn`` first takes one step, computed from scratch
over the dense table of the live documents as they are BEFORE the document is learned:

    x_n   = the document's query weights over known terms (TF-IDF, times fw's g(n)), as scoring computes them
    A     = the active classes, Y' = (the document's class keys) ∩ A; no step if x is empty or Y' is
    p(l|d) = normalized exp(theta log p(l) + sum_n x_n s_n log p_l(n)) over A  (the current s)
    G_n   = x_n mean_{y in Y'} sum_{l != y} p(l|d) (log p_y(n) - log p_l(n))
            (= x_n (mean_y log p_y(n) - sum_l p(l|d) log p_l(n)), summed so that each part is small when p_y is near 1)
    per term: total += s (t - last); (then t += 1 once); q += G^2; s = max(0, s + eta G / (sqrt(q) + 1e-8));
              total += s; last = t

Scoring multiplies each scored weight (after fw) by ``sbar_n = (total + s (t - last)) / max(t, 1)`` (1 for a
term never stepped). Relearning an id with the same labels does nothing (no step); with other labels the old
version is removed, then the step, then the add. Removing documents leaves the numbers alone, except that a term
no live document holds any more is reset (its state dropped: it starts again at s = 1, q = total = last = 0).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from tests.reference import DenseReference, normalized


@dataclass
class TermState:
    s: float = 1.0
    q: float = 0.0
    total: float = 0.0
    last: int = 0


@dataclass
class TiedReference(DenseReference):
    eta: float = 2.0
    #: added to AdaGrad's root (the model's ADAGRAD_EPS); 0 for the bench oracle, which has none
    adagrad_eps: float = 1e-8
    terms: dict[str, TermState] = field(default_factory=dict)
    t: int = 0
    #: every step taken: (term names in step order, their gradients), for tests that look at the sequence
    steps: list = field(default_factory=list)
    #: How much rounding can move the factors: the largest, over the steps so far and their terms, of
    #: ``eta |w_n| (max_l |log p_l(n)| + 30) P / (sqrt(q_n) + 1e-8)`` (q_n after the step; w_n the weight before fw;
    #: P the posterior mass of the labels other than the document's). A step moves ``s_n`` by
    #: ``eta G_n / (sqrt(q_n) + 1e-8)``, and an implementation errs ``G_n`` by a few ulps of its parts, each a
    #: ``p(l|d)`` (l != y) times a difference of ``log p_l(n)`` (or of its parts ``log a_l`` and ``log p_b(n)``, hence the 30), times
    #: ``w_n``: fw's ``g(n)`` errs by ulps of 1, not of itself (a term spread evenly has g ~ 1e-16 or 0 with
    #: eps = 0). So ``1e-15 * sensitivity`` bounds the rounding in ``s``. It is infinite when G_n = 0 exactly here but the terms are not: AdaGrad's first
    #: step of a term is ``eta`` times the sign of ``G_n``, so the sign of rounding noise decides it. (With one
    #: active class, G = 0 exactly: p(l|d) = 1 and the mean over Y' is that class's log p.)
    sensitivity: float = 0.0

    # ------------------------------------------------------------ the numbers
    def averaged(self, term: str) -> float:
        """``sbar`` of a term (1 for one never stepped)."""
        state = self.terms.get(term)
        if state is None:
            return 1.0
        return (state.total + state.s * (self.t - state.last)) / max(self.t, 1)

    def factor(self, term: str) -> float:
        """The current ``s`` of a term."""
        state = self.terms.get(term)
        return 1.0 if state is None else state.s

    def live_terms(self) -> set[str]:
        return {t for d in self.docs.values() for t in d.raw}

    def release_terms(self) -> None:
        """Terms no live document holds leave the vocabulary: their numbers start again."""
        live = self.live_terms()
        for name in [n for n in self.terms if n not in live]:
            del self.terms[name]

    # ------------------------------------------------------------ learning
    def step_inputs(self, raw: dict[str, float], classes) -> tuple | None:
        """``(x, Y', table, prior, w)`` of the step ``raw`` under ``classes`` would take now (w: the weights before
        fw), or None (no step)."""
        if not self.docs:
            return None
        active, prior, table, counts = self.label_table()
        weights = self.query_weights(raw)
        x = self.scored_weights(weights, counts)
        chosen = [y for y in dict.fromkeys(classes) if y in table]
        if not x or not chosen:
            return None
        return x, chosen, table, prior, weights

    def step(self, raw: dict[str, float], classes) -> None:
        inputs = self.step_inputs(raw, classes)
        if inputs is None:
            return
        x, chosen, table, prior, weights = inputs
        log_post = normalized(prior, table, {n: w * self.factor(n) for n, w in x.items()})
        post = {c: math.exp(v) for c, v in log_post.items()}
        gradients = {}
        for n, w in x.items():
            total = sum(sum(post[c] * (table[y][n] - table[c][n]) for c in post if c != y) for y in chosen)
            gradients[n] = w * total / len(chosen)
        # the other labels' posterior mass: G errs by ulps of its parts, each a p(l|d) (l != y) times a log-probability
        others = sum(sum(post[c] for c in post if c != y) for y in chosen) / len(chosen)
        before = self.t
        self.t += 1
        for n, g in gradients.items():
            state = self.terms.setdefault(n, TermState())
            scale = self.eta * abs(weights[n]) * (max(abs(table[c][n]) for c in table) + 30.0) * others
            root = math.sqrt(state.q + g * g) + self.adagrad_eps
            if scale > 0 and len(table) > 1:  # one active class: p = 1 and G = 0, exactly
                self.sensitivity = max(self.sensitivity, scale / root if root > 0 else math.inf)
            state.total += state.s * (before - state.last)
            state.q += g * g
            denominator = math.sqrt(state.q) + self.adagrad_eps
            state.s = max(0.0, state.s + (self.eta * g / denominator if denominator > 0 else 0.0))
            state.total += state.s
            state.last = self.t
        self.steps.append((list(gradients), list(gradients.values())))

    def before_counting(self, raw: dict[str, float], classes, replaced: bool) -> None:
        """The step, on the model without the document (an old version of it has just left: its terms held by no
        other document are released first, as the model releases their ids)."""
        if replaced:
            self.release_terms()
        self.step(raw, classes)

    def forget(self, doc_id: str) -> None:
        super().forget(doc_id)
        self.release_terms()

    # ------------------------------------------------------------ scoring
    def log_posterior(self, raw_query: dict[str, float], weighted: dict[str, float] | None = None) -> dict[str, float]:
        _, prior, table, counts = self.label_table()
        query = self.query_weights(raw_query) if weighted is None else dict(weighted)
        scored = self.scored_weights(query, counts)
        return normalized(prior, table, {n: w * self.averaged(n) for n, w in scored.items()})

    def query_mass(self, raw_query: dict[str, float]) -> float:
        """``sum_n |x_n| max_l |log p_l(n)|`` of a query: how much an error in the factors moves its log posteriors."""
        if not self.docs:
            return 0.0
        _, _, table, counts = self.label_table()
        scored = self.scored_weights(self.query_weights(raw_query), counts)
        return sum(abs(w) * max(abs(table[c][n]) for c in table) for n, w in scored.items())

    def tied_term_weights(self, names=None) -> dict[str, float]:
        """What ``MNB.tied_term_weights`` must give: ``sbar`` of the given names (default: every live term)."""
        names = sorted(self.live_terms()) if names is None else names
        return {n: self.averaged(n) for n in names}
