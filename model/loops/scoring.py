"""Compiled loops of the scoring path: the label scores, the dense posterior (the MNB scoring
kernel's loop, MODEL.md section 5), and one-pass checks on the way there (seen terms, stale postings)."""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def document_sums(i, d, owner, terms, weights, log_background):  # pragma: no cover - compiled
    """Document ``d``'s entries from ``i`` on: ``(end, |w|_1, sum_n w_n log p_b(n))``, ``log_background``
    indexed by term id."""
    length = 0.0
    smooth = 0.0
    while i < terms.shape[0] and owner[i] == d:
        length += weights[i]
        smooth += weights[i] * log_background[terms[i]]
        i += 1
    return i, length, smooth


@njit(cache=True, nogil=True)
def add_postings(first, stop, terms, weights, starts, lengths, posting_class, posting_weight,
                 matched):  # pragma: no cover - compiled
    """``matched[l] += w_n w(l, n)`` over the postings of the entries ``first..stop-1`` (one document's terms)."""
    for j in range(first, stop):
        w = weights[j]
        t = terms[j]
        for p in range(starts[t], starts[t] + lengths[t]):
            matched[posting_class[p]] += w * posting_weight[p]


@njit(cache=True, nogil=True)
def dense_log_posterior(n_docs, owner, terms, weights, log_background, starts, lengths, posting_class,
                        posting_weight, active, log_prior, log_a, out):  # pragma: no cover - compiled
    """Normalized log posteriors of a batch over the ``active`` class ids (MODEL.md section 5).

    ``out[d, j] = score(active[j]) - logsumexp(score)`` with
    ``score(l) = theta log p(l) + |w|_1 log a_l + sum_n w_n log p_b(n) + sum_postings w_n w(l, n)``,
    ``log_background`` indexed by term id.
    """
    n_active = active.shape[0]
    capacity = log_prior.shape[0]
    matched = np.zeros(capacity)
    i = 0
    for d in range(n_docs):
        start_i = i
        i, length, smooth = document_sums(i, d, owner, terms, weights, log_background)
        add_postings(start_i, i, terms, weights, starts, lengths, posting_class, posting_weight, matched)
        peak = -np.inf
        for j in range(n_active):
            c = active[j]
            score = ((log_prior[c] + length * log_a[c]) + smooth) + matched[c]
            out[d, j] = score
            if score > peak:
                peak = score
        total = 0.0
        for j in range(n_active):
            total += np.exp(out[d, j] - peak)
        log_norm = peak + np.log(total)
        for j in range(n_active):
            out[d, j] -= log_norm
        for j in range(start_i, i):  # reset only what was touched
            t = terms[j]
            for p in range(starts[t], starts[t] + lengths[t]):
                matched[posting_class[p]] = 0.0


@njit(cache=True, nogil=True)
def label_joint_scores(owner, terms, weights, log_background, starts, lengths, posting_class, posting_weight,
                       log_prior, log_a, out):  # pragma: no cover - compiled
    """Unnormalized label scores of a batch for every class id (TDM's label level, MODEL.md section 5).

    ``out[d, l] = ((theta log p(l) + |w|_1 log a_l) + sum_n w_n log p_b(n)) + sum_postings w_n w(l, n)``,
    ``log_background`` indexed by term id; the postings' sum is formed apart, then added (the order of
    the numpy formulation it replaces). ``out`` has one row per document of ``owner`` (ascending).
    """
    n_docs, capacity = out.shape
    matched = np.zeros(capacity)
    i = 0
    for d in range(n_docs):
        start_i = i
        i, length, smooth = document_sums(i, d, owner, terms, weights, log_background)
        add_postings(start_i, i, terms, weights, starts, lengths, posting_class, posting_weight, matched)
        for c in range(capacity):
            out[d, c] = ((log_prior[c] + length * log_a[c]) + smooth) + matched[c]
            matched[c] = 0.0


@njit(cache=True, nogil=True)
def keep_seen_terms(term_ids, values, owner, term_entries):  # pragma: no cover - compiled
    """Compact ``(term_ids, values, owner)`` in place to the terms with entries; returns how many remain.

    A term is seen when its id is valid (``>= 0``; ``-1`` marks a word not in the
    vocabulary) and it has at least one (class, term) entry.
    """
    n = 0
    for i in range(term_ids.shape[0]):
        t = term_ids[i]
        if t >= 0 and term_entries[t] > 0:
            term_ids[n] = t
            values[n] = values[i]
            owner[n] = owner[i]
            n += 1
    return n


@njit(cache=True, nogil=True)
def any_stale(epochs, terms, epoch):  # pragma: no cover - compiled
    """Whether a term of ``terms`` was computed at another epoch than ``epoch`` (``epochs[t]``). Ids beyond
    ``epochs`` have nothing computed for them (e.g. no document postings yet) and are not stale."""
    for t in terms:
        if t < epochs.shape[0] and epochs[t] != epoch:
            return True
    return False
