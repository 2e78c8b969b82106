"""TDM scoring: the inverted index against a per-document dense loop, as the training set grows.

A benchmark, not a test. For 1k, 10k and 100k synthetic training documents
(Zipf word frequencies, a vocabulary growing with the collection, many labels,
each label with its own topic words), one run times per scored document:

* ``index``: :class:`model.TDM`'s kernel (MNB's label scores + the document
  postings of the scored terms + the closed form for documents without a match);
* ``dense``: the thesis's "hash table" baseline: for each label, for each of
  its training documents, for each scored term, a lookup in the document's
  hash table, then the same log-sum-exp. Written with Python dicts for the
  lookups and numpy for the arithmetic; its tables (document hash tables,
  smoothing weights, label counts) are built before timing, as the index's
  posting weights are (``index cold`` shows the first pass, which builds them).

Both compute the same numbers: the script checks they agree. Documents are
scored one at a time (a stream). At the largest size the dense loop is timed
on a sample of the queries (``--dense-queries``).

Run::

    .venv/bin/python bench/tdm_scaling.py
    .venv/bin/python bench/tdm_scaling.py --sizes 1000 10000 --queries 100
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sgm.model import TDM  # noqa: E402


# ------------------------------------------------------------------ synthetic data
def synthetic(n_docs: int, n_queries: int, seed: int):
    """Labelled documents over a Zipf vocabulary: half of each document's words from the
    collection-wide Zipf law, half from its label's own Zipf-ranked topic words."""
    rng = np.random.default_rng(seed)
    vocabulary = int(20 * n_docs**0.7)  # Heaps-like growth: 2.5k, 12.6k, 63k words
    n_labels = max(10, n_docs // 50)  # 20, 200, 2000 labels
    topic_size = min(vocabulary, 400)
    ranks = np.arange(1, vocabulary + 1)
    global_p = ranks**-1.1
    global_p /= global_p.sum()
    topic_p = np.arange(1, topic_size + 1) ** -1.0
    topic_p /= topic_p.sum()
    topics = [rng.choice(vocabulary, topic_size, replace=False) for _ in range(n_labels)]
    label_p = np.arange(1, n_labels + 1) ** -0.8  # skewed label frequencies
    label_p /= label_p.sum()

    def draw(count: int):
        labels = rng.choice(n_labels, count, p=label_p)
        lengths = rng.poisson(60, count) + 5
        docs = []
        for label, length in zip(labels.tolist(), lengths.tolist()):
            own = int(rng.binomial(length, 0.5))
            words = np.concatenate([rng.choice(vocabulary, length - own, p=global_p),
                                    topics[label][rng.choice(topic_size, own, p=topic_p)]])
            ids, counts = np.unique(words, return_counts=True)
            docs.append({f"w{i}": float(c) for i, c in zip(ids.tolist(), counts.tolist())})
        return docs, [f"L{label}" for label in labels.tolist()]

    train_docs, train_labels = draw(n_docs)
    query_docs, _ = draw(n_queries)
    return train_docs, train_labels, query_docs, vocabulary, n_labels


# ------------------------------------------------------------------ the dense "hash table" baseline
class DenseTDM:
    """Per-document hash tables and a loop over every training document of every label."""

    def __init__(self, model: TDM) -> None:
        spec = model.spec
        if spec.discount is not None or spec.dp or spec.weighting or not spec.jm:
            raise ValueError("the dense baseline implements label-level Jelinek-Mercer (u/c/uc) kernels only")
        state = model.state
        self.model = model
        self.term_names = state.terms.names
        scale = state.clock.scale()
        self.beta = model.params["beta"]
        self.theta = model.params.get("theta", 1.0)
        kernel, kernel_values = model.nodes.smoothing, model.nodes.values  # K_i(n) and kmu of the spec's k-affixes
        kmu = kernel.mu
        self.labels: dict[int, list] = {}
        label_counts: dict[int, dict[str, float]] = {}
        collection: dict[str, float] = {}
        for doc_id, record in state.docs.items():
            length = model.nodes.doc_nodes[doc_id][2]
            names = [self.term_names[t] for t in record.terms.tolist()]
            counts = record.weights * length  # the document's own counts c_i(n)
            kept = counts - kernel.discount(counts, kernel_values)
            a = (kmu + (counts - kept).sum()) / (kmu + length) if kmu + length > 0 else 1.0
            own = {n: k / (kmu + length) for n, k in zip(names, kept.tolist()) if k > 0}  # (1 - a_i) p^u_i(n)
            for class_id in record.classes:
                self.labels.setdefault(class_id, []).append((own, a, record.factor))
                row = label_counts.setdefault(class_id, {})
                for n, u in zip(names, record.weights.tolist()):  # length-normalized label counts
                    row[n] = row.get(n, 0.0) + u * record.factor * scale
                    collection[n] = collection.get(n, 0.0) + u * record.factor * scale
        self.label_counts = label_counts
        self.label_mass = {c: sum(row.values()) for c, row in label_counts.items()}
        self.collection = collection
        self.collection_mass = sum(collection.values())
        self.vocabulary = len(collection)
        total_docs = sum(sum(f for _, _, f in docs) for docs in self.labels.values())
        self.log_prior = {c: self.theta * math.log(sum(f for _, _, f in docs) / total_docs) for c, docs in self.labels.items()}
        self.ups = model.params.get("ups", 0.0)
        self.background = spec.background

    def p_b(self, n: str) -> float:
        if self.background == "u":
            return 1.0 / self.vocabulary
        collection = self.collection[n] / self.collection_mass
        return collection if self.background == "c" else (1 - self.ups) * collection + self.ups / self.vocabulary

    def joint(self, terms: list[str], weights: np.ndarray, n_classes: int) -> np.ndarray:
        out = np.full(n_classes, -np.inf)
        background = np.array([self.p_b(n) for n in terms])
        for class_id, docs in self.labels.items():
            counts = self.label_counts[class_id]
            mass = self.label_mass[class_id]
            label_prob = (1 - self.beta) * np.array([counts.get(n, 0.0) for n in terms]) / mass + self.beta * background
            own = np.array([[d.get(n, 0.0) for n in terms] for d, _, _ in docs])  # the hash-table lookups
            a = np.array([a for _, a, _ in docs])
            factor = np.array([f for _, _, f in docs])
            per_doc = np.log(own + a[:, None] * label_prob[None, :]) @ weights + np.log(factor / factor.sum())
            peak = per_doc.max()
            out[class_id] = self.log_prior[class_id] + peak + math.log(np.exp(per_doc - peak).sum())
        return out


# ------------------------------------------------------------------ timing
def run(size: int, n_queries: int, n_dense: int, spec: str, seed: int, kernel_sum: str = "exact",
        bin_width: float = 0.05) -> dict:
    started = time.perf_counter()
    train_docs, train_labels, queries, vocabulary, n_labels = synthetic(size, n_queries, seed)
    model = TDM(spec, kernel_sum=kernel_sum, kernel_bin_width=bin_width)
    for lo in range(0, size, 5000):
        model.learn_many(train_docs[lo : lo + 5000], train_labels[lo : lo + 5000],
                         ids=[f"d{i}" for i in range(lo, min(lo + 5000, size))])
    learn_s = time.perf_counter() - started
    prepared = [model._prepare([q]) for q in queries]
    n_classes = model.state.classes.capacity

    cold = time.perf_counter()
    sparse_scores = [model._joint_log_scores(p)[0] for p in prepared]
    cold_ms = 1000 * (time.perf_counter() - cold) / n_queries
    warm = time.perf_counter()
    sparse_scores = [model._joint_log_scores(p)[0] for p in prepared]
    index_ms = 1000 * (time.perf_counter() - warm) / n_queries

    dense = DenseTDM(model)
    names = model.state.terms.names
    sample = np.linspace(0, n_queries - 1, min(n_dense, n_queries)).astype(int).tolist()
    began = time.perf_counter()
    dense_scores = [dense.joint([names[t] for t in prepared[i].terms.tolist()], prepared[i].weights, n_classes)
                    for i in sample]
    dense_ms = 1000 * (time.perf_counter() - began) / len(sample)
    worst = max(float(np.max(np.abs(np.where(np.isinf(d), 0, d - sparse_scores[i]))))
                for i, d in zip(sample, dense_scores))
    stats = model.stats()
    return {"docs": size, "labels": n_labels, "vocabulary": vocabulary, "postings": stats["document_postings"],
            "touched": float(np.mean([model.nodes.post_fill[p.terms].sum() for p in prepared])),
            "learn_s": learn_s, "cold_ms": cold_ms, "index_ms": index_ms, "dense_ms": dense_ms,
            "dense_queries": len(sample), "max_diff": worst}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", type=int, default=[1000, 10000, 100000])
    parser.add_argument("--queries", type=int, default=200, help="scored documents per size (index)")
    parser.add_argument("--dense-queries", type=int, default=20, help="of which the dense loop scores at most this many")
    parser.add_argument("--spec", default="tdm_u_jm_kjm")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--kernel-sum", choices=["exact", "binned"], default="exact")
    parser.add_argument("--bin-width", type=float, default=0.05)
    args = parser.parse_args(argv)
    print(f"spec {args.spec}, kernel_sum={args.kernel_sum}"
          + (f" (bin width {args.bin_width})" if args.kernel_sum == "binned" else "")
          + "; one scored document per call; ms per document\n")
    print("| training docs | labels | vocabulary | doc postings | postings read/query | index cold | index | dense "
          "(queries) | dense / index | max |diff| |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for size in args.sizes:
        r = run(size, args.queries, args.dense_queries, args.spec, args.seed, args.kernel_sum, args.bin_width)
        print(f"| {r['docs']:,} | {r['labels']:,} | {r['vocabulary']:,} | {r['postings']:,} | {r['touched']:,.0f} | "
              f"{r['cold_ms']:.2f} | {r['index_ms']:.2f} | {r['dense_ms']:.1f} ({r['dense_queries']}) | "
              f"{r['dense_ms'] / r['index_ms']:.1f}x | {r['max_diff']:.1e} |", flush=True)
    print("\nmax |diff|: largest difference of a log joint score between the two (binned: the approximation error)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
