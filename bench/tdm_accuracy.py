"""TDM beside MNB on the shared single-label sets (r8, r52, webkb): test accuracy (= Micro-F1).

Protocol (thesis chapter 6, scaled down): the standard train/test split; the
numbers of each configuration are tuned by a Gaussian random search on a
seeded 80/20 split of the training set (start at the defaults, draw
``--points`` Gaussian steps around the best point with a standard deviation of
half the tuning range shrinking by 0.9 per iteration, ``--iterations`` times),
then the best point is trained on the whole training set and scored on the
test set. Without weighting, learning does not depend on the numbers, so one
learned state serves every point of a search.

Run::

    .venv/bin/python bench/tdm_accuracy.py                     # all three sets, 6x8 search
    .venv/bin/python bench/tdm_accuracy.py --datasets r8 --iterations 2 --points 4
"""
from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sgm.model import build_model  # noqa: E402
from sgm.model.spec import PARAMS, parse_spec  # noqa: E402
from sgm.stream.datasets import find_dataset, load_jsonl, split  # noqa: E402

#: (name, affix string, fixed numbers or None to tune every free number)
CONFIGS = [
    ("mnb_u_jm beta=0.5", "mnb_u_jm", {"beta": 0.5}),
    ("mnb_uc_pd_dp", "mnb_uc_pd_dp", None),
    ("mnb_uc_pd_jm_dp", "mnb_uc_pd_jm_dp", None),
    ("mnb_uc_pd_dp_tXiX_ps", "mnb_uc_pd_dp_tXiX_ps", None),
    ("tdm_u_jm_kjm defaults", "tdm_u_jm_kjm", {}),
    ("tdm_uc_jm_dp_kpd_kdp defaults", "tdm_uc_jm_dp_kpd_kdp", {}),
    ("tdm_u_jm_kjm", "tdm_u_jm_kjm", None),
    ("tdm_uc_jm_dp_kpd_kdp", "tdm_uc_jm_dp_kpd_kdp", None),
]


def learned(spec: str, params: dict, train, base=None):
    """A model of ``spec`` with ``params`` holding ``train``; reuses ``base``'s state when learning allows."""
    model = build_model({"model": spec, "params": params})
    if base is not None:
        model.state = base.state  # the counts do not depend on the numbers: only the caches do
        model.rebuild_caches()
        return model
    model.learn_many([d.text for d in train], [d.labels[0] for d in train], ids=[d.id for d in train])
    return model


def accuracy(model, docs) -> float:
    predicted = []
    for lo in range(0, len(docs), 512):
        predicted.extend(model.predict_many([d.text for d in docs[lo : lo + 512]]))
    return float(np.mean([p == d.labels[0] for p, d in zip(predicted, docs)]))


def random_search(spec: str, train, dev, iterations: int, points: int, seed: int) -> tuple[dict, float, int]:
    """Gaussian random search of the spec's free numbers on the development split."""
    rng = random.Random(seed)
    names = sorted(parse_spec(spec).free_params)
    reuse = parse_spec(spec).weighting is None  # learning depends on the numbers only through TF-IDF

    def to_unit(name: str, value: float) -> float:
        info = PARAMS[name]
        if info.log_scale:
            return (math.log(value) - math.log(info.tune_low)) / (math.log(info.tune_high) - math.log(info.tune_low))
        return (value - info.tune_low) / (info.tune_high - info.tune_low)

    def from_unit(name: str, unit: float) -> float:
        info = PARAMS[name]
        unit = min(max(unit, 0.0), 1.0)
        if info.log_scale:
            return math.exp(math.log(info.tune_low) + unit * (math.log(info.tune_high) - math.log(info.tune_low)))
        value = info.tune_low + unit * (info.tune_high - info.tune_low)
        return max(value, info.low + 1e-6) if info.low_open else value

    base = learned(spec, {}, train) if reuse else None
    best = {n: min(max(to_unit(n, PARAMS[n].default), 0.0), 1.0) for n in names}
    best_score = accuracy(learned(spec, {n: from_unit(n, u) for n, u in best.items()}, train, base), dev)
    evaluated = 1
    std = 0.5
    for _ in range(iterations):
        candidates = []
        for _ in range(points):
            point = {n: min(max(best[n] + rng.gauss(0.0, std), 0.0), 1.0) for n in names}
            score = accuracy(learned(spec, {n: from_unit(n, u) for n, u in point.items()}, train, base), dev)
            evaluated += 1
            candidates.append((score, rng.random(), point))
        score, _, point = max(candidates, key=lambda c: (c[0], c[1]))
        if score >= best_score:
            best_score, best = score, point
        std *= 0.9
    return {n: round(from_unit(n, u), 6) for n, u in best.items()}, best_score, evaluated


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["r8", "r52", "webkb"])
    parser.add_argument("--iterations", type=int, default=6)
    parser.add_argument("--points", type=int, default=8)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--configs", nargs="+", default=None, help="names from CONFIGS to run (default: all)")
    args = parser.parse_args(argv)
    configs = [c for c in CONFIGS if args.configs is None or c[0] in args.configs]
    table: dict[str, dict[str, float]] = {}
    for dataset in args.datasets:
        path = find_dataset(dataset)
        if path is None:
            print(f"{dataset}: not found (set SGM_DATA_DIR)", file=sys.stderr)
            continue
        train, test, _ = split(load_jsonl(path))
        shuffled = list(train)
        random.Random(args.seed).shuffle(shuffled)
        cut = int(0.8 * len(shuffled))
        fit, dev = shuffled[:cut], shuffled[cut:]
        print(f"\n{dataset}: {len(train)} train ({len(fit)} fit / {len(dev)} dev), {len(test)} test", flush=True)
        for name, spec, fixed in configs:
            started = time.perf_counter()
            if fixed is None:
                params, dev_score, evaluated = random_search(spec, fit, dev, args.iterations, args.points, args.seed)
            else:
                params, dev_score, evaluated = dict(fixed), float("nan"), 0
            model = learned(spec, params, train)
            scoring = time.perf_counter()
            score = accuracy(model, test)
            per_doc_ms = 1000 * (time.perf_counter() - scoring) / len(test)
            table.setdefault(name, {})[dataset] = score
            print(f"  {name:32s} test {score:.4f}  dev {dev_score:.4f}  ({evaluated} points, "
                  f"{time.perf_counter() - started:.0f}s, scoring {per_doc_ms:.2f} ms/doc)  {params}", flush=True)
    if table:
        datasets = [d for d in args.datasets if any(d in row for row in table.values())]
        print("\n| configuration | " + " | ".join(datasets) + " | mean |")
        print("|---|" + "---|" * (len(datasets) + 1))
        for name, row in table.items():
            values = [row.get(d, float("nan")) for d in datasets]
            print(f"| {name} | " + " | ".join(f"{v:.4f}" for v in values) + f" | {np.mean(values):.4f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
