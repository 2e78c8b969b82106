"""Streaming update cost: learn one document, score one, alternating, as the model grows.

    python -m bench.update_cost [--sizes 10000 100000 1000000] [--pairs 200] [--interleave-sizes] [--json OUT]

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
With ``--interleave-sizes`` the sizes' rounds are interleaved too (every model
held at once), so that the largest-vs-smallest ratio is measured under the same
load.
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


class SizeRun:
    """The four specs' models grown to one size, the documents of their pairs, and the times of their rounds."""

    def __init__(self, entries: int, pairs: int, rounds: int, seed: int) -> None:
        self.entries, self.pairs = entries, pairs
        self.models = {spec: grown(spec, params, entries, seed)[0] for spec, params in SPECS.items()}
        fresh = Documents(seed + 1)
        self.learn_docs, self.learn_labels = fresh.take(pairs * rounds)
        self.score_docs, _ = fresh.take(pairs * rounds)
        for model in self.models.values():  # compiled code loaded, caches in their steady state
            for i in range(20):
                docs, labels = fresh.take(1)
                model.learn_one(docs[0], labels[0], id=f"warm{i}")
                model.predict_one(self.score_docs[i % len(self.score_docs)])
                model.forget(f"warm{i}")
        self.per_round: dict[str, list[float]] = {spec: [] for spec in SPECS}

    def round(self, r: int) -> None:
        """Round ``r``: each spec's ``pairs`` pairs in turn."""
        for spec, model in self.models.items():
            gc.collect()
            spent = 0.0
            for i in range(r * self.pairs, (r + 1) * self.pairs):
                start = clock()
                model.learn_one(self.learn_docs[i], self.learn_labels[i], id=f"t{i}")
                model.predict_one(self.score_docs[i % len(self.score_docs)])
                spent += clock() - start
                model.forget(f"t{i}")  # untimed: the next pair finds the model at the size measured
            self.per_round[spec].append(spent / self.pairs)

    def result(self) -> dict:
        ms = {spec: 1000 * statistics.median(times) for spec, times in self.per_round.items()}
        state = self.models["u_jm"].state  # the postings a scored document reads (and an update makes stale)
        touched = [sum(int(state.arena.length[state.terms.ids[t]]) for t in doc if t in state.terms.ids)
                   for doc in self.score_docs[:200]]
        return {"entries_target": self.entries, "entries": {s: m.state.n_entries for s, m in self.models.items()},
                "postings_per_scored_doc": statistics.mean(touched),
                "ms_per_pair": ms, "ratio_to_u_jm": {s: ms[s] / ms["u_jm"] for s in ms}}


def measure(entries: int, pairs: int, rounds: int, seed: int) -> dict:
    run = SizeRun(entries, pairs, rounds, seed)
    for r in range(rounds):
        run.round(r)
    return run.result()


def measure_interleaved(sizes: list[int], pairs: int, rounds: int, seed: int) -> list[dict]:
    """Every size's models held at once and their rounds interleaved (size after size, round after round), so
    that a change of load on the shared machine falls on every size alike, as it does on every spec."""
    runs = [SizeRun(entries, pairs, rounds, seed) for entries in sizes]
    for r in range(rounds):
        for run in runs if r % 2 == 0 else runs[::-1]:
            run.round(r)
    return [run.result() for run in runs]


def report(r: dict) -> None:
    cells = "  ".join(f"{s} {r['ms_per_pair'][s]:.3f} ms ({r['ratio_to_u_jm'][s]:.2f}x)" for s in SPECS)
    print(f"{r['entries_target']:>9,} entries (actual {min(r['entries'].values()):,}; {r['postings_per_scored_doc']:,.0f} "
          f"postings per scored document): {cells}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--pairs", type=int, default=200, help="learn + predict pairs per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--interleave-sizes", action="store_true",
                        help="hold every size's models at once and interleave their rounds (the 1M-vs-10k ratio "
                             "measured under the same load; more memory)")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    if args.interleave_sizes:
        results = measure_interleaved(args.sizes, args.pairs, args.rounds, args.seed)
        for r in results:
            report(r)
    else:
        results = []
        for entries in args.sizes:
            results.append(measure(entries, args.pairs, args.rounds, args.seed))
            report(results[-1])
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
