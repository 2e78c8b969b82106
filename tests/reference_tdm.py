"""A dense, brute-force reference for the Tied Document Mixture, independent of ``model/``.

Plain dictionaries of the live documents; decay applied directly as
``2 ** (-(T - t) / H)``; the memory bound applied by sorting all documents;
every query scores every training document explicitly with the direct
hierarchical formulas (thesis table 4.1 at both levels)::

    C(l, n)  = sum_{i in I_l} f_i * c_i(n) / |c_i|_1          (length-normalized label counts)
    p_l(n)   = (1 - a_l) * (C(l,n) - D(l,n)) / sum_n' (C(l,n') - D(l,n')) + a_l * p_b(n)
    a_l      = 1 - sum_n (C(l,n) - D(l,n)) / (mu + C(l))
    p_li(n)  = (1 - a_i) * (c_i(n) - K(n)) / sum_n' (c_i(n') - K(n')) + a_i * p_l(n)
    a_i      = 1 - sum_n (c_i(n) - K(n)) / (kmu + |c_i|_1)
    p(w, l)  = p(l)^theta * sum_{i in I_l} (f_i / sum_{j in I_l} f_j) * prod_n p_li(n)^{w_n}

Nothing here is fast and nothing is shared with the model code.
"""
from __future__ import annotations

import math
from fractions import Fraction
from dataclasses import dataclass, field

from tests.reference import class_weights_of
from tests.reference_documents import SEP, RefDoc, ReferenceDocuments


def _one_minus_ratio(counts, discounts, denominator_terms) -> float:
    """``1 - sum(counts - discounts) / sum(denominator_terms)`` in exact rational arithmetic.

    The direct formula for a smoothing weight cancels catastrophically when the
    weight is tiny (a small power-law discount); evaluating it exactly keeps
    the reference an accurate witness."""
    numerator = sum(Fraction(x) for x in counts) - sum(Fraction(x) for x in discounts)
    denominator = sum(Fraction(x) for x in denominator_terms)
    return float(1 - numerator / denominator)


def _logsumexp(values: list[float]) -> float:
    finite = [v for v in values if v != -math.inf]
    if not finite:
        return -math.inf
    peak = max(finite)
    return peak + math.log(sum(math.exp(v - peak) for v in finite))


