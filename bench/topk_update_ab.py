"""Does the pruned top-k change the streaming update cost? An A/B in one process.

    python -m bench.topk_update_ab [--pairs 100] [--rounds 4]

``bench.update_cost``'s pairs (learn_one of a new document + predict_one of another, 200 labels,
the learned one forgotten untimed) on ``u_jm`` and ``uc_pd_jm_dp`` grown to 10k and 1M entries, with
the dense path and the pruned path (:mod:`model.pruned_topk`) alternating round by round on the same
model; CPU ms per pair (median of the rounds) and each path's 1M-vs-10k ratio (issue #18, must-show 1).
"""
from __future__ import annotations

import argparse
import gc
import statistics
import sys

import sgm.model.mnb as mnb_module
from bench.update_cost import SPECS, Documents, clock, grown


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args(argv)
    pairs, rounds, threshold = args.pairs, args.rounds, mnb_module.PRUNED_TOPK_MIN_CLASSES
    out = {}
    try:
        for entries in (10_000, 1_000_000):
            for spec in ("u_jm", "uc_pd_jm_dp"):
                model = grown(spec, SPECS[spec], entries, 0)[0]
                fresh = Documents(1)
                learn_docs, learn_labels = fresh.take(pairs * rounds * 2)
                score_docs, _ = fresh.take(pairs * rounds * 2)
                for i in range(20):  # compiled code loaded, caches in their steady state
                    model.learn_one(learn_docs[i], learn_labels[i], id=f"w{i}")
                    model.predict_one(score_docs[i])
                    model.forget(f"w{i}")
                times: dict[str, list[float]] = {"dense": [], "pruned": []}
                j = 0
                for r in range(rounds):
                    for path in ("dense", "pruned") if r % 2 == 0 else ("pruned", "dense"):
                        mnb_module.PRUNED_TOPK_MIN_CLASSES = 10**9 if path == "dense" else 1
                        gc.collect()
                        spent = 0.0
                        for _ in range(pairs):
                            start = clock()
                            model.learn_one(learn_docs[j], learn_labels[j], id=f"t{j}")
                            model.predict_one(score_docs[j])
                            spent += clock() - start
                            model.forget(f"t{j}")
                            j += 1
                        times[path].append(1000 * spent / pairs)
                out[entries, spec] = {path: statistics.median(t) for path, t in times.items()}
                print(f"{entries:>9,} entries {spec:>12}: dense {out[entries, spec]['dense']:.3f} ms, "
                      f"pruned {out[entries, spec]['pruned']:.3f} ms per pair", flush=True)
    finally:
        mnb_module.PRUNED_TOPK_MIN_CLASSES = threshold
    for spec in ("u_jm", "uc_pd_jm_dp"):
        print(f"{spec}: 1M vs 10k " + ", ".join(
            f"{path} {out[1_000_000, spec][path] / out[10_000, spec][path]:.2f}x" for path in ("dense", "pruned")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
