"""Prequential streaming cost: learn and score interleaved, one document at a time, text in.

    python -m bench.prequential [--data spamassassin enron-spam] [--limit N] [--json OUT]

What a live stream costs the model: for every document of a real dataset, in
the prequential order docs/RESULTS.md uses (spamassassin by ``ts``, enron-spam
shuffled with seed 0), score it (``predict_proba_one`` on its text), then learn
it (``learn_one`` with its id and labels).

The configurations are read from docs/RESULTS.md (:func:`page_choices`): the
dataset's prequential section names ours, the candidate its dev rule chose (the
row marked ✓), and the page's ``sgm eval`` line for it gives the parameters at
full precision and the stream order. When the chosen candidate is a TDM, the
MNB candidate with the best dev score is measured too (the cheapest exact
alternative on the page). When the chosen candidate is a pool (``sgm ensemble``),
its configuration file is read from the results work folder the page was made
in (``--work``, as ``bench.results``'s; the page gives only its path), and the
single candidate with the best dev score is measured beside it (with the best
MNB if that is a TDM). Every configuration run is printed with its spec.

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
Accuracy of each system is printed as a sanity check.
"""
from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import re
import shlex
import sys
import time
import types
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from sgm.model import build_model
from sgm.model.text import Tokenizer
from sgm.stream.datasets import load_jsonl
from sgm.consumers.evaluation.harness import stream_order

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
RESULTS = REPO / "docs" / "RESULTS.md"
DATASETS = ("spamassassin", "enron-spam")


@dataclass(frozen=True)
class Choice:
    """One configuration of ours as docs/RESULTS.md states it."""

    role: str  # "chosen" (the page's dev choice), "best single" (beside a chosen pool), "best MNB" (beside a TDM)
    spec: str
    params: dict
    ngrams: int
    binary: bool
    shuffle: int | None  # the stream order: a seeded shuffle, or None for ts order
    #: a pool's whole configuration (``sgm ensemble --out``); None for a single model (spec and params)
    config: dict | None = None

    @property
    def label(self) -> str:
        if self.config is not None:
            return self.spec
        return self.spec + (" +bigrams" if self.ngrams == 2 else "") + (" +binary" if self.binary else "")

    def build(self):
        if self.config is not None:
            return build_model(self.config)
        tokenizer = {"ngrams": self.ngrams, **({"binary": True} if self.binary else {})}
        return build_model({"model": self.spec, "params": self.params, "tokenizer": tokenizer})


def pool_choice(name: str, section: str, label: str, work: Path) -> Choice:
    """The chosen pool: its ``sgm eval --config $WORK/...`` line names the file, read from ``work``."""
    for line in section.splitlines():
        if line.startswith("sgm eval ") and "--config" in line:
            args = shlex.split(line)
            path = work / args[args.index("--config") + 1].removeprefix("$WORK/")
            if not path.is_file():
                raise ValueError(f"{name}: the chosen pool's configuration {path} is missing: pass --work, the "
                                 "folder docs/RESULTS.md was generated in (python -m bench.results --work)")
            config = json.loads(path.read_text(encoding="utf-8"))
            ngrams = max(base.get("tokenizer", {}).get("ngrams", 1) for base in config["bases"])
            shuffle = int(args[args.index("--shuffle") + 1]) if "--shuffle" in args else None
            return Choice("chosen", label, {}, ngrams, False, shuffle, config)
    raise ValueError(f"docs/RESULTS.md: no sgm eval --config line for {name} {label}")


def page_choices(name: str, page: str | None = None, work: Path | None = None) -> list[Choice]:
    """The configurations of ours docs/RESULTS.md states for the prequential stream ``name``.

    The page's ``### name — prequential`` section lists our candidates as ``**sgm SPEC [+bigrams]
    [+binary]**`` rows (the dev choice marked ✓, the dev 1-ROCA% in the third column); its
    Reproduce block has one ``sgm eval`` line per candidate with the parameters at full
    precision. Returns the chosen one, and when it is a TDM also the MNB with the best dev score
    (tests/test_prequential_bench.py). A chosen pool (``sgm ensemble (N bases)``) is read from ``work``
    (:func:`pool_choice`), followed by the single candidate with the best dev score, and the best MNB
    when that one is a TDM.
    """
    page = RESULTS.read_text(encoding="utf-8") if page is None else page
    match = re.search(rf"^### {re.escape(name)} — prequential$(.*?)(?=^### |\Z)", page, re.M | re.S)
    if match is None:
        raise ValueError(f"docs/RESULTS.md has no prequential section for {name}")
    section = match.group(1)
    rows = []  # (label, chosen, dev)
    for line in section.splitlines():
        row = re.match(r"^\| \*\*sgm ([^*]+)\*\*( ✓)? \|[^|]*\| ([^|]+) \|", line)
        if row:
            rows.append((row.group(1).strip(), bool(row.group(2)), float(row.group(3))))
    chosen = [r for r in rows if r[1]]
    if len(chosen) != 1:
        raise ValueError(f"docs/RESULTS.md: expected one chosen (✓) candidate for {name}, found {len(chosen)}")
    out, single = [], chosen[0][0]
    if single.startswith("ensemble"):
        out.append(pool_choice(name, section, single, work or Path(os.environ.get("WORK", "/tmp/sgm-results"))))
        single = min((r for r in rows if not r[0].startswith("ensemble")), key=lambda r: r[2])[0]
    wanted = [("chosen" if not out else "best single", single)]
    if single.startswith("tdm_"):
        mnb = [r for r in rows if not r[0].startswith(("tdm_", "ensemble"))]
        if mnb:  # dev 1-ROCA%: lower is better
            wanted.append(("best MNB", min(mnb, key=lambda r: r[2])[0]))
    for role, label in wanted:
        spec, *flags = label.split()
        ngrams, binary = (2 if "+bigrams" in flags else 1), "+binary" in flags
        for line in section.splitlines():
            if not line.startswith("sgm eval "):
                continue
            args = shlex.split(line)
            if (args[args.index("--model") + 1] != spec or ("--ngrams" in args) != (ngrams == 2)
                    or ("--binary" in args) != binary):
                continue
            params = dict(a.split("=", 1) for i, a in enumerate(args) if i and args[i - 1] == "--param")
            shuffle = int(args[args.index("--shuffle") + 1]) if "--shuffle" in args else None
            out.append(Choice(role, spec, {k: float(v) for k, v in params.items()}, ngrams, binary, shuffle))
            break
        else:
            raise ValueError(f"docs/RESULTS.md: no sgm eval line for {name} {label}")
    return out


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


