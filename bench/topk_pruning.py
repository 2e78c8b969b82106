"""Pruned top-k against the dense pass, many labels (issue #18 must-show 2), in one run.

    python -m bench.topk_pruning [--sizes 1000 10000 100000] [--queries 200] [--spec u_jm_tXiX]
                                 [--tolerances 1e-9 1e-6] [--json OUT]

At each label count (Zipf-sized labels: label ``r`` has about ``30 / r**0.8 + 1`` training documents,
each of 6 of its 12 own words, ~16 of 20 stop words and 2 shared mid-frequency words), top-5 with
posteriors (``predict_topk_many([doc], 5)``, one document per call, as the service's scoring path
ranks) by the pruned path (:mod:`model.pruned_topk`) and by the dense pass (every class scored,
``top_k_indices``), on two kinds of documents:

* rare-word: 6 words of one label and one word of another (each word in a few labels' lists);
* common-word: 24 shared mid-frequency words (the most frequent ones in hundreds to thousands of
  labels' lists) and 2 words of one label.

The default spec is the thesis's scalability configuration ``u_jm_tXiX`` with Croft-Harper IDF (stop
words weigh 0); ``--spec uc_pd_jm_dp`` measures a spec whose ``a_l`` differs per class. Both paths run
on the same documents, alternated in rounds, CPU time per document; the pruned answers are checked
against the dense ones (same labels, posteriors within the documented bound plus rounding).
Columns: postings touched by a document (its lists' total length), lists per document, lists read
whole, classes scored exactly, the share of documents the kernel gave to the dense pass (too many
labels met), the times, the worst relative posterior difference, and "in margin": labels per document
(first 20) whose dense score is within the certified margin (log N + 40 nats) of the best, which
certified-negligible pruning must score.

Beside the exact path, in the same rounds, the pruned path with each stated posterior tolerance ``tau``
(``predict_topk_many(..., tolerance=tau)``, the service's ``posterior_tolerance``; margin
``log N + log(1 + 1/tau)``): its time, the same label check, the worst ``p'/p - 1`` (checked
``<= tau`` up to rounding), the labels within its margin, and "oracle": the share of labels that any
method could leave out at that tolerance (the smallest exact posteriors whose sum stays within
``tau / (1 + tau)``), an upper bound on what a tolerance can skip, whatever the bounds.
"""
from __future__ import annotations

import argparse
import gc
import json
import math
import os
import sys
import time

import numpy as np

import sgm.model.mnb as mnb_module
from sgm.model import MNB
from sgm.model.pruned_topk import margin, relative_bound

SPECS = {"u_jm_tXiX": {"beta": 0.5, "phi": 0.0, "ups_idf": -1.0},
         "uc_pd_jm_dp": {"beta": 0.3, "mu": 50.0, "delta": 0.5, "ups": 0.2}}


def build(n_labels: int, spec: str, seed: int):
    rng = np.random.default_rng(seed)
    sizes = np.maximum(1, (30.0 / np.arange(1, n_labels + 1) ** 0.8)).astype(int) + 1
    vocab = 50 * n_labels
    topic_words = rng.integers(0, vocab, size=(n_labels, 12))
    mid_ranks = np.arange(1, 2001)
    mid_p = 1.0 / mid_ranks / (1.0 / mid_ranks).sum()
    docs, labels = [], []
    for label, size in enumerate(sizes.tolist()):
        for _ in range(size):
            doc = {f"t{w}": 1.0 for w in topic_words[label, rng.choice(12, size=6, replace=False)].tolist()}
            for i in np.flatnonzero(rng.random(20) < 0.8).tolist():
                doc[f"s{i}"] = 1.0
            for w in rng.choice(2000, size=2, p=mid_p).tolist():
                doc[f"m{w}"] = doc.get(f"m{w}", 0.0) + 1.0
            docs.append(doc)
            labels.append(f"l{label}")
    model = MNB(spec, **SPECS[spec])
    for i in range(0, len(docs), 20_000):
        model.learn_many(docs[i : i + 20_000], labels[i : i + 20_000])
    return model, rng, topic_words, mid_p, vocab


