"""Compiled loops of the pruned top-k (MaxScore over the posting lists, :mod:`model.pruned_topk`).

Every class score is the dense kernel's (:func:`model.loops.scoring.dense_log_posterior`), evaluated
with the same floating-point operations in the same order, so scores, ties and the top-k equal the
dense pass's; only classes whose upper bound is certified below the threshold are left out.
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def term_maxima(terms, epoch, starts, lengths, posting_weight, term_max, term_max_at):  # pragma: no cover - compiled
    """``term_max[t] = max_l w(l, t)`` for the ``terms`` whose maximum predates ``epoch``.

    Called right after the posting refresh of the same terms, so each maximum is
    exactly that of the current weights: updates make it stale like the postings,
    and it is recomputed lazily, only for the terms a scored document reads.
    """
    for t in terms:
        if term_max_at[t] != epoch:
            best = 0.0
            for p in range(starts[t], starts[t] + lengths[t]):
                if posting_weight[p] > best:
                    best = posting_weight[p]
            term_max[t] = best
            term_max_at[t] = epoch


@njit(cache=True, nogil=True)
def _offer(c, value, top_ids, top_scores, n_top, k):  # pragma: no cover - compiled
    """Put class ``c`` with ``value`` into the running best-``k`` (by value; a class at most once)."""
    at = -1
    for i in range(n_top):
        if top_ids[i] == c:
            at = i
            break
    if at < 0:
        if n_top < k:
            at = n_top
            n_top += 1
        elif value > top_scores[k - 1]:
            at = k - 1
        else:
            return n_top
    top_ids[at] = c
    top_scores[at] = value
    while at > 0 and top_scores[at - 1] < top_scores[at]:  # up
        top_ids[at - 1], top_ids[at] = top_ids[at], top_ids[at - 1]
        top_scores[at - 1], top_scores[at] = top_scores[at], top_scores[at - 1]
        at -= 1
    while at + 1 < n_top and top_scores[at + 1] > top_scores[at]:  # down (an exact score a rounding below)
        top_ids[at + 1], top_ids[at] = top_ids[at], top_ids[at + 1]
        top_scores[at + 1], top_scores[at] = top_scores[at], top_scores[at + 1]
        at += 1
    return n_top


@njit(cache=True, nogil=True, inline="always")
def _insert_ranked(c, value, top_ids, top_scores, n_best, k):  # pragma: no cover - compiled
    """Insert class ``c`` into the best-``k`` list ranked by value, ties by lower id; returns the new length."""
    if n_best < k or value > top_scores[n_best - 1] or (value == top_scores[n_best - 1] and c < top_ids[n_best - 1]):
        at = n_best if n_best < k else k - 1
        while at > 0 and (value > top_scores[at - 1] or (value == top_scores[at - 1] and c < top_ids[at - 1])):
            if at < k:
                top_scores[at] = top_scores[at - 1]
                top_ids[at] = top_ids[at - 1]
            at -= 1
        top_scores[at] = value
        top_ids[at] = c
        if n_best < k:
            n_best += 1
    return n_best


@njit(cache=True, nogil=True)
def _threshold(top_scores, n_top, k, margin):  # pragma: no cover - compiled
    """``min(k-th best, best - margin)`` of the scores known so far (a lower bound of the true one)."""
    if n_top == 0:
        return -np.inf
    kth = top_scores[k - 1] if n_top == k else -np.inf
    return min(kth, top_scores[0] - margin)


@njit(cache=True, nogil=True)
def exact_matched(c, terms, weights, starts, lengths, posting_class, posting_weight):  # pragma: no cover - compiled
    """``sum_n w_n w(c, n)`` over the document's terms in document order (the dense kernel's order);
    each term's class-sorted posting list is binary-searched for ``c``."""
    total = 0.0
    for j in range(terms.shape[0]):
        t = terms[j]
        lo = starts[t]
        hi = lo + lengths[t]
        while lo < hi:
            mid = (lo + hi) >> 1
            if posting_class[mid] < c:
                lo = mid + 1
            else:
                hi = mid
        if lo < starts[t] + lengths[t] and posting_class[lo] == c:
            total += weights[j] * posting_weight[lo]
    return total


