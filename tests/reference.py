"""A dense, brute-force reference for MNB, written independently of ``model/``.

It keeps plain dictionaries of the live documents, applies decay directly as
``2 ** (-(T - t) / H)`` (no forward decay, no rebasing), builds the full
label x vocabulary count matrix from scratch at every query, and evaluates the
smoothed probabilities with the *direct* formula of thesis table 4.1::

    p_l(n) = (1 - a_l) * (C(l,n) - D(l,n)) / sum_n' (C(l,n') - D(l,n')) + a_l * p_b(n)
    a_l    = 1 - sum_n (C(l,n) - D(l,n)) / (mu + C(l))

rather than the sparse identity the model uses. Nothing here is fast.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from tests.reference_documents import SEP, RefDoc, ReferenceDocuments


@dataclass
class DenseReference(ReferenceDocuments):
    spec: object  # model.spec.ModelSpec (only its plain fields are read)
    params: dict
    half_life: float | None = None
    multilabel: str = "per_label"
    docs: dict[str, RefDoc] = field(default_factory=dict)
    now: float | None = None

    @property
    def weighting(self) -> str | None:
        return self.spec.weighting

    def learn(self, raw: dict[str, float], labels, ts: float | None, doc_id: str) -> None:
        classes = self.classes_of(labels)
        old = self.docs.get(doc_id)
        if old is not None:
            if set(old.classes) == set(classes):
                return
            del self.docs[doc_id]
        self.before_counting(raw, classes, replaced=old is not None)
        t = ts if ts is not None else (self.now if self.now is not None else 0.0)
        self.now = t if self.now is None else max(self.now, t)
        doc = RefDoc(classes, dict(raw), dict(raw), t)
        self.docs[doc_id] = doc
        if self.weighting and not self.weighting.startswith("qidf"):
            total, per_term = self.doc_frequencies()  # counts the new document too
            doc.weights = self.tfidf(raw, total, per_term)

    def before_counting(self, raw: dict[str, float], classes, replaced: bool) -> None:
        """Called when a document is about to be counted (after an old version of it, ``replaced``, left)."""

    def forget(self, doc_id: str) -> None:
        self.docs.pop(doc_id, None)

    # ----------------------------------------------------------- inference
    def discount(self, c: float, delta: float) -> float:
        beta = self.params.get("beta", 0.0)
        if self.spec.discount == "pd":
            base = min(c, delta * c**delta)
        elif self.spec.discount == "ad":
            base = min(delta, c)
        else:
            base = 0.0
        if self.spec.jm:
            return base + beta * (c - base)
        return base

    def kn_delta(self) -> float:
        raw_totals: dict[str, float] = {}
        for d in self.docs.values():
            for term, count in d.raw.items():
                raw_totals[term] = raw_totals.get(term, 0.0) + count
        n1 = sum(1 for v in raw_totals.values() if v == 1.0)
        n2 = sum(1 for v in raw_totals.values() if v == 2.0)
        if n1 + n2 == 0:
            return 0.5
        return min(max(n1 / (n1 + 2 * n2), 1e-6), 1.0)

    def class_counts(self) -> tuple[list[str], dict[str, dict[str, float]], dict[str, float]]:
        """Classes, the dense (decayed) table ``counts[class][term]`` and the documents per class."""
        classes = sorted({c for d in self.docs.values() for c in d.classes})
        counts: dict[str, dict[str, float]] = {c: {} for c in classes}
        docs_per_class = {c: 0.0 for c in classes}
        for d in self.docs.values():
            weight = self.decay(d.ts)
            for c in d.classes:
                docs_per_class[c] += weight
                for term, w in d.weights.items():
                    if w != 0.0:
                        counts[c][term] = counts[c].get(term, 0.0) + w * weight
        return classes, counts, docs_per_class

    def query_weights(self, raw_query: dict[str, float]) -> dict[str, float]:
        """The scored document's weights over seen terms, before the fw weights."""
        _, counts, _ = self.class_counts()
        seen = {t for row in counts.values() for t in row}
        if self.spec.weighting:
            total, per_term = self.doc_frequencies()
            query = self.tfidf(raw_query, total, per_term)
        else:
            query = dict(raw_query)
        return {t: w for t, w in query.items() if t in seen and w > 0}

    def label_table(self) -> tuple[list[str], dict[str, float], dict[str, dict[str, float]], dict]:
        """From scratch: the classes, ``theta log p(l)`` per class, ``log p_l(n)`` per class and vocabulary
        term (the smoothed label term probabilities), and the dense table ``counts[class][term]``."""
        classes, counts, docs_per_class = self.class_counts()
        vocab = sorted({t for row in counts.values() for t, v in row.items()})
        V = len(vocab)
        term_total = {t: sum(counts[c].get(t, 0.0) for c in classes) for t in vocab}
        grand = sum(term_total.values())
        ups = self.params.get("ups", 0.0)

        def p_b(t: str) -> float:
            if self.spec.background == "u":
                return 1.0 / V
            col = term_total[t] / grand
            return col if self.spec.background == "c" else (1 - ups) * col + ups / V

        delta = self.params.get("delta", 0.0)
        if delta == "kn":
            delta = self.kn_delta()
        mu = self.params.get("mu", 0.0) if self.spec.dp else 0.0
        theta = self.params.get("theta", 1.0)

        all_docs = sum(docs_per_class.values())
        prior, table = {}, {}
        for c in classes:
            row = counts[c]
            mass = sum(row.values())
            discounts = {t: self.discount(row.get(t, 0.0), delta) for t in vocab}
            kept = {t: row.get(t, 0.0) - discounts[t] for t in vocab}
            kept_total = sum(kept.values())
            # a_l = 1 - sum(C - D) / (mu + C(l)), evaluated as (mu + sum D) / (mu + C(l)) to avoid
            # the cancellation of 1 - x when nearly nothing is discounted
            a = 1.0 if mu + mass <= 0 else (mu + sum(discounts.values())) / (mu + mass)
            one_minus_a = 0.0 if mu + mass <= 0 else kept_total / (mu + mass)
            prior[c] = theta * math.log(docs_per_class[c] / all_docs)
            table[c] = {t: math.log(one_minus_a * (kept[t] / kept_total if kept_total > 0 else 0.0) + a * p_b(t))
                        for t in vocab}
        return classes, prior, table, counts

    def scored_weights(self, query: dict[str, float], counts: dict) -> dict[str, float]:
        """The query weights the label scores use: ``query`` (seen terms, before fw) times the fw weights."""
        if getattr(self.spec, "class_weights", False):
            g = class_weights_of(counts, self.params)
            query = {t: w * g[t] for t, w in query.items()}
        return query

    def log_posterior(self, raw_query: dict[str, float], weighted: dict[str, float] | None = None) -> dict[str, float]:
        """``log p(l | w)`` for every class, computed from scratch (``weighted``: the weights themselves, before
        the fw weights, instead of those of ``raw_query``)."""
        classes, prior, table, counts = self.label_table()
        query = self.query_weights(raw_query) if weighted is None else dict(weighted)
        return normalized(prior, table, self.scored_weights(query, counts))