def run_ours(stream, choice: Choice) -> dict:
    model = choice.build()
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
    return {"spec": choice.label, "role": choice.role, "params": choice.params, "docs": n, "learn_s": learn,
            "score_s": score, "docs_per_s": n / (learn + score), "learn_per_s": n / learn,
            "score_per_s": n / max(score, 1e-12), "accuracy": correct / max(n - 1, 1),
            "entries": sum(base.state.n_entries for base in bases(model)),
            "terms": sum(len(base.state.terms) for base in bases(model))}


def bases(model) -> list:
    """The single models inside ``model`` (a pool's bases, or the model itself): their tables are counted."""
    return list(getattr(model, "bases", [model]))


def warm_up(stream, choice: Choice) -> None:
    """Load every compiled kernel the run uses (numba's cache: first-call cost is issue #18's cold start,
    measured apart), on a throwaway model over the stream's first documents, scored then learned."""
    model = choice.build()
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


def measure(name: str, limit: int | None, work: Path | None = None) -> dict:
    choices = page_choices(name, work=work)
    if len({c.shuffle for c in choices}) != 1:
        raise ValueError(f"{name}: the page's candidates differ in stream order")
    docs = [d for d in load_jsonl(DATA / f"{name}.jsonl.gz") if d.labels]
    stream = stream_order(docs, choices[0].shuffle)[:limit]
    ours = []
    for choice in choices:
        warm_up(stream[:300], choice)
        gc.collect()
        ours.append(run_ours(stream, choice))
    river = {}  # n-gram range -> (River with its BagOfWords, River on our tokenizer)
    for ngrams in sorted({c.ngrams for c in choices}):
        bag = river_bag_of_words()(ngram_range=(1, ngrams))
        gc.collect()
        river_own = run_river(stream, bag.transform_one)
        tokens = Tokenizer(ngrams=ngrams).tokens
        gc.collect()
        river_ours = run_river(stream, lambda text: dict(Counter(tokens(text))))
        river[ngrams] = {"ngrams": ngrams, "river_own_tokenizer": river_own, "river_our_tokenizer": river_ours}
    for o, choice in zip(ours, choices):
        peer = river[choice.ngrams]
        o["ratio_headline"] = o["docs_per_s"] / peer["river_own_tokenizer"]["docs_per_s"]
        o["ratio_our_tokenizer"] = o["docs_per_s"] / peer["river_our_tokenizer"]["docs_per_s"]
    words = sum(len(d.text.split()) for d in stream) / len(stream)
    return {"data": name, "docs": len(stream), "words_per_doc": words, "ours": ours, "river": list(river.values())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--limit", type=int, default=None, help="first N documents of each stream (default all)")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--work", default=os.environ.get("WORK", "/tmp/sgm-results"),
                        help="the results work folder docs/RESULTS.md was made in (a chosen pool's configuration)")
    args = parser.parse_args(argv)
    results = []
    for name in args.data:
        try:
            r = measure(name, args.limit, Path(args.work))
        except ValueError as error:
            print(f"bench.prequential: {error}", file=sys.stderr)
            return 2
        results.append(r)
        print(f"{name} ({r['docs']} docs, {r['words_per_doc']:.0f} words/doc)", flush=True)
        for peer in r["river"]:
            ro, rt = peer["river_own_tokenizer"], peer["river_our_tokenizer"]
            print(f"  River MultinomialNB, n-grams 1-{peer['ngrams']}: own BagOfWords {ro['docs_per_s']:,.0f} docs/s "
                  f"(accuracy {ro['accuracy']:.4f}), on our tokenizer {rt['docs_per_s']:,.0f} docs/s", flush=True)
        for o in r["ours"]:
            print(f"  ours {o['role']} {o['spec']}: {o['docs_per_s']:,.0f} docs/s (learn {o['learn_per_s']:,.0f}/s, "
                  f"score {o['score_per_s']:,.0f}/s, accuracy {o['accuracy']:.4f}) -> {o['ratio_headline']:.1f}x "
                  f"River BagOfWords, {o['ratio_our_tokenizer']:.1f}x River on our tokenizer (same n-grams)",
                  flush=True)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