@njit(cache=True, nogil=True)
def block_maxima(active, log_prior, log_a, size, block_prior, block_log_a):  # pragma: no cover - compiled
    """Per block of ``size`` consecutive ``active`` classes: the largest ``theta log p(l)`` and ``log a_l``.

    ``block_prior[b] + |w|_1 block_log_a[b] + S`` bounds the score of every class of block ``b`` that
    meets none of the document's terms (``|w|_1 >= 0``); ids follow first sight, so with labels seen
    largest first a block holds labels of similar size, prior and ``a_l``.
    """
    n = active.shape[0]
    for b in range((n + size - 1) // size):
        best_prior = -np.inf
        best_log_a = -np.inf
        for j in range(b * size, min(n, (b + 1) * size)):
            c = active[j]
            if log_prior[c] > best_prior:
                best_prior = log_prior[c]
            if log_a[c] > best_log_a:
                best_log_a = log_a[c]
        block_prior[b] = best_prior
        block_log_a[b] = best_log_a


@njit(cache=True, nogil=True)
def pruned_candidates(terms, weights, log_background, starts, lengths, posting_class, posting_weight, term_max,
                      log_prior, log_a, prior_max, log_a_max, margin, k, budget, constant_a, massless, power_of,
                      power_total, inv_power_scale, log_constant, active, block_size, block_prior, block_log_a, acc,
                      marked, touched, chosen, cand_ids, cand_scores, top_ids,
                      top_scores):  # pragma: no cover - compiled
    """One document: exact scores of every class that may reach the threshold (MaxScore, term at a time).

    Terms are taken by decreasing upper bound ``u_n = w_n max_l w(l, n)``. While the
    classes not yet met could still reach the threshold (``prior_max + |w|_1 log_a_max
    + sum_n w_n log p_b(n)`` plus the ``u_n`` of the terms left), a term's whole list is
    accumulated (partial sums are lower bounds: every ``w(l, n) >= 0``); the lists left
    are then read only for the classes met whose bound reaches the threshold
    ``min(k-th best, best - margin)`` of the lower bounds. Those classes get their exact
    score in the dense kernel's order (document order): by binary search per term when
    they are few, else by one walk of the document's lists.

    When ``a_l`` is not ``constant_a`` and the bound of the classes never met does not
    rule them out, they are settled one by one: a compiled pass over the ``active``
    labels (their score is ``base(l) + S``; no postings, no ``exp``) keeps those that
    reach the threshold, skipping each block of ``block_size`` labels whose bound
    (:func:`block_maxima`: ``block_prior + |w|_1 block_log_a + S``) is below it.
    The dense pass instead (:func:`dense_topk`, in this call): when the next list
    could take the classes met past ``budget``, or the candidates pass it
    (pruning cannot pay: the certified margin keeps most labels; at most ``budget``
    postings or classes were read in vain). Then ``cand_ids/cand_scores[:candidates]``
    are every ``active`` class and its log posterior, ``top_ids/top_scores`` the best ``k``.

    With a ``constant_a`` (Jelinek-Mercer), the classes without counts (``massless``,
    ``a_l = 1``) are scored explicitly, and when the classes never met are not ruled out
    their mass enters the normalizer in closed form: ``power_of[l] = N(l)**theta``,
    ``power_total = sum_l p(l)**theta``, ``inv_power_scale = (sum_l N(l))**-theta``,
    ``log_constant = log a``; the caller adds the best of them (by prior) to the top.

    Returns ``(dense or not, classes met, candidates, log posterior threshold, terms
    accumulated, closed form used, log normalizer, top found, |w|_1, S)``: every class left out has
    a log posterior below the threshold; ``cand_ids/cand_scores[:candidates]`` hold the
    classes scored and their log posteriors, ``top_ids/top_scores`` the best ``k`` of them
    (ties: lower class id first), ``touched[:classes met]`` the classes met, still flagged
    in ``marked`` (:func:`clear_marks` resets them); ``acc`` and ``chosen`` are left zero.
    """
    m = terms.shape[0]
    length = 0.0
    smooth = 0.0
    for j in range(m):
        length += weights[j]
        smooth += weights[j] * log_background[j]
    bound = np.empty(m)
    for j in range(m):
        bound[j] = weights[j] * term_max[terms[j]]
    order = np.argsort(-bound)
    rest = np.zeros(m + 1)  # rest[i]: the bounds of order[i:]
    for i in range(m - 1, -1, -1):
        rest[i] = rest[i + 1] + bound[order[i]]
    unmet = ((prior_max + length * log_a_max) + smooth)  # no class scores more without postings
    slack = 1e-9 * (1.0 + abs(unmet) + rest[0])  # room for rounding between bounds and exact sums
    n_top = 0
    n_hit = 0
    done = 0
    postings = 0
    while done < m:
        theta = _threshold(top_scores, n_top, k, margin)
        if unmet + rest[done] + slack < theta:  # no class outside the lists read can reach it
            break
        j = order[done]
        w = weights[j]
        t = terms[j]
        if n_hit + lengths[t] > budget:  # this list might take the classes met past the budget: stop before it
            for i in range(n_hit):
                acc[touched[i]] = 0.0
            n_best = dense_topk(terms, weights, length, smooth, starts, lengths, posting_class, posting_weight,
                                active, log_prior, log_a, k, acc, cand_ids, cand_scores, top_ids, top_scores)
            return True, n_hit, active.shape[0], -np.inf, done, False, 0.0, n_best, length, smooth
        postings += lengths[t]
        for p in range(starts[t], starts[t] + lengths[t]):
            c = posting_class[p]
            if not marked[c]:
                marked[c] = True
                touched[n_hit] = c
                n_hit += 1
                acc[c] = (log_prior[c] + length * log_a[c]) + smooth
            acc[c] += w * posting_weight[p]
            n_top = _offer(c, acc[c], top_ids, top_scores, n_top, k)
        done += 1
    left = rest[done]
    if n_hit == active.shape[0]:  # every class met: none is left to the unmet bound, only the lists left
        unmet = -np.inf
    theta = _threshold(top_scores, n_top, k, margin)
    scan = not constant_a and unmet + left + slack >= theta  # the classes never met are not ruled out
    n_cand = 0
    for i in range(n_hit):
        c = touched[i]
        upper = acc[c] + left
        acc[c] = 0.0
        if upper + slack >= theta:
            cand_ids[n_cand] = c
            n_cand += 1
    all_postings = postings
    for i in range(done, m):
        all_postings += lengths[terms[order[i]]]
    if n_cand * m * 8 < all_postings:  # few candidates: binary search in each list
        for i in range(n_cand):
            c = cand_ids[i]
            cand_scores[i] = ((log_prior[c] + length * log_a[c]) + smooth) + exact_matched(
                c, terms, weights, starts, lengths, posting_class, posting_weight)
    else:  # many: one walk of the lists in document order, summing for the candidates only
        for i in range(n_cand):
            chosen[cand_ids[i]] = True
        for j in range(m):
            w = weights[j]
            t = terms[j]
            for p in range(starts[t], starts[t] + lengths[t]):
                c = posting_class[p]
                if chosen[c]:
                    acc[c] += w * posting_weight[p]
        for i in range(n_cand):
            c = cand_ids[i]
            cand_scores[i] = ((log_prior[c] + length * log_a[c]) + smooth) + acc[c]
            acc[c] = 0.0
            chosen[c] = False
    if scan:  # every list was read (else the bound held): a class never met scores base(l) + S, exactly
        for i in range(n_cand):
            n_top = _offer(cand_ids[i], cand_scores[i], top_ids, top_scores, n_top, k)
        theta = _threshold(top_scores, n_top, k, margin)
        n_active = active.shape[0]
        for b in range(block_prior.shape[0]):  # one compiled pass over the labels, no postings, no exp
            if ((block_prior[b] + length * block_log_a[b]) + smooth) + slack < theta:
                continue  # no class of this block without postings reaches the threshold
            for j in range(b * block_size, min(n_active, (b + 1) * block_size)):
                c = active[j]
                if marked[c]:
                    continue
                score = ((log_prior[c] + length * log_a[c]) + smooth) + 0.0
                if score + slack >= theta:
                    if n_cand >= budget:  # most labels are within the margin: the dense pass pays
                        n_best = dense_topk(terms, weights, length, smooth, starts, lengths, posting_class,
                                            posting_weight, active, log_prior, log_a, k, acc, cand_ids,
                                            cand_scores, top_ids, top_scores)
                        return True, n_hit, active.shape[0], -np.inf, done, False, 0.0, n_best, length, smooth
                    cand_ids[n_cand] = c
                    cand_scores[n_cand] = score
                    n_cand += 1
                    n_top = _offer(c, score, top_ids, top_scores, n_top, k)
                    theta = _threshold(top_scores, n_top, k, margin)
        unmet = -np.inf  # settled class by class
    if constant_a:  # classes without counts (a_l = 1, outside the closed form): scored explicitly
        for i in range(massless.shape[0]):
            c = massless[i]
            if not marked[c]:
                marked[c] = True
                touched[n_hit] = c
                n_hit += 1
                cand_ids[n_cand] = c
                cand_scores[n_cand] = ((log_prior[c] + length * log_a[c]) + smooth) + 0.0
                n_cand += 1
    peak = -np.inf
    for i in range(n_cand):
        n_top = _offer(cand_ids[i], cand_scores[i], top_ids, top_scores, n_top, k)
        if cand_scores[i] > peak:
            peak = cand_scores[i]
    theta = _threshold(top_scores, n_top, k, margin)
    closed = constant_a and unmet + left + slack >= theta  # then every list was read (else the bound held)
    unseen = 0.0
    closed_base = -np.inf
    if closed:  # the classes without postings here: (sum_l p(l)**theta - sum_met) a**|w|_1 exp(S)
        met_power = 0.0
        for i in range(n_hit):
            met_power += power_of[touched[i]]
        unseen = power_total - met_power * inv_power_scale
        if unseen > 0.0:
            closed_base = (length * log_constant) + smooth
            peak = max(peak, np.log(unseen) + closed_base)
    # the normalizer in class-id order, as the dense kernel sums (the classes left out are below its last bit)
    by_id = np.argsort(cand_ids[:n_cand])
    total = 0.0
    for i in range(n_cand):
        total += np.exp(cand_scores[by_id[i]] - peak)
    if unseen > 0.0:
        total += unseen * np.exp(closed_base - peak)
    log_norm = peak + np.log(total)
    # the best k by log posterior (the dense pass ranks those), ties: lower id
    n_best = 0
    for i in range(n_cand):
        c = cand_ids[i]
        value = cand_scores[i] - log_norm
        cand_scores[i] = value
        n_best = _insert_ranked(c, value, top_ids, top_scores, n_best, k)
    return False, n_hit, n_cand, theta - slack - log_norm, done, closed, log_norm, n_best, length, smooth


@njit(cache=True, nogil=True)
def dense_topk(terms, weights, length, smooth, starts, lengths, posting_class, posting_weight, active, log_prior,
               log_a, k, acc, out_ids, out_log_post, top_ids, top_log_post):  # pragma: no cover - compiled
    """One document by the dense pass: every ``active`` class's log posterior (``out_*``) and the best ``k``.

    The operations of :func:`model.loops.scoring.dense_log_posterior` in its order (the postings
    summed per class in document order from zero, the normalizer over ``active`` in order), so the
    values are its values; the best ``k`` by value, ties by lower position (class id), as
    :func:`model.predictions.top_k_indices`. ``acc`` is all zero on entry and left so. Returns how many.
    """
    m = terms.shape[0]
    for j in range(m):
        w = weights[j]
        t = terms[j]
        for p in range(starts[t], starts[t] + lengths[t]):
            acc[posting_class[p]] += w * posting_weight[p]
    n_active = active.shape[0]
    peak = -np.inf
    for j in range(n_active):
        c = active[j]
        score = ((log_prior[c] + length * log_a[c]) + smooth) + acc[c]
        out_ids[j] = c
        out_log_post[j] = score
        if score > peak:
            peak = score
    total = 0.0
    for j in range(n_active):
        total += np.exp(out_log_post[j] - peak)
    log_norm = peak + np.log(total)
    n_best = 0
    for j in range(n_active):
        value = out_log_post[j] - log_norm
        out_log_post[j] = value
        if n_best < k or value > top_log_post[n_best - 1]:  # equal values keep the lower position
            at = n_best if n_best < k else k - 1
            while at > 0 and value > top_log_post[at - 1]:
                if at < k:
                    top_log_post[at] = top_log_post[at - 1]
                    top_ids[at] = top_ids[at - 1]
                at -= 1
            top_log_post[at] = value
            top_ids[at] = out_ids[j]
            if n_best < k:
                n_best += 1
    for j in range(m):
        t = terms[j]
        for p in range(starts[t], starts[t] + lengths[t]):
            acc[posting_class[p]] = 0.0
    return n_best


@njit(cache=True, nogil=True)
def clear_marks(touched, n_hit, marked):  # pragma: no cover - compiled
    for i in range(n_hit):
        marked[touched[i]] = False


@njit(cache=True, nogil=True)
def best_unmarked(active, marked, log_prior, log_a, length, smooth, k, top_ids, top_scores):  # pragma: no cover
    """The best ``k`` of the ``active`` classes not ``marked`` by ``base(l) + S`` (ties: lower id first)."""
    n_best = 0
    for j in range(active.shape[0]):
        c = active[j]
        if marked[c]:
            continue
        score = ((log_prior[c] + length * log_a[c]) + smooth) + 0.0
        n_best = _insert_ranked(c, score, top_ids, top_scores, n_best, k)
    return n_best