@dataclass
class DenseTDMReference(ReferenceDocuments):
    background: str  # "u" | "c" | "uc"
    discount: str | None  # "ad" | "pd" | None (label level)
    jm: bool
    dp: bool
    kernel: frozenset
    weighting: str | None
    params: dict
    class_weights: bool = False  # fw: scored terms weighted by g(n) of the (length-normalized) class counts
    half_life: float | None = None
    multilabel: str = "per_label"
    prune_below: float | None = None
    max_documents: int | None = None
    docs: dict[str, RefDoc] = field(default_factory=dict)
    now: float | None = None
    seq: int = 0
    pruned: int = 0

    @classmethod
    def for_model(cls, model) -> "DenseTDMReference":
        """Read the configuration (plain values only) of a ``model.TDM``."""
        spec = model.spec
        return cls(spec.background, spec.discount, spec.jm, spec.dp, frozenset(spec.kernel), spec.weighting,
                   dict(model.params), spec.class_weights, model.state.clock.half_life, model.multilabel,
                   model.state.prune_below, model.state.max_documents)

    # ----------------------------------------------------------- learning
    def learn(self, raw: dict[str, float], labels, ts: float | None, doc_id: str) -> None:
        raw = {t: float(c) for t, c in raw.items() if c != 0}
        classes = self.classes_of(labels)
        old = self.docs.get(doc_id)
        if old is not None:
            if set(old.classes) == set(classes):
                return
            del self.docs[doc_id]
        t = ts if ts is not None else (self.now if self.now is not None else 0.0)
        self.now = t if self.now is None else max(self.now, t)
        self.seq += 1
        doc = RefDoc(classes, raw, dict(raw), t, self.seq)
        self.docs[doc_id] = doc
        if self.weighting and not self.weighting.startswith("qidf"):
            doc.weights = self.tfidf(raw, *self.doc_frequencies())
        self._apply_memory_bound()

    def learn_batch(self, items: list[tuple[dict, object, float | None, str]]) -> None:
        """Learn ``(raw, labels, ts, id)`` items at once as the model's batch path does: an id
        already known (learned before or earlier in the batch) splits the batch; inside a part
        every document is counted before any is TF-IDF weighted, and the memory bound applies
        once at the end of the part."""
        part: list[str] = []
        for raw, labels, ts, doc_id in items:
            raw = {t: float(c) for t, c in raw.items() if c != 0}
            classes = self.classes_of(labels)
            if doc_id in self.docs:
                self._finish_batch(part)
                part = []
                old = self.docs.get(doc_id)
                if old is not None:
                    if set(old.classes) == set(classes):
                        continue
                    del self.docs[doc_id]
            t = ts if ts is not None else (self.now if self.now is not None else 0.0)
            self.now = t if self.now is None else max(self.now, t)
            self.seq += 1
            self.docs[doc_id] = RefDoc(classes, raw, dict(raw), t, self.seq)
            part.append(doc_id)
        self._finish_batch(part)

    def _finish_batch(self, part: list[str]) -> None:
        if not part:
            return
        if self.weighting and not self.weighting.startswith("qidf"):
            total, per_term = self.doc_frequencies()
            for doc_id in part:
                self.docs[doc_id].weights = self.tfidf(self.docs[doc_id].raw, total, per_term)
        self._apply_memory_bound()

    def _apply_memory_bound(self) -> None:
        """Drop the lightest documents (ties: learned first) while too light or too many."""
        for doc_id, doc in sorted(self.docs.items(), key=lambda item: (self.decay(item[1].ts), item[1].seq)):
            too_light = self.prune_below is not None and self.decay(doc.ts) < self.prune_below
            too_many = self.max_documents is not None and len(self.docs) > self.max_documents
            if not (too_light or too_many):
                break
            del self.docs[doc_id]
            self.pruned += 1

    def forget(self, doc_id: str) -> None:
        self.docs.pop(doc_id, None)

    # ----------------------------------------------------------- smoothing pieces
    def _label_discount(self, count: float, delta: float) -> float:
        beta = self.params.get("beta", 0.0)
        if self.discount == "pd":
            base = min(count, delta * count**delta)
        elif self.discount == "ad":
            base = min(delta, count)
        else:
            base = 0.0
        return base + beta * (count - base) if self.jm else base

    def _kernel_discount(self, count: float, kdelta: float) -> float:
        kbeta = self.params.get("kbeta", 0.0)
        base = min(count, kdelta * count**kdelta) if "kpd" in self.kernel else 0.0
        return base + kbeta * (count - base) if "kjm" in self.kernel else base

    def _kneser_ney(self) -> float:
        totals: dict[str, float] = {}
        for d in self.docs.values():
            for term, count in d.raw.items():
                totals[term] = totals.get(term, 0.0) + count
        n1 = sum(1 for v in totals.values() if v == 1.0)
        n2 = sum(1 for v in totals.values() if v == 2.0)
        if n1 + n2 == 0:
            return 0.5
        return min(max(n1 / (n1 + 2 * n2), 1e-6), 1.0)

    # ----------------------------------------------------------- inference
    def log_joint(self, raw_query: dict[str, float]) -> dict[str, float]:
        """``log p(w, l)`` (up to a constant shared by all labels) for every label, from scratch."""
        classes = sorted({c for d in self.docs.values() for c in d.classes})
        counts: dict[str, dict[str, float]] = {c: {} for c in classes}
        label_docs = {c: 0.0 for c in classes}
        for d in self.docs.values():
            f = self.decay(d.ts)
            length = sum(d.weights.values())
            for c in d.classes:
                label_docs[c] += f
                for term, w in d.weights.items():
                    if w != 0.0:
                        counts[c][term] = counts[c].get(term, 0.0) + f * w / length
        vocab = sorted({t for row in counts.values() for t in row})
        term_total = {t: sum(counts[c].get(t, 0.0) for c in classes) for t in vocab}
        grand = sum(term_total.values())
        ups = self.params.get("ups", 0.0)

        def p_b(t: str) -> float:
            if self.background == "u":
                return 1.0 / len(vocab)
            collection = term_total[t] / grand
            return collection if self.background == "c" else (1 - ups) * collection + ups / len(vocab)

        delta = self.params.get("delta", 0.0)
        delta = self._kneser_ney() if delta == "kn" else delta
        kdelta = self.params.get("kdelta", 0.5)
        kdelta = self._kneser_ney() if kdelta == "kn" else kdelta
        mu = self.params.get("mu", 0.0) if self.dp else 0.0
        kmu = self.params.get("kmu", 0.0) if "kdp" in self.kernel else 0.0
        theta = self.params.get("theta", 1.0)

        if self.weighting:
            query = self.tfidf({t: float(c) for t, c in raw_query.items() if c != 0}, *self.doc_frequencies())
        else:
            query = {t: float(c) for t, c in raw_query.items()}
        query = {t: w for t, w in query.items() if t in term_total and w > 0}
        if self.class_weights:
            g = class_weights_of(counts, self.params)
            query = {t: w * g[t] for t, w in query.items()}

        label_prob: dict[str, dict[str, float]] = {}
        for c in classes:
            row = counts[c]
            mass = sum(row.values())
            discounts = {t: self._label_discount(row.get(t, 0.0), delta) for t in vocab}
            kept = {t: row.get(t, 0.0) - discounts[t] for t in vocab}
            kept_total = sum(kept.values())
            a = 1.0 if mu + mass <= 0 else _one_minus_ratio(row.values(), discounts.values(), [mu, *row.values()])
            label_prob[c] = {t: (1 - a) * (kept[t] / kept_total if kept_total > 0 else 0.0) + a * p_b(t) for t in query}

        all_docs = sum(label_docs.values())
        out = {}
        for c in classes:
            per_document = []
            for d in self.docs.values():
                if c not in d.classes:
                    continue
                c_i = {t: w for t, w in d.weights.items() if w > 0}
                length = sum(c_i.values())
                discounts = {t: self._kernel_discount(w, kdelta) for t, w in c_i.items()}
                kept = {t: w - discounts[t] for t, w in c_i.items()}
                kept_total = sum(kept.values())
                a = 1.0 if kmu + length <= 0 else _one_minus_ratio(c_i.values(), discounts.values(), [kmu, *c_i.values()])
                log_kernel = 0.0
                for t, w in query.items():
                    own = kept.get(t, 0.0) / kept_total if kept_total > 0 else 0.0
                    log_kernel += w * math.log((1 - a) * own + a * label_prob[c][t])
                per_document.append(math.log(self.decay(d.ts) / label_docs[c]) + log_kernel)
            out[c] = theta * math.log(label_docs[c] / all_docs) + _logsumexp(per_document)
        return out

    def log_posterior(self, raw_query: dict[str, float]) -> dict[str, float]:
        joint = self.log_joint(raw_query)
        norm = _logsumexp(list(joint.values()))
        return {c: v - norm for c, v in joint.items()}

    def query_length(self, raw_query: dict[str, float]) -> float:
        """``|w|_1`` of the query as scored (seen terms, weighted; without the fw weights ``g <= 1``: a bound)."""
        vocab = {t for d in self.docs.values() for t, w in d.weights.items() if w > 0}
        if self.weighting:
            query = self.tfidf({t: float(c) for t, c in raw_query.items() if c != 0}, *self.doc_frequencies())
        else:
            query = dict(raw_query)
        return sum(w for t, w in query.items() if t in vocab and w > 0)


def class_name(key: str, multilabel: str):
    return tuple(key.split(SEP)) if multilabel == "powerset" else key
