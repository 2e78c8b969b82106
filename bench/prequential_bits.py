"""The bits of a prequential run: hashes of every posterior, to compare two versions of the code exactly.

    python -m bench.prequential_bits [--data spamassassin] [--limit N] [--work DIR] [--choice K]

The same stream, order, configurations and step as :mod:`bench.prequential` (score the text, then learn it,
text in), for its ``K``-th configuration (0: the page's choice, e.g. a pool; then the best single and the
best MNB). Prints one JSON line: a SHA-256 (first 16 hex digits) of every posterior's float bits in order,
and, for a pool, of each base's own log posteriors of the same texts (scored after the pool, so the pool's
step is the one hashed); for a TDM (alone or a pool's), one of its document postings too. Run it with two
checkouts' code (each from its own directory: ``cd CHECKOUT && python -m bench.prequential_bits ...``); a
change meant to leave the results exact must leave every hash as it was. Times are not measured here
(the bases' second scoring would inflate them): use :mod:`bench.prequential`.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

import numpy as np

from sgm.stream.datasets import load_jsonl
from sgm.consumers.evaluation.harness import stream_order

from bench.prequential import DATA, DATASETS, page_choices


def run_bits(stream, choice) -> dict:
    """Hashes of one prequential run of ``choice`` over ``stream`` (see the module docstring)."""
    model = choice.build()
    parts = list(getattr(model, "bases", []))
    pool, per_base = hashlib.sha256(), [hashlib.sha256() for _ in parts]
    scored = 0
    for doc in stream:
        if len(model):
            posterior = model.predict_proba_one(doc.text)
            pool.update(json.dumps(sorted((k, float(v).hex()) for k, v in posterior.items())).encode())
            scored += 1
            for digest, base in zip(per_base, parts):
                names, log_posteriors = base.predict_log_proba_many([doc.text])
                digest.update(json.dumps([str(n) for n in names]).encode())
                digest.update(np.ascontiguousarray(log_posteriors, dtype=np.float64).view(np.int64).tobytes())
        model.learn_one(doc.text, doc.labels, ts=doc.ts, id=doc.id)
    out = {"documents": len(stream), "scored": scored, "posteriors": pool.hexdigest()[:16],
           "bases": [d.hexdigest()[:16] for d in per_base]}
    tdm = next((m for m in [model, *parts] if hasattr(m, "nodes")), None)
    if tdm is not None:
        digest = hashlib.sha256()
        for term in range(len(tdm.nodes.post_fill)):
            nodes, counts = tdm.nodes.term_postings(term)
            digest.update(nodes.tobytes() + counts.tobytes())
        out["tdm_postings"] = digest.hexdigest()[:16]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="spamassassin", choices=list(DATASETS))
    parser.add_argument("--limit", type=int, default=3000, help="first N documents of the stream")
    parser.add_argument("--choice", type=int, default=0, help="which of bench.prequential's configurations")
    parser.add_argument("--work", default=os.environ.get("WORK", "/tmp/sgm-results"),
                        help="the results work folder docs/RESULTS.md was made in (a chosen pool's configuration)")
    args = parser.parse_args(argv)
    try:
        choices = page_choices(args.data, work=Path(args.work))
    except ValueError as error:
        print(f"bench.prequential_bits: {error}", file=sys.stderr)
        return 2
    choice = choices[args.choice]
    docs = [d for d in load_jsonl(DATA / f"{args.data}.jsonl.gz") if d.labels]
    stream = stream_order(docs, choices[0].shuffle)[: args.limit]
    print(json.dumps({"data": args.data, "configuration": f"{choice.role} {choice.label}", **run_bits(stream, choice)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