def queries(kind: str, n: int, rng, topic_words, mid_p, vocab) -> list[dict]:
    out = []
    for _ in range(n):
        label = int(rng.integers(0, len(topic_words)))
        if kind == "rare":
            doc = {f"t{w}": 1.0 for w in topic_words[label, rng.choice(12, size=6, replace=False)].tolist()}
            doc[f"t{int(rng.integers(0, vocab))}"] = 1.0
        else:
            doc = {f"m{w}": 1.0 for w in rng.choice(60, size=24, replace=False, p=mid_p[:60] / mid_p[:60].sum()).tolist()}
            doc.update({f"t{w}": 1.0 for w in topic_words[label, :2].tolist()})
        out.append(doc)
    return out


def cpu_per_doc(model, docs, pruned: bool, tolerance: float | None = None) -> tuple[float, list]:
    mnb_module.PRUNED_TOPK_MIN_CLASSES = 1 if pruned else 10**12
    assert model.uses_pruned_topk(5) == pruned
    gc.collect()
    answers = []
    start = time.process_time()
    for doc in docs:
        answers.append(model.predict_topk_many([doc], 5, tolerance)[0])
    return (time.process_time() - start) / len(docs), answers


def tolerance_name(tolerance: float | None) -> str:
    return "exact" if tolerance is None else f"{tolerance:.0e}"


