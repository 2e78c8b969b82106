"""Compiled loops of TDM's document postings (:class:`model.document_nodes.DocumentNodes`): appending
to the per-term regions of the posting arena, the lazy posting weights
(:meth:`model.tdm.TDM._build_document_weights`) and their copy to the weight cache; for a kernel that
keeps nothing (all weights +0.0), the guard's per-node checks, the mark that stands for the copy of the nodes
with zero weights (:func:`mark_zero_weights`) and that copy where the scoring loop reads it.

Per posting ``(node i, c_i(n))`` of a term ``n``, the ratio whose ``log1p`` is the weight ``v_i(n)``::

    r_i(n) = (c_i(n) - K(c_i(n))) / ((kmu + K_i) * p_l(n)),
    p_l(n) = a_l * (p_b(n) + (C(l,n) - D(C(l,n))) / (mu + D(l)))

with ``C(l,n)`` summed afresh from the term's postings of label ``l`` (each node's decayed share
``f_i * c_i(n) / |c_i|_1``, in posting order, then scaled), ``D`` the label's discount chain and ``K``
the kernel's (as ``(forms, values)``, :func:`model.loops.weights.chain_discount`). The operations and
their order are those of the numpy expression it replaces, with no temporary arrays per posting;
the ``log1p`` is left to numpy (vectorized, several times faster per value than a scalar call here).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .weights import chain_discount

#: Whole counts below this have ``c - K(c)`` computed once per call (most of a message's counts).
_SMALL = 64


#: Columns of a term's row in the posting table (:attr:`model.document_nodes.DocumentNodes.post_table`).
START, CAP, FILL, DEAD = 0, 1, 2, 3


@njit(cache=True, nogil=True)
def append_runs(run_terms, run_bounds, nodes, counts, table, arena_node, arena_count, used,
                weight_epoch):  # pragma: no cover - compiled
    """Append ``nodes[run_bounds[r]:run_bounds[r + 1]]`` (and their counts) to the region of ``run_terms[r]``
    (distinct terms; ``table[t]`` = its region's start, capacity, fill) and mark the terms' weights stale
    (``weight_epoch`` -1); returns ``(room, used, garbage)``.

    A full region moves to the end of the arena with capacity ``max(need, 2 * capacity, 4)`` (the old one
    becomes garbage). First the room every move needs is summed: when the arena is shorter than the high-water
    mark that gives (``room``), nothing is changed and ``(room, used, 0)`` is returned (the caller grows the
    arena and calls again, :meth:`DocumentNodes._append_runs`); else ``(0, new high-water mark, capacity the
    moves abandoned)``.
    """
    room = used
    for r in range(run_terms.shape[0]):
        t = run_terms[r]
        need = table[t, FILL] + run_bounds[r + 1] - run_bounds[r]
        if need > table[t, CAP]:
            room += max(need, 2 * table[t, CAP], 4)
    if room > arena_node.shape[0] or room > arena_count.shape[0]:
        return room, used, 0
    garbage = 0
    for r in range(run_terms.shape[0]):
        t = run_terms[r]
        lo, hi = run_bounds[r], run_bounds[r + 1]
        fill = table[t, FILL]
        need = fill + hi - lo
        if need > table[t, CAP]:
            cap = max(need, 2 * table[t, CAP], 4)
            old = table[t, START]
            for i in range(fill):
                arena_node[used + i] = arena_node[old + i]
                arena_count[used + i] = arena_count[old + i]
            garbage += table[t, CAP]
            table[t, START] = used
            table[t, CAP] = cap
            used += cap
        at = table[t, START] + fill
        for i in range(lo, hi):
            arena_node[at + i - lo] = nodes[i]
            arena_count[at + i - lo] = counts[i]
        table[t, FILL] = need
        weight_epoch[t] = -1
    return 0, used, garbage


@njit(cache=True, nogil=True)
def node_posting_ratios(terms, post_start, post_fill, arena_node, arena_count, node_class, node_factor, node_length, node_discount, scale,
                        label_forms, label_values, class_a, class_denominator, background, kernel_forms,
                        kernel_values, kernel_mu, label_sum, out_node, ratio):  # pragma: no cover - compiled
    """The postings of ``terms`` read from the arena in order: their nodes to ``out_node``, ratios to ``ratio``.

    ``background[j]`` is ``p_b`` of ``terms[j]``; ``class_a``/``class_denominator`` are ``a_l`` and
    ``mu + D(l)`` per class id; ``label_sum`` is scratch of one value per class id.
    """
    small_kept = np.full(_SMALL, np.nan)
    # p_l(n) of the term being read, per class id: computed at the class's first posting (NaN: not yet), the
    # same operations on the same numbers as per posting, so the same bits, once per (term, label)
    label_prob = np.full(label_sum.shape[0], np.nan)
    n_classes = label_sum.shape[0]
    k = 0
    for j in range(terms.shape[0]):
        start = post_start[terms[j]]
        end = start + post_fill[terms[j]]
        if n_classes <= end - start:  # few labels (the usual case): clearing them all is cheaper than a pass
            label_sum[:] = 0.0
            label_prob[:] = np.nan
        else:
            for i in range(start, end):
                c = node_class[arena_node[i]]
                label_sum[c] = 0.0
                label_prob[c] = np.nan
        for i in range(start, end):
            node = arena_node[i]
            label_sum[node_class[node]] += node_factor[node] * (arena_count[i] / node_length[node])
        pb = background[j]
        for i in range(start, end):
            node = arena_node[i]
            c = node_class[node]
            prob = label_prob[c]
            if prob != prob:
                x = label_sum[c] * scale
                prob = class_a[c] * (pb + (x - chain_discount(label_forms, label_values, x)) / class_denominator[c])
                label_prob[c] = prob
            y = arena_count[i]
            if 0.0 <= y < _SMALL and y == np.floor(y):  # the same function of the same numbers: the same bits
                whole = np.int64(y)
                if small_kept[whole] != small_kept[whole]:
                    small_kept[whole] = y - chain_discount(kernel_forms, kernel_values, y)
                kept = small_kept[whole]
            else:
                kept = y - chain_discount(kernel_forms, kernel_values, y)
            out_node[k] = node
            ratio[k] = kept / ((kernel_mu + node_discount[node]) * prob)
            k += 1


@njit(cache=True, nogil=True)
def release_unfit(terms, fills, epoch, weight_epoch, cache_cap):  # pragma: no cover - compiled
    """The first step of storing the weights of ``terms`` (distinct) for ``epoch``: mark them computed, release
    the cached region of every term whose ``fills[k]`` postings do not fit in it (or has none) and size its new
    one (``fill + fill // 4 + 2``, 0 for none). Returns the released and the needed cells."""
    released = 0
    need = 0
    for k in range(terms.shape[0]):
        t = terms[k]
        weight_epoch[t] = epoch
        n = fills[k]
        if n > 0 and n <= cache_cap[t]:
            continue
        released += cache_cap[t]
        cache_cap[t] = 0
        if n > 0:
            need += n + n // 4 + 2
    return released, need


@njit(cache=True, nogil=True)
def store_cached(terms, fills, nodes, weights, at, cache_start, cache_len, cache_cap, cache_node, cache_weight,
                 term_bound):  # pragma: no cover - compiled
    """The second step (after :func:`release_unfit` and making room): the ``k``-th term's run of
    ``nodes``/``weights`` (the next ``fills[k]``) to its kept region, or a new one from ``at`` on (in term
    order), its largest weight to ``term_bound`` (0 for an empty run; NaN propagates, as ``np.maximum``
    does). Returns where the new regions end."""
    p = 0
    for k in range(terms.shape[0]):
        t = terms[k]
        n = fills[k]
        if cache_cap[t] == 0:  # released or never held: a new region
            cap = n + n // 4 + 2 if n > 0 else 0
            cache_start[t] = at
            cache_cap[t] = cap
            at += cap
        start = cache_start[t]
        bound = weights[p] if n > 0 else 0.0
        for i in range(n):
            w = weights[p + i]
            cache_node[start + i] = nodes[p + i]
            cache_weight[start + i] = w
            if w > bound or w != w:
                bound = w
        cache_len[t] = n
        term_bound[t] = bound
        p += n
    return at


@njit(cache=True, nogil=True)
def mark_zero_weights(terms, fills, epoch, weight_epoch, cache_len, cache_cap, term_bound):  # pragma: no cover
    """Instead of :func:`store_cached_zeros` (a kernel that keeps nothing, every weight ``+0.0``): mark ``terms``
    (distinct) computed for ``epoch``, count the ``k``-th term's ``fills[k]`` postings in ``cache_len`` and its
    bound 0, and release its cached region (``cache_cap`` 0) without copying its nodes: ``cache_len > cache_cap``
    then says that the term's nodes are the posting arena's first ``cache_len`` (not copied). Returns the
    released cells."""
    released = 0
    for k in range(terms.shape[0]):
        t = terms[k]
        weight_epoch[t] = epoch
        released += cache_cap[t]
        cache_cap[t] = 0
        cache_len[t] = fills[k]
        term_bound[t] = 0.0
    return released


@njit(cache=True, nogil=True)
def copy_needed(terms, cache_len, cache_cap, term_bound):  # pragma: no cover - compiled
    """Whether the scored ``terms`` hold both a term whose zero weights were not copied (:func:`mark_zero_weights`)
    and a term with a weight that is not 0 (bound not 0, or NaN): the scoring loop then reads the uncopied terms'
    nodes (:func:`model.loops.mixture.log_mixtures`). Terms at or beyond ``cache_len``'s size have no postings."""
    uncopied = False
    weighted = False
    n_known = cache_len.shape[0]
    for p in range(terms.shape[0]):
        t = terms[p]
        if t < n_known and cache_len[t] > 0:
            if cache_len[t] > cache_cap[t]:
                uncopied = True
            elif term_bound[t] != 0.0:
                weighted = True
    return uncopied and weighted


@njit(cache=True, nogil=True)
def store_cached_zeros(terms, fills, post_start, arena_node, at, cache_start, cache_len, cache_cap, cache_node,
                       cache_weight, term_bound):  # pragma: no cover - compiled
    """:func:`store_cached` of weights that are all ``+0.0``, the nodes read straight from the posting arena
    (``post_start``, ``arena_node``; ``fills[k]`` postings of ``terms[k]``, as :func:`node_posting_ratios`
    lists them)."""
    for k in range(terms.shape[0]):
        t = terms[k]
        n = fills[k]
        if cache_cap[t] == 0:
            cap = n + n // 4 + 2 if n > 0 else 0
            cache_start[t] = at
            cache_cap[t] = cap
            at += cap
        start = cache_start[t]
        source = post_start[t]
        for i in range(n):
            cache_node[start + i] = arena_node[source + i]
            cache_weight[start + i] = 0.0
        cache_len[t] = n
        term_bound[t] = 0.0
    return at


@njit(cache=True, nogil=True)
def nodes_keep_positive(n, alive, node_class, node_discount, kernel_mu, node_factor, node_length, class_a,
                        denominator, scale):  # pragma: no cover - compiled
    """For :meth:`model.tdm.TDM._kernel_keeps_nothing`: over the live nodes, the smallest ``kmu + K_i`` and the
    smallest ``a_l`` of their labels; ``(-1.0, -1.0)`` when there is none or one breaks a condition (a NaN or
    infinite number, a negative factor, a length not positive, ``mu + D(l)`` not positive, or factors that
    could sum to an overflow)."""
    low_mass = np.inf
    low_a = np.inf
    factor_max = 0.0
    count = 0
    for i in range(n):
        if not alive[i]:
            continue
        count += 1
        c = node_class[i]
        kernel_mass = kernel_mu + node_discount[i]
        a = class_a[c]
        f = node_factor[i]
        length = node_length[i]
        if not (np.isfinite(kernel_mass) and np.isfinite(a) and np.isfinite(denominator[c]) and denominator[c] > 0.0
                and np.isfinite(f) and f >= 0.0 and np.isfinite(length) and length > 0.0):
            return -1.0, -1.0
        low_mass = min(low_mass, kernel_mass)
        low_a = min(low_a, a)
        factor_max = max(factor_max, f)
    if count == 0 or factor_max * count * scale > 1e300:
        return -1.0, -1.0
    return low_mass, low_a

