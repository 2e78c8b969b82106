"""What a model holds, as plain numbers: labels with their documents, vocabulary, postings, bytes, time.

:func:`model_summary` reads a model (any family) without changing it; ``sgm
stats`` prints it, and anything else may (it is JSON-able). Document counts
are exact live documents; ``weight`` is a label's decayed document mass
``N(l)`` (MODEL.md section 7), equal to the count without decay.

Examples
--------
>>> from sgm.model import MNB
>>> m = MNB("u_jm")
>>> m.learn_many(["cheap pills", "buy now", "meeting at noon"], ["spam", "spam", "ham"], ids=["a", "b", "c"])
3
>>> summary = model_summary(m)
>>> summary["labels"]
[{'label': 'spam', 'documents': 2, 'weight': 2.0}, {'label': 'ham', 'documents': 1, 'weight': 1.0}]
>>> summary["documents"], summary["vocabulary"], summary["postings"]
(3, 7, 7)
"""
from __future__ import annotations

from typing import Any

from .base import POWERSET_SEPARATOR
from .ensemble import Ensemble

__all__ = ["model_summary"]


def model_summary(model) -> dict[str, Any]:
    """A JSON-able description of ``model``: configuration, sizes, and per label its live documents.

    Labels are listed most documents first (ties by name); in powerset mode a
    label is a label set joined with ``+``. An ensemble: its first base's labels, documents and clock (every
    base learned the same documents), its name, sizes summed over the bases, and ``"bases"``: each base's
    summary without its labels.
    """
    if isinstance(model, Ensemble):
        out = model_summary(model.bases[0])
        stats = model.stats()
        out.update(family=model.family, spec=model.spec.name, params={}, vocabulary=stats["vocabulary"],
                   postings=stats["entries"], bytes=model.memory_bytes(),
                   bases=[{k: v for k, v in model_summary(base).items() if k != "labels"} for base in model.bases])
        return out
    state = model.state
    stats = model.stats()
    names = state.classes.names
    scale = state.clock.scale()
    labels = []
    for c in state.active_classes().tolist():
        labels.append({"label": names[c].replace(POWERSET_SEPARATOR, "+"), "documents": int(state.cls_refs[c]),
                       "weight": float(state.cls_docs.get(c)) * scale})
    labels.sort(key=lambda item: (-item["documents"], item["label"]))
    config = model.config()
    return {
        "family": config["family"],
        "spec": config["spec"],
        "params": config["params"],
        "multilabel": config["multilabel"],
        "half_life": config["half_life"],
        "documents": stats["documents"],
        "learned_total": stats["learned_total"],
        "pruned_documents": stats["pruned_documents"],
        "expired_documents": stats["expired_documents"],
        "labels": labels,
        "vocabulary": stats["vocabulary"],
        "postings": stats["entries"],
        "bytes": model.memory_bytes(),
        "model_time": stats["model_time"],
    }
