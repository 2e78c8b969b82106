"""The from-scratch re-summation of a :class:`model.state.CountState`'s exact totals: the drift check the
service runs before every snapshot (:meth:`CountState.resum_totals`, docs/MODEL_NOTES.md).

The per-class, per-term and model totals are exact sums over the live documents' records
(:class:`model.state.DocRecord`), so re-summing them from those records gives the same values bit for bit;
a difference is drift (a bug), counted and repaired here.
"""
from __future__ import annotations

import itertools

import numpy as np

from .arrays import ExactArray, ExactSum

#: The exact totals :func:`resum_totals` checks: arrays, then scalars.
EXACT_TOTALS = ("cls_docs", "cls_mass", "term_df", "term_mass")
EXACT_SCALARS = ("total_docs", "class_docs_total", "total_mass")


def resum_totals(state) -> int:
    """Re-sum every per-class, per-term and model total from the live documents; the number that differed.

    The from-scratch reference: ``N(l)`` and ``I_n`` sum the documents'
    decay factors, ``C(l)`` each document's mass (its contributions summed
    in order, as learning adds it), ``C(n)`` the contributions per class a
    document counts under. The totals are exact sums (:class:`ExactArray`),
    so they equal this bit for bit and the count is 0; any other count is
    drift (a bug), and the re-summed values replace the drifted ones.
    """
    fresh = {name: ExactArray(len(getattr(state, name))) for name in EXACT_TOTALS}
    scalars = {name: ExactSum() for name in EXACT_SCALARS}
    records = list(state.docs.values())
    if records:
        factors = np.array([r.factor for r in records])
        lengths = np.fromiter(map(len, (r.terms for r in records)), dtype=np.int64, count=len(records))
        terms = np.concatenate([r.terms for r in records]).astype(np.int64)
        owner = np.repeat(np.arange(len(records)), lengths)
        contrib = np.concatenate([r.weights for r in records]) * factors[owner]
        mass = np.bincount(owner, contrib, minlength=len(records))  # each document's in order, as learned
        n_classes = np.fromiter(map(len, (r.classes for r in records)), dtype=np.int64, count=len(records))
        pair_class = np.fromiter(itertools.chain.from_iterable(r.classes for r in records), dtype=np.int64)
        pair_doc = np.repeat(np.arange(len(records)), n_classes)
        fresh["term_df"].add(terms, factors[owner])
        fresh["cls_docs"].add(pair_class, factors[pair_doc])
        fresh["cls_mass"].add(pair_class, mass[pair_doc])
        repeats = n_classes[owner]  # a term's contribution counts once per class of its document
        fresh["term_mass"].add(np.repeat(terms, repeats), np.repeat(contrib, repeats))
        scalars["total_docs"].add_many(factors)
        scalars["class_docs_total"].add_many(factors[pair_doc])
        scalars["total_mass"].add_many(mass[pair_doc])
    drift = 0
    for name, sums in fresh.items():
        mine: ExactArray = getattr(state, name)
        differs = int(np.count_nonzero(mine.get(slice(0, len(sums.hi))) != sums.get()))
        if differs:
            drift += differs
            setattr(state, name, sums)
    for name, total in scalars.items():
        if getattr(state, name).value != total.value:
            drift += 1
            setattr(state, name, total)
    if drift:
        state.epoch += 1
    return drift
