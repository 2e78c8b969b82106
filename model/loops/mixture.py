"""The compiled loop of TDM scoring (:mod:`model.tdm`): per scored document and label, the log of the
document mixture ``log sum_{i in I_l} pi_i a_i^Q exp(m_i)`` with certified-negligible pruning.

Notation as in :mod:`model.tdm`: ``Q = |w|_1``, ``m_i = sum_n w_n v_i(n) >= 0``, a node's log term
``t_i = log pi_i + Q log a_i + m_i``, the closed form ``T_l = sum_{i in I_l} pi_i a_i^Q`` (over the
groups of equal ``a_i``), ``M_l = sum_{matched i} pi_i a_i^Q expm1(m_i)``, ``S_l = T_l + M_l``, and
``lambda_l`` the label-level score (MNB's kernel) so that ``log p(w, l) = lambda_l + log S_l``.

What may be skipped, and why the result stays exact to float64 round-off. The loop computes
``S~_l <= S_l`` from fewer terms and guarantees, for every label ``l``::

    0 <= S_l - S~_l  <  2**-52 * max(S~_l, exp(J - lambda_l)),    J = max_k (lambda_k + log S~_k)

i.e. what it leaves out of a label is below one unit of round-off of the label's own mixture or of the
best label's joint score. Hence every posterior is within ``2**-51`` of the exact one (absolute), and
every log posterior within ``2**-51 * max(1, p_max / p_l)`` (below ``1e-9`` for ``p_l > 1e-6``). Three
kinds of skipped mass, each kept below a quarter of that budget (``F_l`` = the log of the larger
lower bound available when the decision is made, ``eps = 2**-52 / 4``):

1. groups of the closed form ``T_l``: a label's groups are visited by decreasing ``log a``; once
   ``Q log a_g < F_l + log eps``, all remaining groups (total mixture weight ``<= 1``) add at most
   ``a_g^Q < eps * exp(F_l)``;
2. unseen matches: the query's terms are read by decreasing bound ``b_n = w_n * max_i v_i(n)``
   (per-term maxima, recomputed with the weights); once the bounds of the unread terms sum to ``R``,
   a node not met so far has ``m_i <= R`` and all of them together add at most
   ``expm1(R) * T_l``; reading stops only when ``log T_l^+ + log expm1(R) < F_l + log eps`` for
   every label (``T_l^+``: ``T~_l`` plus the skipped-group bound);
3. met but negligible nodes: a node met with partial sum ``p_i`` has ``m_i <= p_i + R``; it is
   dropped when ``t_i^+ = log pi_i + Q log a_i + p_i + R < F_l + log(eps / N)`` (``N`` nodes in all);
   the others are completed exactly by binary search in the unread terms' postings (ascending node ids).

Lower bounds: ``S~_l >= T~_l`` and ``S_l >= pi_i a_i^Q expm1(p_i)`` for every met node (``v >= 0``);
``F_l = max(log of these, J^- - lambda_l)`` with ``J^-`` the best ``lambda + `` lower bound over labels.
Without pruning (``prune=False``) every group, term and node is summed: the exact sums of the model
before pruning existed. A document none of whose terms has a posting weight other than +-0 (every bound 0:
a kernel that keeps nothing) has ``m_i = 0`` for every node, so ``S_l = T_l`` exactly: its postings are not
read (steps 2-3 would add nothing), only counted.

The node pass. When a document's postings outnumber the nodes ``node_pass_ratio`` times (a common-word
document on a small model: nearly every node is met, and the postings must be read anyway), the loop
reads every posting and sums ``S_l = sum_i exp(t_i)`` over all nodes of each label directly, with
``t_i = log pi_i + Q log a_i + m_i`` (the same positive terms as ``T_l + M_l``, one ``exp`` per node
instead of one per group plus ``expm1``, ``log`` and ``exp`` per matched node, and no stop tests). With
pruning it leaves out a node only when ``t_i < max(P_l, J^- - lambda_l) + log(eps / N)`` (``P_l`` the
label's largest ``t_i``, a lower bound of ``log S_l``; ``J^-`` the best ``lambda + P``): kind 3 above, the
label's largest node always kept. The rule reads only counters the model has (postings of the
document's terms, node ids), so it is deterministic; both forms are within round-off of each other.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

#: ``log(2**-52 / 4)``: each of the three skipped parts stays below a quarter of one round-off unit.
LOG_PART = -52.0 * math.log(2.0) - math.log(4.0)
#: Relative slack on sums of bounds (their own rounding): bounds are inflated by it.
_SLACK = 1.0 + 1e-12

#: Counters :func:`log_mixtures` adds to (per call, summed over its documents).
#: With the node pass (module docstring) ``groups_read`` stays 0, ``nodes_met`` counts the nodes with a match
#: and ``nodes_kept`` every node summed (met or not); ``node_passes`` counts the documents scored by it.
COUNTERS = ("postings", "postings_read", "lookups", "groups", "groups_read", "nodes_met", "nodes_kept", "node_passes")


@njit(cache=True, nogil=True)
def _log_expm1(x):  # pragma: no cover - compiled
    # log(exp(x) - 1) for x > 0 without overflow
    return x + math.log(-math.expm1(-x))


@njit(cache=True, nogil=True)
def _find(nodes, lo, hi, node):  # pragma: no cover - compiled
    """Position of ``node`` in the ascending ``nodes[lo:hi]``, or -1."""
    while lo < hi:
        mid = (lo + hi) >> 1
        value = nodes[mid]
        if value < node:
            lo = mid + 1
        elif value > node:
            hi = mid
        else:
            return mid
    return -1


@njit(cache=True, nogil=True)
def log_mixtures(row_start, terms, weights, label_scores, cache_start, cache_len, cache_node,
                 cache_weight, term_bound, node_class, node_log_pi, node_log_a, group_classes, group_starts,
                 group_sizes, group_log_mass, group_log_a, n_nodes_bound, prune, node_pass_ratio, acc, met,
                 met_nodes, out, counters):  # pragma: no cover - compiled
    """``out[d, l] = log S~_l`` for every scored document ``d`` and label ``l`` with nodes (module docstring).

    ``terms``/``weights`` hold the batch's terms grouped by document (document ``d``: positions
    ``row_start[d]:row_start[d + 1]``; terms at or beyond ``cache_len``'s size have no postings;
    ``Q`` is the sum of the row's weights); ``label_scores[d, l] = lambda_l``. A document whose
    postings number at least ``node_pass_ratio`` times ``n_nodes_bound`` is scored by the node pass
    (``inf``: never). ``acc`` and ``met`` are zeroed scratch of one cell per node id (left zeroed),
    ``met_nodes`` scratch of the same size. ``out`` is ``-inf`` where a label has no nodes.
    """
    n_docs = row_start.shape[0] - 1
    n_groups_classes = group_classes.shape[0]
    n_classes = out.shape[1]
    log_t = np.empty(n_groups_classes)  # log T~_l
    log_t_up = np.empty(n_groups_classes)  # log of T~_l plus the skipped-group bound
    floor = np.full(n_classes, -np.inf)  # F_l per class id, at the last decision
    best_node = np.full(n_classes, -1, dtype=np.int64)  # per class id: its best met node when last looked
    peak = np.full(n_classes, -np.inf)
    total = np.zeros(n_classes)
    log_eps_node = LOG_PART - math.log(max(n_nodes_bound, 1))
    n_known = cache_len.shape[0]
    for d in range(n_docs):
        lo = row_start[d]
        hi = row_start[d + 1]
        q = 0.0
        n_postings = 0
        weighted = False  # a posting weight that is not +-0 (a term's bound not 0)
        for p in range(lo, hi):
            q += weights[p]
            t = terms[p]
            if t < n_known:
                n_postings += cache_len[t]
                if cache_len[t] > 0 and term_bound[t] != 0.0:
                    weighted = True
        if n_postings >= node_pass_ratio * n_nodes_bound:
            counters[0] += n_postings
            counters[7] += 1
            for k in range(n_groups_classes):
                counters[3] += group_sizes[k]
            _node_pass(d, q, lo, hi, terms, weights, label_scores[d], n_known, cache_start, cache_len, cache_node,
                       cache_weight, term_bound, node_class, node_log_pi, node_log_a, group_classes, n_nodes_bound, prune,
                       log_eps_node, acc, peak, total, floor, out, counters)
            continue
        scores = label_scores[d]
        # ---- 1. the closed form T_l, groups by decreasing log a (the first one always summed)
        low_joint = -np.inf
        for k in range(n_groups_classes):
            g = group_starts[k] + group_sizes[k] - 1
            value = scores[group_classes[k]] + group_log_mass[g] + q * group_log_a[g]
            if value > low_joint:
                low_joint = value
        for k in range(n_groups_classes):
            lam = scores[group_classes[k]]
            start = group_starts[k]
            g = start + group_sizes[k] - 1
            top = group_log_mass[g] + q * group_log_a[g]
            s = 1.0
            skipped = -np.inf
            counters[3] += group_sizes[k]
            counters[4] += 1
            g -= 1
            while g >= start:
                exponent = q * group_log_a[g]
                if prune and exponent < max(top, low_joint - lam) + LOG_PART:
                    skipped = exponent
                    break
                value = group_log_mass[g] + exponent
                if value > top:
                    s = s * math.exp(top - value) + 1.0
                    top = value
                else:
                    s += math.exp(value - top)
                counters[4] += 1
                g -= 1
            log_t[k] = top + math.log(s)
            log_t_up[k] = np.logaddexp(log_t[k], skipped)
        if not weighted:
            # every posting weighs +-0 (a kernel that keeps nothing): each m_i is +-0 (or NaN, of an infinite w_n),
            # no node has a positive sum, so steps 2-3 add no matched term and S~_l = T~_l; their postings are not
            # read (a term's nodes may not even be copied: DocumentNodes.store_zero_weights)
            counters[0] += n_postings
            for k in range(n_groups_classes):
                out[d, group_classes[k]] = log_t[k]
            continue
        # ---- 2. the matched nodes: terms by decreasing bound
        n_terms = 0
        order_bound = np.empty(hi - lo)
        order_term = np.empty(hi - lo, dtype=np.int64)
        order_weight = np.empty(hi - lo)
        exact_row = not prune
        for p in range(lo, hi):
            t = terms[p]
            if t < n_known and cache_len[t] > 0:
                if weights[p] < 0.0:
                    exact_row = True  # bounds assume w_n >= 0 (true of every weighting here); else read all
                order_bound[n_terms] = weights[p] * term_bound[t]
                order_term[n_terms] = t
                order_weight[n_terms] = weights[p]
                n_terms += 1
        order = np.argsort(-order_bound[:n_terms], kind="mergesort")
        rest = np.zeros(n_terms + 1)  # rest[j]: bound of the terms j.. (inflated for rounding)
        rest_postings = np.zeros(n_terms + 1, dtype=np.int64)
        for j in range(n_terms - 1, -1, -1):
            rest[j] = (rest[j + 1] + max(order_bound[order[j]], 0.0)) * _SLACK
            rest_postings[j] = rest_postings[j + 1] + cache_len[order_term[order[j]]]
        counters[0] += rest_postings[0]
        n_met = 0
        stop = n_terms
        # when the postings outnumber the nodes four times, the met nodes are found by one scan of the sums
        # instead of a mark per posting (a bare loop: no branch); the scan is O(nodes) = O(postings) then
        scan = rest_postings[0] >= 4 * n_nodes_bound
        # deciding to stop: a cheap test, O(labels + terms), before every list at least that long, with the
        # labels' floors as last found; finding the best met nodes for them (and counting the nodes to
        # complete) costs O(met nodes) (O(nodes) when scanning), done the first time and then once twice that
        # much was read
        cheap = n_groups_classes + n_terms
        read_since = 0
        counted = False
        looked = False
        for k in range(n_groups_classes):
            best_node[group_classes[k]] = -1
        for j in range(n_terms):
            t = order_term[order[j]]
            if not exact_row and cache_len[t] >= cheap and rest_postings[j] > cheap:
                full = (n_nodes_bound if scan else n_met) + cheap
                fresh = read_since >= 2 * full or not looked
                if fresh:
                    looked = True
                    read_since = 0
                    if scan:
                        n_met = _collect(acc, n_nodes_bound, met_nodes)
                    _best_nodes(q, node_class, node_log_pi, node_log_a, acc, met_nodes, n_met, best_node)
                    # floors from the best nodes' partial sums now: still lower bounds as the sums grow
                    _floors(q, scores, group_classes, log_t, acc, node_log_pi, node_log_a, best_node, floor)
                if _unseen_negligible(rest[j], group_classes, log_t_up, floor) and (fresh or not counted):
                    if not fresh:
                        read_since = 0
                        if scan:
                            n_met = _collect(acc, n_nodes_bound, met_nodes)
                    counted = not fresh  # after a count that said read on, count again only when fresh
                    if _worth_stopping(rest[j], q, node_class, node_log_pi, node_log_a, acc, met_nodes, n_met, floor,
                                       log_eps_node, order_term, order, j, n_terms, cache_len, rest_postings[j]):
                        stop = j
                        break
            t = order_term[order[j]]
            w = order_weight[order[j]]
            start = cache_start[t]
            counters[1] += cache_len[t]
            read_since += cache_len[t]
            if scan:
                for p in range(start, start + cache_len[t]):
                    acc[cache_node[p]] += w * cache_weight[p]
                continue
            for p in range(start, start + cache_len[t]):
                node = cache_node[p]
                if not met[node]:
                    met[node] = True
                    met_nodes[n_met] = node
                    n_met += 1
                acc[node] += w * cache_weight[p]
        if scan:
            n_met = _collect(acc, n_nodes_bound, met_nodes)
        counters[5] += n_met
        remaining = rest[stop] if stop < n_terms else 0.0
        if stop == n_terms and not exact_row:
            _best_nodes(q, node_class, node_log_pi, node_log_a, acc, met_nodes, n_met, best_node)
            _floors(q, scores, group_classes, log_t, acc, node_log_pi, node_log_a, best_node, floor)
        # ---- 3. keep the nodes that may matter, complete them, log-sum-exp per label
        kept = 0
        for m in range(n_met):
            node = met_nodes[m]
            if exact_row or (node_log_pi[node] + q * node_log_a[node] + acc[node] + remaining
                             >= floor[node_class[node]] + log_eps_node):
                met_nodes[kept] = node
                kept += 1
            else:
                acc[node] = 0.0
                met[node] = False
        counters[6] += kept
        for jj in range(stop, n_terms):
            t = order_term[order[jj]]
            w = order_weight[order[jj]]
            start = cache_start[t]
            end = start + cache_len[t]
            for m in range(kept):
                node = met_nodes[m]
                at = _find(cache_node, start, end, node)
                counters[2] += 1
                if at >= 0:
                    acc[node] += w * cache_weight[at]
        for m in range(kept):
            node = met_nodes[m]
            x = acc[node]
            acc[node] = 0.0
            met[node] = False
            if x > 0.0:
                cls = node_class[node]
                # log(pi_i a_i^Q expm1(m_i)); log(1 - exp(-x)) is below 2**-53 in size once x > 37
                value = node_log_pi[node] + q * node_log_a[node] + x
                if x < 37.0:
                    value += math.log(-math.expm1(-x))
                if value > peak[cls]:
                    total[cls] = total[cls] * math.exp(peak[cls] - value) + 1.0 if peak[cls] > -np.inf else 1.0
                    peak[cls] = value
                else:
                    total[cls] += math.exp(value - peak[cls])
        for k in range(n_groups_classes):
            cls = group_classes[k]
            if total[cls] > 0.0:
                out[d, cls] = np.logaddexp(log_t[k], peak[cls] + math.log(total[cls]))
            else:
                out[d, cls] = log_t[k]
            peak[cls] = -np.inf
            total[cls] = 0.0
            floor[cls] = -np.inf


@njit(cache=True, nogil=True)
def _node_pass(d, q, lo, hi, terms, weights, scores, n_known, cache_start, cache_len, cache_node, cache_weight,
               term_bound, node_class, node_log_pi, node_log_a, group_classes, n_nodes, prune, log_eps_node, acc, peak, total,
               threshold, out, counters):  # pragma: no cover - compiled
    """Document ``d`` by the node pass (module docstring): every posting read, ``log S_l`` summed over all nodes.

    ``peak``, ``total`` and ``threshold`` are per-class scratch (``peak`` -inf, ``total`` 0, left so).
    A removed node has ``log pi_i = -inf`` and adds nothing. A term whose largest weight is 0 (all its weights
    are +-0: they are >= 0 or NaN, and a NaN makes the bound NaN) is not read: its postings would add
    ``w * 0 = +-0`` (``w`` finite) to the sums, which changes none of them.
    """
    for p in range(lo, hi):
        t = terms[p]
        if t < n_known and cache_len[t] > 0 and term_bound[t] != 0.0:
            w = weights[p]
            start = cache_start[t]
            for pp in range(start, start + cache_len[t]):
                acc[cache_node[pp]] += w * cache_weight[pp]
            counters[1] += cache_len[t]
    matched = 0
    for node in range(n_nodes):  # t_i, kept in acc; P_l per label
        x = acc[node]
        if x != 0.0:
            matched += 1
        value = node_log_pi[node] + q * node_log_a[node] + x
        acc[node] = value
        cls = node_class[node]
        if value > peak[cls]:
            peak[cls] = value
    counters[5] += matched
    low_joint = -np.inf
    for k in range(group_classes.shape[0]):
        cls = group_classes[k]
        if scores[cls] + peak[cls] > low_joint:
            low_joint = scores[cls] + peak[cls]
    for k in range(group_classes.shape[0]):
        cls = group_classes[k]
        threshold[cls] = max(peak[cls], low_joint - scores[cls]) + log_eps_node if prune else -np.inf
    kept = 0
    for node in range(n_nodes):
        value = acc[node]
        acc[node] = 0.0
        cls = node_class[node]
        if value < threshold[cls] and value < peak[cls] or value == -np.inf:
            continue
        total[cls] += math.exp(value - peak[cls])
        kept += 1
    for k in range(group_classes.shape[0]):
        cls = group_classes[k]
        out[d, cls] = peak[cls] + math.log(total[cls])
        peak[cls] = -np.inf
        total[cls] = 0.0
        threshold[cls] = -np.inf
    counters[6] += kept


@njit(cache=True, nogil=True)
def _collect(acc, n_nodes, met_nodes):  # pragma: no cover - compiled
    """The nodes with a positive partial sum, ascending; their number."""
    n_met = 0
    for node in range(n_nodes):
        if acc[node] != 0.0:
            met_nodes[n_met] = node
            n_met += 1
    return n_met


@njit(cache=True, nogil=True)
def _best_nodes(q, node_class, node_log_pi, node_log_a, acc, met_nodes, n_met, best_node):  # pragma: no cover
    """Per label, the met node with the largest ``log pi_i + Q log a_i + p_i`` (``p_i``: its partial sum)."""
    best = np.full(best_node.shape[0], -np.inf)
    for m in range(n_met):
        node = met_nodes[m]
        value = node_log_pi[node] + q * node_log_a[node] + acc[node]
        cls = node_class[node]
        if value > best[cls]:
            best[cls] = value
            best_node[cls] = node


@njit(cache=True, nogil=True)
def _floors(q, scores, group_classes, log_t, acc, node_log_pi, node_log_a, best_node,
            floor):  # pragma: no cover - compiled
    """``floor[l] = F_l``: the log of the larger lower bound of label ``l``'s mixture (module docstring):
    ``T~_l``, the term of a met node of ``l`` with its partial sum so far (``best_node``; any met node gives
    a lower bound, the best one the tightest), and the best label's lower bound relative to ``lambda_l``."""
    low_joint = -np.inf
    for k in range(group_classes.shape[0]):
        cls = group_classes[k]
        floor[cls] = log_t[k]
        node = best_node[cls]
        if node >= 0 and acc[node] > 0.0:
            value = node_log_pi[node] + q * node_log_a[node] + acc[node] + math.log(-math.expm1(-acc[node]))
            floor[cls] = max(floor[cls], value)
        if scores[cls] + floor[cls] > low_joint:
            low_joint = scores[cls] + floor[cls]
    for k in range(group_classes.shape[0]):
        cls = group_classes[k]
        floor[cls] = max(floor[cls], low_joint - scores[cls])


@njit(cache=True, nogil=True)
def _unseen_negligible(rest, group_classes, log_t_up, floor):  # pragma: no cover - compiled
    """Whether nodes not met so far (``m_i <= rest``) are negligible for every label (``floor`` filled)."""
    log_rest = rest + math.log(-math.expm1(-rest)) if rest > 0.0 else -np.inf
    for k in range(group_classes.shape[0]):
        if log_t_up[k] + log_rest >= floor[group_classes[k]] + LOG_PART:
            return False
    return True


@njit(cache=True, nogil=True)
def _worth_stopping(rest, q, node_class, node_log_pi, node_log_a, acc, met_nodes, n_met, floor, log_eps_node,
                    order_term, order, j, n_terms, cache_len, unread):  # pragma: no cover - compiled
    """Whether completing the met nodes that may still matter costs less than the ``unread`` postings."""
    kept = 0
    for m in range(n_met):
        node = met_nodes[m]
        if node_log_pi[node] + q * node_log_a[node] + acc[node] + rest >= floor[node_class[node]] + log_eps_node:
            kept += 1
    cost = 0.0
    for jj in range(j, n_terms):
        cost += kept * (1.0 + math.log2(1.0 + cache_len[order_term[order[jj]]]))
    return cost < unread
