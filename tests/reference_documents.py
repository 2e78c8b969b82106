"""The live-document semantics both dense references share (MNB's and TDM's), independent of ``model/``.

A reference keeps every live document as given (``RefDoc``) and derives everything else at query time:
decay applied directly as ``2 ** (-(T - t) / H)`` with ``T`` the latest event time seen (no forward decay,
no rebasing), label keys per multi-label mode, decayed document frequencies, and the thesis's TF-IDF::

    idf(n)   = log max(1, ups_idf + N / df(n))        (0 for a term no live document holds)
    w_d(n)   = log(1 + c(n) / |d|^phi) / |d|^(1 - phi) * idf(n)     (``tXiX``; ``qidf``: c(n) * idf(n))

The class using this mixin provides ``docs``, ``now``, ``half_life``, ``multilabel``, ``params`` and
``weighting`` (the spec's weighting name or None).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from sgm.model import LearnGuardError  # only apply_removal reads it: the references compute nothing with model/

SEP = "\x1f"


@dataclass
class RefDoc:
    classes: tuple[str, ...]
    raw: dict[str, float]
    weights: dict[str, float]
    ts: float
    seq: int = 0  # learning order (the TDM reference's memory bound evicts the oldest first)


class ReferenceDocuments:
    """Methods over ``self.docs`` shared by the dense references; see the module docstring."""

    def classes_of(self, labels) -> tuple[str, ...]:
        labels = [labels] if isinstance(labels, str) else list(dict.fromkeys(labels))
        if self.multilabel == "powerset":
            return (SEP.join(sorted(labels)),)
        return tuple(labels)

    def decay(self, ts: float) -> float:
        if self.half_life is None:
            return 1.0
        return 2.0 ** (-(self.now - ts) / self.half_life)

    def doc_frequencies(self) -> tuple[float, dict[str, float]]:
        """The decayed number of live documents, and per term the decayed number holding it."""
        total, per_term = 0.0, {}
        for d in self.docs.values():
            weight = self.decay(d.ts)
            total += weight
            for term in d.raw:
                per_term[term] = per_term.get(term, 0.0) + weight
        return total, per_term

    def idf(self, term: str, total: float, per_term: dict[str, float]) -> float:
        df = per_term.get(term, 0.0)
        if df <= 0:
            return 0.0
        return math.log(max(1.0, self.params.get("ups_idf", 0.0) + total / df))

    def tfidf(self, raw: dict[str, float], total: float, per_term: dict[str, float]) -> dict[str, float]:
        length = len(raw)
        phi = self.params.get("phi", 0.0)
        out = {}
        for term, count in raw.items():
            if self.weighting.startswith("qidf"):
                out[term] = count * self.idf(term, total, per_term)
            else:
                tf = math.log(1 + count / length**phi) / length ** (1 - phi)
                out[term] = tf * self.idf(term, total, per_term)
        return out


def apply_removal(model, reference: ReferenceDocuments, op: tuple) -> None:
    """Apply a ``("forget", id)`` or ``("unlearn", id, labels)`` step to a model and its reference alike,
    checking the model's answer: ``forget`` says whether the id was live; ``unlearn`` says False for an
    unknown id, refuses labels other than the learned ones (``LearnGuardError``, symmetric learn/unlearn)
    and otherwise removes the document."""
    if op[0] == "forget":
        assert model.forget(op[1]) == (op[1] in reference.docs)
        reference.forget(op[1])
        return
    _, doc_id, labels = op
    record = reference.docs.get(doc_id)
    if record is None:
        assert model.unlearn_one(None, labels, id=doc_id) is False
    elif set(record.classes) != set(reference.classes_of(labels)):
        with pytest.raises(LearnGuardError):
            model.unlearn_one(None, labels, id=doc_id)
    else:
        assert model.unlearn_one(None, labels, id=doc_id) is True
        reference.forget(doc_id)