def measure(n_labels: int, spec: str, n_queries: int, rounds: int, seed: int,
            tolerances: tuple[float, ...] = ()) -> dict:
    start = time.process_time()
    model, rng, topic_words, mid_p, vocab = build(n_labels, spec, seed)
    build_s = time.process_time() - start
    threshold = mnb_module.PRUNED_TOPK_MIN_CLASSES
    row = {"labels": n_labels, "spec": spec, "train_docs": len(model), "postings": model.state.n_entries,
           "build_s": build_s}
    try:
        for kind in ("rare", "common"):
            docs = queries(kind, n_queries, rng, topic_words, mid_p, vocab)
            prepared = [model._prepare([d]) for d in docs]
            touched = float(np.mean([model.state.arena.length[p.terms].sum() for p in prepared]))
            variants = (None, *tolerances)
            for tolerance in variants:  # the lazy steps (postings, term maxima, class terms) once, untimed
                cpu_per_doc(model, docs, True, tolerance)
            cpu_per_doc(model, docs, False)
            runs: dict = {tolerance: [] for tolerance in variants}
            answers: dict = {}
            counts: dict = {tolerance: dict.fromkeys(model._pruner.counts, 0) for tolerance in variants}
            dense_t = []
            for _ in range(rounds):  # every variant and the dense pass in each round, alternated
                for tolerance in variants:
                    before = dict(model._pruner.counts)
                    t, answers[tolerance] = cpu_per_doc(model, docs, True, tolerance)
                    runs[tolerance].append(t)
                    for key in before:
                        counts[tolerance][key] += (model._pruner.counts[key] - before[key]) / (rounds * n_queries)
                t, dense_answers = cpu_per_doc(model, docs, False)
                dense_t.append(t)
            worst = dict.fromkeys(variants, 0.0)
            for tolerance in variants:
                for got, want in zip(answers[tolerance], dense_answers):
                    assert [name for name, _ in got] == [name for name, _ in want], (tolerance, got, want)
                    worst[tolerance] = max(worst[tolerance], max(p / q - 1 for (_, p), (_, q) in zip(got, want)),
                                           max(q / p - 1 for (_, p), (_, q) in zip(got, want)))
                assert worst[tolerance] <= relative_bound(tolerance) + 1e-9, (tolerance, worst[tolerance])
            dense_s = min(dense_t)
            # why pruning can or cannot pay: the labels whose score lies within the margin of the best (they
            # must be scored for the normalizer), the mass of all the others, and the share of labels an
            # oracle (knowing every exact posterior) could leave out within the tolerance
            n_active = len(model.classes_)
            within: dict = {tolerance: [] for tolerance in variants}
            oracle: dict = {tolerance: [] for tolerance in variants}
            outside = []
            for doc in docs[:20]:
                active = model.state.active_classes()
                scores = model.labels.joint_log_scores(model.state, model._prepare([doc]))[0][active]
                best = scores.max()
                log_z = best + math.log(np.exp(scores - best).sum())
                smallest_first = np.cumsum(np.sort(np.exp(scores - log_z)))
                for tolerance in variants:
                    near = scores >= best - margin(n_active, tolerance)
                    within[tolerance].append(int(near.sum()))
                    tau = relative_bound(tolerance)
                    oracle[tolerance].append(np.searchsorted(smallest_first, tau / (1 + tau), side="right") / n_active)
                    if tolerance is None:
                        far = scores[~near]
                        outside.append(float(np.exp(far - log_z).sum()) if len(far) else 0.0)
            pruned_s = min(runs[None])
            row[kind] = {"postings_touched_per_doc": touched, "pruned_s": pruned_s, "dense_s": dense_s,
                         "pruned_runs_s": runs[None], "dense_runs_s": dense_t, "speedup": dense_s / pruned_s,
                         "lists_per_doc": counts[None]["lists"], "lists_read_per_doc": counts[None]["lists_read"],
                         "exact_scores_per_doc": counts[None]["candidates"],
                         "dense_fallback_share": counts[None]["dense"],
                         "worst_relative_posterior_difference": worst[None],
                         "labels_within_margin_per_doc": float(np.mean(within[None])),
                         "mass_outside_margin_max": max(outside),
                         "oracle_skippable_share": float(np.mean(oracle[None])),
                         "tolerances": {tolerance_name(tolerance): {
                             "tolerance": tolerance, "margin_nats_beyond_log_n": margin(1, tolerance),
                             "pruned_s": min(runs[tolerance]), "pruned_runs_s": runs[tolerance],
                             "speedup": dense_s / min(runs[tolerance]),
                             "lists_read_per_doc": counts[tolerance]["lists_read"],
                             "exact_scores_per_doc": counts[tolerance]["candidates"],
                             "dense_fallback_share": counts[tolerance]["dense"],
                             "worst_relative_posterior_difference": worst[tolerance],
                             "labels_within_margin_per_doc": float(np.mean(within[tolerance])),
                             "oracle_skippable_share": float(np.mean(oracle[tolerance]))}
                             for tolerance in tolerances}}
    finally:
        mnb_module.PRUNED_TOPK_MIN_CLASSES = threshold
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--spec", default="u_jm_tXiX", choices=sorted(SPECS))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--tolerances", type=float, nargs="*", default=[1e-9, 1e-6],
                        help="stated posterior tolerances measured beside the exact path (none: exact only)")
    parser.add_argument("--json", help="write all measurements to this file")
    args = parser.parse_args(argv)
    print(f"top-5 with posteriors, {args.spec}, CPU us per document (best of {args.rounds} alternated rounds); "
          f"tolerance 'exact' is the default (e^-40)")
    print(f"{'labels':>7} {'kind':>6} {'tolerance':>9} | {'touched':>8} {'lists':>5} {'read':>5} {'exact':>6} "
          f"{'dense%':>6} | {'pruned':>8} {'dense':>8} {'speedup':>8} | {'max |p/p_dense - 1|':>19} | "
          f"{'in margin':>9} {'oracle':>7}")
    rows = []
    for n_labels in args.sizes:
        row = measure(n_labels, args.spec, args.queries, args.rounds, args.seed, tuple(args.tolerances))
        rows.append(row)
        for kind in ("rare", "common"):
            r = row[kind]
            for name, v in [("exact", r)] + list(r["tolerances"].items()):
                print(f"{n_labels:>7} {kind:>6} {name:>9} | {r['postings_touched_per_doc']:>8.0f} "
                      f"{r['lists_per_doc']:>5.1f} {v['lists_read_per_doc']:>5.1f} {v['exact_scores_per_doc']:>6.0f} "
                      f"{100 * v['dense_fallback_share']:>5.0f}% | {v['pruned_s'] * 1e6:>6.0f}us "
                      f"{r['dense_s'] * 1e6:>6.0f}us {v['speedup']:>7.1f}x | "
                      f"{v['worst_relative_posterior_difference']:>19.1e} | "
                      f"{v['labels_within_margin_per_doc']:>9.0f} {100 * v['oracle_skippable_share']:>6.1f}%",
                      flush=True)
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as handle:
            json.dump({"spec": args.spec, "rows": rows, "margin_nats": "log N + 40",
                       "relative_bound": math.exp(-40), "tolerances": args.tolerances}, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
