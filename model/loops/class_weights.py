"""The compiled loop of the ``fw`` weights ``g(n)`` (:mod:`model.term_class_weights`): one pass over the postings.

The numpy form, :func:`model.term_class_weights.class_entropy_weights`, makes some thirty array calls per
scored batch; for the one document the service scores at a time they cost more than the scoring kernel
(about 280 us against 90 us on r52 with bigrams). This loop reads each term's postings once, in the order
the numpy form sums them, so its sums are the same.
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def entropy_weights(terms, starts, lengths, posting_class, posting_slot, count_hi, count_lo, scale, live,
                    inverse_mass, inverse_mass_log, s1, s2, n_live, live_mass, gamma, kappa, eps,
                    out):  # pragma: no cover - compiled
    """``out[i] = g(terms[i])`` (MODEL.md's fw; :func:`model.term_class_weights.class_entropy_weights`).

    ``live[c]``: class ``c`` holds counts; ``inverse_mass[c] = x_c = 1 / (C(c) + kappa)`` and
    ``inverse_mass_log[c] = x_c log x_c`` for the live classes, ``s1`` and ``s2`` their sums over them (as
    numpy sums them); ``n_live`` of them (at least 2), with ``live_mass`` their summed mass. A posting's count
    is ``(count_hi + count_lo)[slot] * scale``.
    """
    log_k = np.log(n_live)
    for i in range(terms.shape[0]):
        t = terms[i]
        begin = starts[t]
        end = begin + lengths[t]
        term_mass = 0.0
        for p in range(begin, end):
            c = posting_class[p]
            count = (count_hi[posting_slot[p]] + count_lo[posting_slot[p]]) * scale
            if live[c] and count > 0:
                term_mass += count
        b = kappa * term_mass / live_mass
        held_x = 0.0
        held_xlogx = 0.0
        total = 0.0
        total_rlogr = 0.0
        for p in range(begin, end):
            c = posting_class[p]
            count = (count_hi[posting_slot[p]] + count_lo[posting_slot[p]]) * scale
            if live[c] and count > 0:
                x = inverse_mass[c]
                r = (count + b) * x
                held_x += x
                held_xlogx += inverse_mass_log[c]
                total += r
                total_rlogr += r * np.log(r)
        rest_x = max(s1 - held_x, 0.0)
        rest_xlogx = s2 - held_xlogx
        b_log_b = b * np.log(b) if b > 0 else 0.0
        total = total + b * rest_x
        total_rlogr = total_rlogr + b_log_b * rest_x + b * rest_xlogx
        entropy = np.log(total) - total_rlogr / total if total > 0 else log_k
        share = min(max(1.0 - entropy / log_k, 0.0), 1.0)
        out[i] = eps + (1.0 - eps) * share**gamma
