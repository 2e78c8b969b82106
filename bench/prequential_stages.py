"""Where a prequential step's time goes: per stage, for the configurations bench.prequential measures.

    python -m bench.prequential_stages [--data spamassassin enron-spam] [--limit N] [--rounds R] [--work DIR]

The same stream, order and configurations as :mod:`bench.prequential` (docs/RESULTS.md's choices; a pool's
configuration from ``--work``), the same step (score the text, then learn it), timed by stage in process
CPU time, without a profiler (which would inflate the Python parts):

* per single model (and per base of a pool): scoring and learning, and inside them the compiled token pass
  (:class:`sgm.model.lexicon.TermLexicon`: tokenizer, n-grams, vocabulary look-ups; scoring keeps it for
  the learn that follows, so learning shows 0 there when it reuses it);
* for a pool: its own work beside its bases' (length meta-feature, meta-features, the pool, the posterior
  dict), i.e. the pool's scoring time less its bases'.

Timers wrap the methods for the run (a few hundred ns per call), so the stage sums are a little above an
untimed run; the ratios against River are bench.prequential's. Issue #18, must-show 0: the floor.
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

from sgm.model.lexicon import TermLexicon
from sgm.stream.datasets import load_jsonl
from sgm.consumers.evaluation.harness import stream_order

from bench.prequential import DATA, DATASETS, bases, page_choices, warm_up

TOKEN_PASS = "token pass (compiled tokenizer + look-ups)"


def timed_run(stream, choice) -> tuple[dict[str, float], float]:
    """``(seconds per stage, seconds in all)`` of one prequential run of ``choice`` over ``stream``."""
    model = choice.build()
    parts = bases(model)
    pooled = len(parts) > 1 or parts[0] is not model
    stages: dict[str, float] = defaultdict(float)
    clock = time.process_time
    where = ["-"]
    compiled = TermLexicon.__dict__["_compiled"]

    def token_pass(self, *args, **kwargs):
        start = clock()
        try:
            return compiled(self, *args, **kwargs)
        finally:
            stages[f"{where[0]}: {TOKEN_PASS}"] += clock() - start

    def wrap(base, j, method):
        inner = getattr(base, method)
        label = f"base {j} {choice_name(base)} {'score' if method.startswith('predict') else 'learn'}" if pooled \
            else method.split("_")[0].replace("predict", "score")

        def timed(*args, **kwargs):
            where[0] = label
            start = clock()
            try:
                return inner(*args, **kwargs)
            finally:
                stages[label] += clock() - start
        setattr(base, method, timed)

    for j, base in enumerate(parts):
        wrap(base, j, "predict_log_proba_many")
        wrap(base, j, "learn_one")
    TermLexicon._compiled = token_pass
    gc.collect()
    try:
        total = 0.0
        for doc in stream:
            start = clock()
            if len(model):
                model.predict_proba_one(doc.text)
            middle = clock()
            model.learn_one(doc.text, doc.labels, ts=doc.ts, id=doc.id)
            end = clock()
            total += end - start
            if pooled:
                stages["pool: score"] += middle - start
                stages["pool: learn"] += end - middle
    finally:
        TermLexicon._compiled = compiled
    if pooled:  # the pool's own work: its time less its bases'
        for kind in ("score", "learn"):
            inner = sum(v for k, v in stages.items() if k.startswith("base ") and k.endswith(f" {kind}"))
            stages[f"pool's own {kind} work (lengths, meta-features, pool, dict)" if kind == "score"
                   else "pool's own learn work"] = stages.pop(f"pool: {kind}") - inner
    return dict(stages), total


def choice_name(base) -> str:
    return base.spec.name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--limit", type=int, default=3000, help="first N documents of each stream")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each configuration (fresh model each)")
    parser.add_argument("--work", default=os.environ.get("WORK", "/tmp/sgm-results"),
                        help="the results work folder docs/RESULTS.md was made in (a chosen pool's configuration)")
    args = parser.parse_args(argv)
    for name in args.data:
        try:
            choices = page_choices(name, work=Path(args.work))
        except ValueError as error:
            print(f"bench.prequential_stages: {error}", file=sys.stderr)
            return 2
        docs = [d for d in load_jsonl(DATA / f"{name}.jsonl.gz") if d.labels]
        stream = stream_order(docs, choices[0].shuffle)[: args.limit]
        for choice in choices:
            warm_up(stream[:300], choice)
            for r in range(args.rounds):
                stages, total = timed_run(stream, choice)
                n = len(stream)
                print(f"{name} {choice.role} {choice.label} (round {r + 1}): {total / n * 1e6:,.0f} us per message, "
                      f"{n / total:,.0f} docs/s", flush=True)
                for stage in sorted(stages):
                    print(f"    {stage:70s} {stages[stage] / n * 1e6:7.0f} us", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
