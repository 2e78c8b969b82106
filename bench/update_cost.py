"""Streaming update cost: learn one document, score one, alternating, as the model grows.

    python -m bench.update_cost [--sizes 10000 100000 1000000] [--pairs 400] [--json OUT]

Issue #18, must-show 1. At 200 labels, for models of about 10k, 100k and 1M
(label, term) entries, the CPU time of one ``learn_one`` (a new document) plus
one ``predict_one`` (another new document), alternating, for:

* ``u_jm`` (Jelinek-Mercer: no per-label discount totals; the reference),
* ``uc_pd_jm_dp`` (the default spec: power-law discounting inside a chain),
* ``u_ad`` (absolute discounting),
* ``u_pd`` with ``delta="kn"`` (the Kneser-Ney estimate, which moves with the
  counts of counts after every update).

The ``pd``/``ad`` discounts need per-label totals over every entry of the
label; before issue #18 every update made the next read recompute them from
all entries, so the cost grew with the model. The targets: every spec within
1.5x of ``u_jm`` at the same size, and every spec's 1M cost within 1.5x of its
10k cost. The postings a scored document reads are printed per size: every
update makes them stale (each weight depends on the label's and the whole
model's totals), so a learn + score pair recomputes that many weights.

Documents are generated (Zipf words over a 300k vocabulary, a label-specific
slice per label, about 75 distinct terms each) and given as term -> count
mappings, so the time is the model's (tokenizing is the prequential bench's
business). Models are grown with ``learn_many`` until they hold the entry
count, then timed with documents they have not seen: each pair learns one
and scores another, and the learned one is forgotten again untimed, so that
every pair finds the model at the size measured. The specs run
interleaved in rounds (A/B/C/D, repeated) so that load on the shared machine
falls on all of them alike; the reported figure is each spec's median round.
Times are process CPU times.
"""
from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections import Counter

import numpy as np

from sgm.model import MNB

N_LABELS = 200
VOCAB = 300_000
SPECS = {
    "u_jm": {"beta": 0.3},
    "uc_pd_jm_dp": {"beta": 0.3, "mu": 50.0, "delta": 0.5},
    "u_ad": {"delta": 0.5},
    "u_pd kn": {"delta": "kn"},
}


class Documents:
    """Labelled term-count documents: each label prefers its own slice of a Zipf vocabulary."""

    def __init__(self, seed: int, length: int = 100) -> None:
        self.rng = np.random.default_rng(seed)
        zipf = 1.0 / np.arange(1, VOCAB + 1) ** 1.05
        self.p = zipf / zipf.sum()
        self.words = np.array([f"w{i}" for i in range(VOCAB)])
        self.shift = (np.arange(N_LABELS) * 7919) % VOCAB
        self.length = length

    def take(self, n: int) -> tuple[list[dict], list[str]]:
        labels = self.rng.integers(0, N_LABELS, size=n)
        half = self.length // 2
        common = self.rng.choice(VOCAB, size=(n, half), p=self.p)
        topical = (self.rng.choice(VOCAB, size=(n, self.length - half), p=self.p) + self.shift[labels, None]) % VOCAB
        rows = self.words[np.concatenate([common, topical], axis=1)].tolist()
        return [dict(Counter(row)) for row in rows], [f"l{x}" for x in labels.tolist()]


def clock() -> float:
    return time.process_time()


def grown(spec: str, params: dict, entries: int, seed: int) -> tuple[MNB, int]:
    """A model of ``spec`` holding at least ``entries`` entries (the same documents for every spec)."""
    docs = Documents(seed)
    model = MNB(spec.split()[0], **params)
    learned = 0
    while model.state.n_entries < entries:
        step = max(5, min(5000, (entries - model.state.n_entries) // 100))
        batch, labels = docs.take(step)
        model.learn_many(batch, labels, ids=[f"g{learned + i}" for i in range(step)])
        learned += step
    return model, learned


def measure(entries: int, pairs: int, rounds: int, seed: int) -> dict:
    models = {spec: grown(spec, params, entries, seed)[0] for spec, params in SPECS.items()}
    fresh = Documents(seed + 1)
    learn_docs, learn_labels = fresh.take(pairs * rounds)
    score_docs, _ = fresh.take(pairs * rounds)
    for model in models.values():  # compiled code loaded, caches in their steady state
        for i in range(20):
            docs, labels = fresh.take(1)
            model.learn_one(docs[0], labels[0], id=f"warm{i}")
            model.predict_one(score_docs[i])
            model.forget(f"warm{i}")
    per_round: dict[str, list[float]] = {spec: [] for spec in SPECS}
    for r in range(rounds):
        for spec, model in models.items():
            gc.collect()
            spent = 0.0
            for i in range(r * pairs, (r + 1) * pairs):
                start = clock()
                model.learn_one(learn_docs[i], learn_labels[i], id=f"t{i}")
                model.predict_one(score_docs[i])
                spent += clock() - start
                model.forget(f"t{i}")  # untimed: the next pair finds the model at the size measured
            per_round[spec].append(spent / pairs)
    ms = {spec: 1000 * statistics.median(times) for spec, times in per_round.items()}
    state = models["u_jm"].state  # the postings a scored document reads (and an update makes stale)
    touched = [sum(int(state.arena.length[state.terms.ids[t]]) for t in doc if t in state.terms.ids)
               for doc in score_docs[:200]]
    return {"entries_target": entries, "entries": {s: m.state.n_entries for s, m in models.items()},
            "postings_per_scored_doc": statistics.mean(touched),
            "ms_per_pair": ms, "ratio_to_u_jm": {s: ms[s] / ms["u_jm"] for s in ms}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--pairs", type=int, default=200, help="learn + predict pairs per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    results = []
    for entries in args.sizes:
        r = measure(entries, args.pairs, args.rounds, args.seed)
        results.append(r)
        cells = "  ".join(f"{s} {r['ms_per_pair'][s]:.3f} ms ({r['ratio_to_u_jm'][s]:.2f}x)" for s in SPECS)
        print(f"{entries:>9,} entries (actual {min(r['entries'].values()):,}; {r['postings_per_scored_doc']:,.0f} postings "
              f"per scored document): {cells}", flush=True)
    if len(results) > 1:
        first, last = results[0], results[-1]
        growth = {s: last["ms_per_pair"][s] / first["ms_per_pair"][s] for s in SPECS}
        print("largest / smallest size: " + "  ".join(f"{s} {g:.2f}x" for s, g in growth.items()))
        results.append({"growth_largest_over_smallest": growth})
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
