"""Compiled loop of model-based feedback (:mod:`model.feedback`): each document's feedback terms and its
mixed weights, in one pass over the top labels' word distributions."""
from __future__ import annotations

import numpy as np
from numba import njit

@njit(cache=True, nogil=True)
def feedback_documents(row_start, terms, weights, label_ids, label_weights, row_ptr, row_term, row_prob,
                       lam, n_terms, acc, seen, out_terms, out_weights, out_owner):  # pragma: no cover - compiled
    """The second-pass documents of a batch; returns how many entries were written.

    Document ``d`` holds ``terms[row_start[d]:row_start[d + 1]]`` with ``weights`` (``|w|_1`` their sum).
    Its labels ``label_ids[d, k]`` (``-1``: none) with weights ``label_weights[d, k]`` (summing to one) give
    ``f(n) = sum_k pi_k p_k(n)``, ``p_l(n)`` the row ``row_ptr[l]:row_ptr[l + 1]`` of ``(row_term, row_prob)``.
    The ``n_terms`` terms of largest positive ``f`` (ties at the cut: the first met, labels in order, each
    label's terms by id) are the feedback terms, ``f~ = f / sum of the kept f``. Written: the document's own terms, in order, with
    ``(1 - lam) w_n + lam |w|_1 f~(n)``, then its new feedback terms, in the order met, with ``lam |w|_1 f~(n)``;
    entries of weight 0 are left out. ``acc`` (zeros) and ``seen`` (False) are scratch over term ids, left as
    found.
    """
    n_docs = row_start.shape[0] - 1
    met = np.empty(acc.shape[0], dtype=np.int64)
    out = 0
    for d in range(n_docs):
        first, stop = row_start[d], row_start[d + 1]
        length = 0.0
        for i in range(first, stop):
            length += weights[i]
        n_met = 0
        for k in range(label_ids.shape[1]):
            label = label_ids[d, k]
            if label < 0:
                continue
            pi = label_weights[d, k]
            for p in range(row_ptr[label], row_ptr[label + 1]):
                t = row_term[p]
                if not seen[t]:
                    seen[t] = True
                    met[n_met] = t
                    n_met += 1
                acc[t] += pi * row_prob[p]
        cut = 0.0  # keep every positive value, or, with more than n_terms, the n_terms largest
        room = n_met
        if n_met > n_terms:
            values = np.empty(n_met)
            for j in range(n_met):
                values[j] = acc[met[j]]
            cut = np.partition(values, n_met - n_terms)[n_met - n_terms]  # the n_terms-th largest
            room = n_terms
            for j in range(n_met):
                if values[j] > cut:
                    room -= 1  # room left for the values equal to the cut, taken in the order met
        kept_total = 0.0
        for j in range(n_met):
            v = acc[met[j]]
            if v > cut or (v == cut and v > 0.0 and room > 0):
                if v == cut:
                    room -= 1
                kept_total += v
            else:
                acc[met[j]] = 0.0  # not a feedback term
        scale = lam * length / kept_total if kept_total > 0.0 else 0.0
        for i in range(first, stop):  # the document's own terms, in order
            t = terms[i]
            w = (1.0 - lam) * weights[i] + scale * acc[t]
            if seen[t]:
                acc[t] = 0.0
                seen[t] = False  # written: not a new term below
            if w > 0.0:
                out_terms[out] = t
                out_weights[out] = w
                out_owner[out] = d
                out += 1
        for j in range(n_met):  # the new feedback terms, in the order met
            t = met[j]
            if not seen[t]:
                continue
            w = scale * acc[t]
            acc[t] = 0.0
            seen[t] = False
            if w > 0.0:
                out_terms[out] = t
                out_weights[out] = w
                out_owner[out] = d
                out += 1
    return out
