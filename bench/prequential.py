"""Prequential streaming cost: learn and score interleaved, one document at a time, text in.

    python -m bench.prequential [--data spamassassin enron-spam] [--limit N] [--json OUT]

What a live stream costs the model: for every document of a real dataset, in
the prequential order docs/RESULTS.md uses (spamassassin by ``ts``, enron-spam
shuffled with seed 0), score it (``predict_proba_one`` on its text), then learn
it (``learn_one`` with its id and labels). The configurations are the ones
docs/RESULTS.md chose for these streams:

* spamassassin: ``uc_jm_dp_ps`` with word bigrams, beta=0.651882 mu=128.702
  theta=0.494594 ups=0;
* enron-spam: ``uc_pd_jm_dp_ps`` (words), beta=0.01 delta=0.389302 mu=0.1
  theta=1.81429 ups=0.

In the same run, River 0.26's ``naive_bayes.MultinomialNB`` (alpha=0.1, as in
bench/peers.py) does the same ``predict_proba_one`` + ``learn_one``:

* **headline**: River with its own ``feature_extraction.BagOfWords`` (same
  n-gram range), text in, as a River user would write it. River 0.26's
  ``river.feature_extraction`` package does not import on Python 3.11 (its
  ``river.stream`` subclasses ``csv.DictReader[...]``, subscriptable only from
  3.12), so the benchmark loads River's own ``vectorize.py`` module file
  directly: the same code, no package import;
* River fed our tokenizer's counts (``Counter(Tokenizer.tokens(text))``): the
  same features as ours, tokenizing included in its time.

Times are process CPU times (other work on this shared machine does not
inflate them); documents/s = documents / (CPU seconds of learn + score).
Accuracy of each system is printed as a sanity check (ours must match
docs/RESULTS.md's prequential accuracy on the full stream).
"""
from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import sys
import time
import types
from collections import Counter
from pathlib import Path

from sgm.model import MNB
from sgm.model.text import Tokenizer
from sgm.stream.datasets import load_jsonl
from sgm.consumers.evaluation.harness import stream_order

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

#: dataset -> (spec, params, ngrams, shuffle seed): docs/RESULTS.md's choices for these streams.
CONFIGS = {
    "spamassassin": ("uc_jm_dp_ps", {"beta": 0.651882, "mu": 128.702, "theta": 0.494594, "ups": 0.0}, 2, None),
    "enron-spam": ("uc_pd_jm_dp_ps", {"beta": 0.01, "delta": 0.389302, "mu": 0.1, "theta": 1.81429, "ups": 0.0}, 1, 0),
}


def river_bag_of_words():
    """River's own ``BagOfWords`` class, loaded from its module file (see the module docstring)."""
    import river.base

    if "river.feature_extraction" not in sys.modules:
        stub = types.ModuleType("river.feature_extraction")
        stub.__path__ = []  # a namespace for the one submodule below; the package __init__ is not run
        sys.modules["river.feature_extraction"] = stub
    path = Path(river.base.__file__).parents[1] / "feature_extraction" / "vectorize.py"
    spec = importlib.util.spec_from_file_location("river.feature_extraction.vectorize", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.BagOfWords


def run_ours(stream, spec: str, params: dict, ngrams: int) -> dict:
    model = MNB(spec, tokenizer=Tokenizer(ngrams=ngrams), **params)
    learn = score = 0.0
    correct = 0
    clock = time.process_time
    for doc in stream:
        if len(model):
            t = clock()
            posterior = model.predict_proba_one(doc.text)
            score += clock() - t
            correct += max(posterior, key=posterior.get) == doc.labels[0]
        t = clock()
        model.learn_one(doc.text, doc.labels, ts=doc.ts, id=doc.id)
        learn += clock() - t
    n = len(stream)
    return {"docs": n, "learn_s": learn, "score_s": score, "docs_per_s": n / (learn + score),
            "learn_per_s": n / learn, "score_per_s": n / max(score, 1e-12), "accuracy": correct / max(n - 1, 1),
            "entries": model.state.n_entries, "terms": len(model.state.terms)}


def warm_up(stream, spec: str, params: dict, ngrams: int) -> None:
    """Load every compiled kernel the run uses (numba's cache: first-call cost is issue #18's cold start,
    measured apart), on a throwaway model over the stream's first documents, scored then learned."""
    model = MNB(spec, tokenizer=Tokenizer(ngrams=ngrams), **params)
    for doc in stream:
        if len(model):
            model.predict_proba_one(doc.text)
        model.learn_one(doc.text, doc.labels, ts=doc.ts, id=doc.id)


def run_river(stream, featurize) -> dict:
    from river.naive_bayes import MultinomialNB

    model = MultinomialNB(alpha=0.1)
    learn = score = 0.0
    correct = 0
    clock = time.process_time
    first = True
    for doc in stream:
        t = clock()
        x = featurize(doc.text)
        if not first:
            posterior = model.predict_proba_one(x)
            correct += max(posterior, key=posterior.get) == doc.labels[0]
        score += clock() - t  # featurizing is charged to scoring (learning reuses its x, as a River pipeline would)
        t = clock()
        model.learn_one(x, doc.labels[0])
        learn += clock() - t
        first = False
    n = len(stream)
    return {"docs": n, "learn_s": learn, "score_s": score, "docs_per_s": n / (learn + score),
            "accuracy": correct / max(n - 1, 1)}


def measure(name: str, limit: int | None) -> dict:
    spec, params, ngrams, seed = CONFIGS[name]
    docs = [d for d in load_jsonl(DATA / f"{name}.jsonl.gz") if d.labels]
    stream = stream_order(docs, seed)[:limit]
    warm_up(stream[:300], spec, params, ngrams)
    gc.collect()
    ours = run_ours(stream, spec, params, ngrams)
    bag = river_bag_of_words()(ngram_range=(1, ngrams))
    gc.collect()
    river_own = run_river(stream, bag.transform_one)
    tokens = Tokenizer(ngrams=ngrams).tokens
    gc.collect()
    river_ours = run_river(stream, lambda text: dict(Counter(tokens(text))))
    words = sum(len(d.text.split()) for d in stream) / len(stream)
    return {"data": name, "spec": spec, "params": params, "ngrams": ngrams, "words_per_doc": words, "ours": ours,
            "river_own_tokenizer": river_own, "river_our_tokenizer": river_ours,
            "ratio_headline": ours["docs_per_s"] / river_own["docs_per_s"],
            "ratio_our_tokenizer": ours["docs_per_s"] / river_ours["docs_per_s"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--limit", type=int, default=None, help="first N documents of each stream (default all)")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    results = []
    for name in args.data:
        r = measure(name, args.limit)
        results.append(r)
        o, ro, rt = r["ours"], r["river_own_tokenizer"], r["river_our_tokenizer"]
        print(f"{name} ({r['docs'] if 'docs' in r else o['docs']} docs, {r['words_per_doc']:.0f} words/doc, {r['spec']}"
              f"{' + bigrams' if r['ngrams'] == 2 else ''}): ours {o['docs_per_s']:,.0f} docs/s (learn "
              f"{o['learn_per_s']:,.0f}/s, score {o['score_per_s']:,.0f}/s, accuracy {o['accuracy']:.4f}) | River "
              f"BagOfWords {ro['docs_per_s']:,.0f} docs/s (accuracy {ro['accuracy']:.4f}) -> {r['ratio_headline']:.1f}x "
              f"| River on our tokenizer {rt['docs_per_s']:,.0f} docs/s -> {r['ratio_our_tokenizer']:.1f}x", flush=True)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
