"""What limits the pruned top-k on common-word documents (issue #18 must-show 2), beyond any tolerance.

    python -m bench.topk_limits [--sizes 100000] [--queries 60] [--spec u_jm_tXiX] [--json OUT]

On ``bench.topk_pruning``'s Zipf-sized labels and documents (same builder, same seed, same documents),
how the posterior mass lies over the labels (the best 1 / 5 / 1,000 labels' share, the gaps, the labels
within ``log N + 1`` and ``+ 3`` nats), and three measurements that say whether something other than a
posterior tolerance could reach 10x:

* **top-k labels only** (no normalized posterior, the threshold is the k-th best score alone): the
  pruned kernel run with a zero margin (``pruned_topk.MARGIN_NATS`` set to ``-log N`` for this
  measurement only; no such mode exists in the product), with and without its dense-fallback budget:
  lists read whole, classes scored exactly, CPU time against the dense pass, labels checked equal;
* **block-max bounds**: labels in id order (the builder learns them largest first, so ids follow
  size) cut into blocks of ``B``; a block's bound is ``max base(l) + S + sum_n w_n max_{l in block}
  w(l, n)``. The share of blocks whose bound reaches the k-th best exact score, and of the document's
  postings inside them: what a block-max pass (top-k only, its most favourable case) would still read;
  and the size of the block-max index it reads first (entries per posting of the document's lists);
* **where the dense pass's time goes**: the postings (accumulate and reset, as ``dense_topk``), the
  per-label score and the per-label ``exp`` of the normalizer, each timed alone in a compiled loop.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np
from numba import njit

import sgm.model.mnb as mnb_module
import sgm.model.pruned_topk as pruned_module

from .topk_pruning import SPECS, build, cpu_per_doc, queries


@njit(cache=False)
def _postings(terms, weights, starts, lengths, posting_class, posting_weight, acc):  # pragma: no cover - compiled
    for j in range(terms.shape[0]):
        w = weights[j]
        t = terms[j]
        for p in range(starts[t], starts[t] + lengths[t]):
            acc[posting_class[p]] += w * posting_weight[p]
    total = 0.0
    for j in range(terms.shape[0]):
        t = terms[j]
        for p in range(starts[t], starts[t] + lengths[t]):
            total += acc[posting_class[p]]
            acc[posting_class[p]] = 0.0
    return total


@njit(cache=False)
def _label_scores(active, log_prior, log_a, length, smooth, acc, out):  # pragma: no cover - compiled
    peak = -np.inf
    for j in range(active.shape[0]):
        c = active[j]
        score = ((log_prior[c] + length * log_a[c]) + smooth) + acc[c]
        out[j] = score
        if score > peak:
            peak = score
    return peak


@njit(cache=False)
def _label_exps(out, peak):  # pragma: no cover - compiled
    total = 0.0
    for j in range(out.shape[0]):
        total += np.exp(out[j] - peak)
    return total


def topk_only(model, docs, rounds: int) -> dict:
    """The pruned kernel with threshold = the k-th best (margin 0), with its budget and without."""
    n = len(model.classes_)
    saved = pruned_module.MARGIN_NATS, pruned_module.BUDGET_DIVISOR
    min_classes = mnb_module.PRUNED_TOPK_MIN_CLASSES
    out = {}
    try:
        for divisor in (saved[1], 1):
            pruned_module.MARGIN_NATS, pruned_module.BUDGET_DIVISOR = -math.log(n), divisor
            cpu_per_doc(model, docs, True)
            before = dict(model._pruner.counts)
            pruned_t, dense_t = [], []
            for _ in range(rounds):
                t, got = cpu_per_doc(model, docs, True)
                pruned_t.append(t)
                t, want = cpu_per_doc(model, docs, False)
                dense_t.append(t)
            for a, b in zip(got, want):
                assert [name for name, _ in a] == [name for name, _ in b]
            counts = {key: (model._pruner.counts[key] - before[key]) / (rounds * len(docs)) for key in before}
            out[f"budget 1/{divisor}"] = {"pruned_s": min(pruned_t), "dense_s": min(dense_t),
                                          "speedup": min(dense_t) / min(pruned_t),
                                          "lists_per_doc": counts["lists"], "lists_read_per_doc": counts["lists_read"],
                                          "exact_scores_per_doc": counts["candidates"],
                                          "dense_fallback_share": counts["dense"]}
    finally:
        pruned_module.MARGIN_NATS, pruned_module.BUDGET_DIVISOR = saved
        mnb_module.PRUNED_TOPK_MIN_CLASSES = min_classes
    return out


def block_max(model, docs, sizes=(4, 16, 64)) -> dict:
    state, labels = model.state, model.labels
    derived = labels.class_terms(state)
    arena, postings = state.arena, labels.postings
    active = state.active_classes()
    out = {}
    for size in sizes:
        kept_blocks, kept_postings, index_share = [], [], []
        for doc in docs:
            batch = model._prepare([doc])
            labels.refresh(state, batch.terms)
            length = float(batch.weights.sum())
            smooth = float((batch.weights * postings.log_background[batch.terms]).sum())
            kth = np.sort(labels.joint_log_scores(state, batch)[0][active])[::-1][4]
            n_blocks = state.classes.capacity // size + 1
            bound, inside = np.zeros(n_blocks), np.zeros(n_blocks)
            for t, w in zip(batch.terms.tolist(), batch.weights.tolist()):
                lo, hi = arena.start[t], arena.start[t] + arena.length[t]
                block = arena.cls[lo:hi] // size
                best = np.zeros(n_blocks)
                np.maximum.at(best, block, postings.weight[lo:hi])
                bound += w * best
                np.add.at(inside, block, 1)
                index_share.append(((best > 0).sum(), hi - lo))
            base = np.full(n_blocks, -np.inf)
            np.maximum.at(base, active // size, derived.log_prior[active] + length * derived.log_a[active])
            keep = base + smooth + bound >= kth - 1e-9
            kept_blocks.append(keep[base > -np.inf].mean())
            kept_postings.append(inside[keep].sum() / max(inside.sum(), 1.0))
        entries, lengths = np.array(index_share).sum(axis=0)
        out[size] = {"blocks_kept": float(np.mean(kept_blocks)), "postings_kept": float(np.mean(kept_postings)),
                     "index_entries_per_posting": float(entries / max(lengths, 1))}
    return out


def spread(model, docs) -> dict:
    """How the posterior mass lies: the share held by the best 1 / 5 / 1,000 labels, the gap (nats) of the
    5th and 1,000th label behind the best, and the labels within ``log N + 1`` and ``log N + 3`` nats."""
    state, labels = model.state, model.labels
    active = state.active_classes()
    n = len(active)
    rows = []
    for doc in docs:
        scores = np.sort(labels.joint_log_scores(state, model._prepare([doc]))[0][active])[::-1]
        log_z = scores[0] + math.log(np.exp(scores - scores[0]).sum())
        mass = np.cumsum(np.exp(scores - log_z))
        last = min(999, n - 1)
        rows.append([mass[0], mass[4], mass[last], scores[0] - scores[4], scores[0] - scores[last],
                     (scores >= scores[0] - math.log(n) - 1).sum(), (scores >= scores[0] - math.log(n) - 3).sum()])
    keys = ("mass_top1", "mass_top5", "mass_top1000", "gap_5th", "gap_1000th", "within_log_n_plus_1",
            "within_log_n_plus_3")
    return dict(zip(keys, np.mean(rows, axis=0).tolist()))


def dense_breakdown(model, docs, rounds: int) -> dict:
    state, labels = model.state, model.labels
    derived = labels.class_terms(state)
    batches = [model._prepare([doc]) for doc in docs]
    for batch in batches:
        labels.refresh(state, batch.terms)
    arena, weight = state.arena, labels.postings.weight
    active = state.active_classes()
    acc, out = np.zeros(state.classes.capacity), np.zeros(len(active))
    steps = {"postings (accumulate + reset)": lambda b: _postings(b.terms, b.weights, arena.start, arena.length,
                                                                  arena.cls, weight, acc),
             "per-label score": lambda b: _label_scores(active, derived.log_prior, derived.log_a, 1.0, 0.0, acc, out),
             "per-label exp": lambda b: _label_exps(out, 0.0)}
    result = {}
    for name, step in steps.items():
        step(batches[0])
        best = math.inf
        for _ in range(rounds):
            start = time.process_time()
            for batch in batches:
                step(batch)
            best = min(best, (time.process_time() - start) / len(batches))
        result[name] = best
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--spec", default="u_jm_tXiX", choices=sorted(SPECS))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", help="write all measurements to this file")
    args = parser.parse_args(argv)
    rows = []
    for n_labels in args.sizes:
        model, rng, topic_words, mid_p, vocab = build(n_labels, args.spec, args.seed)
        rare = queries("rare", args.queries, rng, topic_words, mid_p, vocab)  # drawn first, as bench.topk_pruning
        common = queries("common", args.queries, rng, topic_words, mid_p, vocab)
        row = {"labels": n_labels, "spec": args.spec}
        for kind, docs in (("rare", rare), ("common", common)):
            cpu_per_doc(model, docs, True)
            row[kind] = {"spread": spread(model, docs[:30]), "topk_only": topk_only(model, docs, args.rounds),
                         "block_max": block_max(model, docs[:30]),
                         "dense_breakdown_s": dense_breakdown(model, docs, args.rounds)}
            r = row[kind]
            print(f"{n_labels:>7} {kind:>6} posterior mass (first 30 documents): " + ", ".join(
                f"{key} {value:.3g}" for key, value in r["spread"].items()), flush=True)
            for budget, v in r["topk_only"].items():
                print(f"{n_labels:>7} {kind:>6} top-k labels only ({budget}): {v['pruned_s'] * 1e6:.0f} us vs "
                      f"dense {v['dense_s'] * 1e6:.0f} us = {v['speedup']:.2f}x; lists read whole "
                      f"{v['lists_read_per_doc']:.1f} of {v['lists_per_doc']:.1f}, scored exactly "
                      f"{v['exact_scores_per_doc']:.0f}, dense in kernel {100 * v['dense_fallback_share']:.0f}%",
                      flush=True)
            print(f"{n_labels:>7} {kind:>6} block-max, blocks / postings whose bound reaches the 5th best: "
                  + ", ".join(f"B={size}: {v['blocks_kept']:.3f} / {v['postings_kept']:.3f} (index "
                              f"{v['index_entries_per_posting']:.2f} entries per posting)"
                              for size, v in r["block_max"].items()))
            print(f"{n_labels:>7} {kind:>6} dense pass, us per document: " + ", ".join(
                f"{name} {seconds * 1e6:.0f}" for name, seconds in r["dense_breakdown_s"].items()), flush=True)
        rows.append(row)
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as handle:
            json.dump({"spec": args.spec, "rows": rows}, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