def normalized(prior: dict[str, float], table: dict[str, dict[str, float]], query: dict[str, float]) -> dict[str, float]:
    """``log p(l | w)`` from :meth:`DenseReference.label_table`'s prior and table and the scored weights."""
    out = {}
    for c, score in prior.items():
        for t, w in query.items():
            score += w * table[c][t]
        out[c] = score
    peak = max(out.values())
    norm = peak + math.log(sum(math.exp(v - peak) for v in out.values()))
    return {c: v - norm for c, v in out.items()}


def class_weights_of(counts: dict[str, dict[str, float]], params: dict) -> dict[str, float]:
    """The ``fw`` weight ``g(n)`` of every term, straight from its definition over the dense table.

    ``counts[class][term]`` are the class counts the model scores with (decayed). Over the ``K``
    classes with counts: ``r_l = (C(l,n) + kappa C(n) / C) / (C(l) + kappa)``, ``q = r / sum r``,
    ``g = eps + (1 - eps) * (1 - H(q) / log K) ** gamma``; 1 when ``K < 2``.
    """
    gamma, kappa, eps = params["gamma"], params["kappa"], params["eps"]
    mass = {c: sum(row.values()) for c, row in counts.items()}
    live = [c for c in counts if mass[c] > 0]
    vocab = {t for row in counts.values() for t in row}
    if len(live) < 2:
        return {t: 1.0 for t in vocab}
    grand = sum(mass[c] for c in live)
    out = {}
    for t in vocab:
        term_mass = sum(counts[c].get(t, 0.0) for c in live)
        r = [(counts[c].get(t, 0.0) + kappa * term_mass / grand) / (mass[c] + kappa) for c in live]
        q = [v / sum(r) for v in r]
        entropy = -sum(v * math.log(v) for v in q if v > 0)
        share = min(1.0, max(0.0, 1.0 - entropy / math.log(len(live))))
        out[t] = eps + (1 - eps) * share**gamma
    return out


def class_weight_params(draw) -> dict:
    """Hypothesis draws of the fw numbers (``draw`` of an ``st.composite``).

    ``gamma`` is 0 or at least 1: below 1, ``share ** gamma`` has an unbounded slope at 0, so a term
    spread evenly over the classes (share 0 up to rounding, e.g. 1e-16) turns rounding noise into
    weight differences far above the 1e-9 the tests hold the model to (1e-16 ** 0.5 = 1e-8).
    """
    from hypothesis import strategies as st

    return {"gamma": draw(st.one_of(st.just(0.0), st.floats(1.0, 4.0))),
            "kappa": draw(st.floats(0.01, 100.0)), "eps": draw(st.floats(0.0, 1.0))}


def class_name(key: str, multilabel: str):
    return tuple(key.split(SEP)) if multilabel == "powerset" else key


def as_array(log_post: dict, classes: list, multilabel: str) -> np.ndarray:
    lookup = {class_name(k, multilabel): v for k, v in log_post.items()}
    return np.array([lookup[c] for c in classes])
