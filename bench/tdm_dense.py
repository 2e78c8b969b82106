"""TDM scoring per document against a dense vectorised reference (issue #18, must-show 4).

A benchmark, not a test. For each training-set size (real documents from ``shared/data`` where
there are enough of them, generated ones always), one run times per scored document, one
document per call as in a stream, on the same prepared documents:

* ``tdm``: :class:`sgm.model.TDM`'s scoring kernel (``_joint_log_scores``: the label level plus
  the compiled mixture loop with certified-negligible node pruning, the default; documents whose
  postings number at least ``TDM.node_pass_after`` times the nodes by its node pass);
* ``unpruned``: the same kernel with ``node_pruning=False`` (every group, posting and node summed);
* ``group path``: the default kernel with the node pass turned off (``TDM.node_pass_after = inf``): the
  closed form over groups plus the matched nodes for every document, the kernel before the node pass;
* ``dense``: the reference the issue names: every document node scored with numpy/scipy matrix
  products. Per query, the node-by-term matrix of log smoothed probabilities
  ``log p_li(n) = log((c_i(n) - K_i(n)) / (kmu + |c_i|_1) + a_i p_l(n))`` over the query's terms
  (the documents' own part a scipy.sparse row slice, the label part a gather), times the
  query's weight vector, plus ``log pi_i``, then a log-sum-exp per label (nodes sorted by label,
  ``reduceat``). Everything that does not depend on the query is built before timing;
* ``dense-sparse``: a smarter vectorised reference for comparison: the thesis's decomposition
  (label score + ``Q log a_i`` + the sparse corrections ``v_i(n)`` as a scipy CSR matrix times
  the weight vector) evaluated for every node, then the same per-label log-sum-exp. It is the
  index without pruning, in plain scipy.

All compute the same joint scores: the script reports the largest difference. Columns
``postings`` / ``read`` / ``lookups`` are per scored document: the document postings of its
terms, those the pruned loop read, and the binary searches that completed the nodes that still
mattered; ``groups`` / ``read`` the closed-form groups; ``met`` / ``kept`` the document nodes (with
the node pass, ``kept`` counts every node summed, met or not); ``node pass`` the share of documents
scored by it. Timing: ``--passes`` rounds (default 5); in each, every side scores its documents once,
in turn, and each side's best round counts, so a burst of load on the shared cores falls on all sides.

Run (one run per line of docs/PERFORMANCE.md, must-show 4)::

    .venv/bin/python -m bench.tdm_dense
    .venv/bin/python -m bench.tdm_dense --sizes 3000 --sources r8 --queries 50
"""
from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # both sides on one thread: the 2 cores are shared, and a
os.environ.setdefault("OMP_NUM_THREADS", "1")  # threaded BLAS made the dense reference slower here (4.7 vs 2.6 ms)

import numpy as np  # noqa: E402
from scipy import sparse  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.tdm_scaling import synthetic  # noqa: E402
from sgm.model import TDM  # noqa: E402
from sgm.model.loops.mixture import COUNTERS  # noqa: E402

DATA_DIRS = [Path(__file__).resolve().parents[1] / "shared" / "data", Path(__file__).resolve().parents[2] / "shared" / "data",
             Path("/work/shared/data")]
#: Real sets by size: the first with at least that many documents (train and queries) is used.
REAL_SETS = {3000: ["r8", "r52", "reuters21578"], 30000: ["enron-spam"], 100000: []}


def data_file(name: str) -> Path | None:
    for directory in DATA_DIRS:
        path = directory / f"{name}.jsonl.gz"
        if path.exists():
            return path
    return None


def real(name: str, size: int, n_queries: int):
    """``size`` training documents and ``n_queries`` later ones (the test split where there is one)."""
    path = data_file(name)
    if path is None:
        return None
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        docs = [json.loads(line) for line in handle]
    docs = [d for d in docs if d["labels"] and d["text"]]
    train = [d for d in docs if d.get("split") != "test"][:size]
    rest = [d for d in docs if d.get("split") == "test"] or docs[size:]
    if len(train) < size or len(rest) < n_queries:
        return None
    step = max(1, len(rest) // n_queries)
    return ([d["text"] for d in train], [d["labels"] for d in train], [d["text"] for d in rest[::step][:n_queries]])


# ------------------------------------------------------------------ the dense references
class DenseReference:
    """Every document node of ``model`` scored with matrix products (module docstring)."""

    def __init__(self, model: TDM) -> None:
        nodes, state, labels = model.nodes, model.state, model.labels
        nodes.sync(state)
        live = np.flatnonzero(nodes.node_alive[: nodes.n_nodes])
        order = live[np.argsort(nodes.node_class[live], kind="stable")]  # nodes sorted by label
        position = np.full(nodes.n_nodes, -1)
        position[order] = np.arange(len(order))
        self.node_class = nodes.node_class[order].astype(np.int64)
        self.classes, self.starts = np.unique(self.node_class, return_index=True)
        self.log_a = nodes.node_log_a[order]
        self.a = np.exp(self.log_a)
        factor = nodes.node_factor[order]
        totals = np.bincount(self.node_class, factor, minlength=int(self.node_class.max()) + 1)
        self.log_pi = np.log(factor) - np.log(totals[self.node_class])
        n_terms = len(nodes.post_fill)
        rows, cols, counts = [], [], []
        for term in np.flatnonzero(nodes.post_fill).tolist():
            ids, term_counts = nodes.term_postings(term)
            alive = nodes.node_alive[ids]
            rows.append(np.full(int(alive.sum()), term))
            cols.append(position[ids[alive]])
            counts.append(term_counts[alive])
        rows, cols, counts = np.concatenate(rows), np.concatenate(cols), np.concatenate(counts)
        kept = counts - nodes.smoothing.discount(counts, nodes.values)
        own = kept / (nodes.smoothing.mu + nodes.node_length[order][cols])  # (1 - a_i) pu_i(n)
        self.own = sparse.csr_matrix((own, (rows, cols)), shape=(n_terms, len(order)))
        # the sparse corrections v_i(n) for the dense-sparse variant: read from the model's weights
        model._build_document_weights(np.flatnonzero(nodes.post_fill))
        v_rows, v_cols, v_vals = [], [], []
        for term in np.flatnonzero(nodes.cache_len).tolist():
            term_nodes, term_weights = nodes.cached_postings(term)
            v_rows.append(np.full(len(term_nodes), term))
            v_cols.append(position[term_nodes])
            v_vals.append(term_weights)
        self.corrections = sparse.csr_matrix((np.concatenate(v_vals), (np.concatenate(v_rows), np.concatenate(v_cols))),
                                             shape=(n_terms, len(order)))
        # the label level: C(l, n) summed from the documents, p_l(n) = a_l (p_b(n) + (C - D) / (mu + D(l)))
        derived = labels.class_terms(state)
        scale = derived.scale
        length = nodes.node_length[order][cols]
        label_count = sparse.csr_matrix((factor[cols] * counts / length * scale, (rows, self.node_class[cols])),
                                        shape=(n_terms, len(derived.log_a)))
        label_count.sum_duplicates()
        label_count.data -= labels.smoothing.discount(label_count.data, derived.values)
        label_count = label_count.tocsc()
        label_count = label_count @ sparse.diags(1.0 / np.where(derived.denominator > 0, derived.denominator, 1.0))
        self.label_kept = label_count.tocsr()
        self.label_a = np.exp(derived.log_a)
        self.log_prior = derived.log_prior
        self.labels, self.state = labels, state
        self.n_classes = state.classes.capacity

    def _label_probability(self, terms: np.ndarray) -> np.ndarray:
        """``p_l(n)`` for the query's terms and every label: shape (terms, labels)."""
        background = self.labels.background(self.state, terms)
        return self.label_a[None, :] * (background[:, None] + self.label_kept[terms].toarray())

    def joint(self, terms: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """Log joint scores by the node-by-term matrix of log smoothed probabilities."""
        label_prob = self._label_probability(terms)
        probabilities = self.own[terms].toarray()  # (terms, nodes)
        probabilities += label_prob[:, self.node_class] * self.a[None, :]
        per_node = weights @ np.log(probabilities) + self.log_pi
        return self._per_label(per_node)

    def joint_sparse(self, terms: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """Log joint scores by the sparse decomposition, every node evaluated (no index, no pruning)."""
        label_prob = self._label_probability(terms)
        label_score = weights @ np.log(label_prob)  # sum_n w_n log p_l(n)
        matched = self.corrections[terms].T @ weights  # m_i
        per_node = self.log_pi + weights.sum() * self.log_a + matched + label_score[self.node_class]
        return self._per_label(per_node)

    def _per_label(self, per_node: np.ndarray) -> np.ndarray:
        peak = np.maximum.reduceat(per_node, self.starts)
        sizes = np.diff(np.append(self.starts, len(per_node)))
        total = np.add.reduceat(np.exp(per_node - np.repeat(peak, sizes)), self.starts)
        out = np.full(self.n_classes, -np.inf)
        out[self.classes] = self.log_prior[self.classes] + peak + np.log(total)
        return out


# ------------------------------------------------------------------ timing
def interleaved(sides: dict, passes: int) -> tuple[dict, dict]:
    """Best ms per item of each side over ``passes`` rounds, the sides taking turns within each round (so a
    burst of load on the shared cores hits all of them alike), and each side's results of the last round.
    ``sides``: name -> (function of one item, items, a set-up called before the side's timed pass, an
    observer called after it)."""
    best = {name: math.inf for name in sides}
    results: dict = {}
    for _ in range(passes):
        for name, (function, items, set_up, observe) in sides.items():
            set_up()
            began = time.perf_counter()
            results[name] = [function(item) for item in items]
            taken = time.perf_counter() - began
            observe()
            best[name] = min(best[name], taken / len(items))
    return {name: 1000 * value for name, value in best.items()}, results


def run(source: str, size: int, n_queries: int, n_dense: int, spec: str, seed: int, passes: int) -> dict | None:
    if source == "generated":
        train_docs, train_labels, queries, _, _ = synthetic(size, n_queries, seed)
    else:
        loaded = real(source, size, n_queries)
        if loaded is None:
            return None
        train_docs, train_labels, queries = loaded
    began = time.perf_counter()
    model = TDM(spec)
    for lo in range(0, size, 5000):
        model.learn_many(train_docs[lo : lo + 5000], train_labels[lo : lo + 5000],
                         ids=[f"d{i}" for i in range(lo, min(lo + 5000, size))])
    learn_s = time.perf_counter() - began
    prepared = [model._prepare([q]) for q in queries]
    [model._joint_log_scores(p) for p in prepared]  # posting weights built: both sides start warm
    reference = DenseReference(model)
    sample = np.linspace(0, len(prepared) - 1, min(n_dense, len(prepared))).astype(int).tolist()
    known = [(prepared[i].terms, prepared[i].weights) for i in sample]

    counters = model.nodes.counters
    counted = np.zeros_like(counters)  # the scoring counters of the tdm side alone
    before = counters.copy()

    def kernel(pruning: bool, node_pass_after: float, count: bool = False):
        def set_up():
            model.node_pruning, model.node_pass_after = pruning, node_pass_after
            before[:] = counters

        def observe():
            if count:
                counted[:] += counters - before
        return set_up, observe

    def nothing():
        return None

    def score(p):
        return model._joint_log_scores(p)[0]

    sides = {"tdm": (score, prepared, *kernel(True, TDM.node_pass_after, count=True)),
             "unpruned": (score, prepared, *kernel(False, TDM.node_pass_after)),
             "group_path": (score, prepared, *kernel(True, math.inf)),
             "dense": (lambda item: reference.joint(*item), known, nothing, nothing),
             "dense_sparse": (lambda item: reference.joint_sparse(*item), known, nothing, nothing)}
    best, results = interleaved(sides, passes)
    model.node_pruning = True
    del model.node_pass_after  # back to the class default
    per_doc = counted / (passes * len(prepared))
    tdm_ms, unpruned_ms, group_path_ms, dense_ms, dense_sparse_ms = (best[k] for k in sides)
    scores, exact_scores, group_scores, dense_scores, dense_sparse_scores = (results[k] for k in sides)

    def worst(a_list, b_list) -> float:  # log joint scores, every label
        return max(float(np.max(np.abs(np.where(np.isinf(b), 0.0, a - b)))) for a, b in zip(a_list, b_list))

    def worst_posterior(a_list, b_list) -> tuple[float, float]:
        """Largest posterior difference, and largest log joint difference of labels with posterior > 1e-6."""
        top, logs = 0.0, 0.0
        for a, b in zip(a_list, b_list):
            finite = np.isfinite(b)
            pa, pb = np.exp(a[finite] - np.logaddexp.reduce(a[finite])), np.exp(b[finite] - np.logaddexp.reduce(b[finite]))
            top = max(top, float(np.max(np.abs(pa - pb))))
            likely = pb > 1e-6
            logs = max(logs, float(np.max(np.abs(a[finite][likely] - b[finite][likely]))))
        return top, logs

    return {"source": source, "spec": spec, "docs": size, "labels": len(model.classes_), "nodes": model.nodes.live_nodes,
            "doc_postings": model.nodes.live_postings, "queries": len(prepared), "dense_queries": len(sample),
            "learn_s": learn_s, "tdm_ms": tdm_ms, "unpruned_ms": unpruned_ms, "group_path_ms": group_path_ms,
            "dense_ms": dense_ms,
            "dense_sparse_ms": dense_sparse_ms, **{f"per_doc_{k}": float(v) for k, v in zip(COUNTERS, per_doc)},
            "unpruned_vs_dense_log_joint": worst([exact_scores[i] for i in sample], dense_scores),
            "unpruned_vs_dense_sparse_log_joint": worst([exact_scores[i] for i in sample], dense_sparse_scores),
            "tdm_vs_dense_posterior": worst_posterior([scores[i] for i in sample], dense_scores)[0],
            "tdm_vs_dense_log_joint_likely": worst_posterior([scores[i] for i in sample], dense_scores)[1],
            "tdm_vs_unpruned_posterior": worst_posterior(scores, exact_scores)[0],
            "group_path_vs_unpruned_posterior": worst_posterior(group_scores, exact_scores)[0]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", type=int, default=[3000, 30000, 100000])
    parser.add_argument("--sources", nargs="+", default=["real", "generated"],
                        help="'real' (the first shared set with enough documents), 'generated', or set names")
    parser.add_argument("--queries", type=int, default=200, help="scored documents per run (tdm, unpruned)")
    parser.add_argument("--dense-queries", type=int, default=30, help="of which the dense references score this many")
    parser.add_argument("--passes", type=int, default=5,
                        help="rounds; in each every side scores its documents once, in turn; the best round counts")
    parser.add_argument("--spec", default="tdm_uc_jm_dp_kpd_kdp")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=Path("bench/out/tdm_dense.json"))
    args = parser.parse_args(argv)
    print(f"spec {args.spec}; one scored document per call; ms per document (best of {args.passes} rounds, the sides "
          "taking turns in each)\n")
    print("| data | training docs | labels | postings / read / lookups | groups / read | nodes met / kept | node pass | "
          "tdm | unpruned | group path | dense (queries) | dense / tdm | dense-sparse | dense-sparse / tdm | "
          "diff: log joint | posterior | vs unpruned |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    results = []
    for size in args.sizes:
        sources = []
        for source in args.sources:
            if source == "real":
                found = [name for name in REAL_SETS.get(size, []) if data_file(name) is not None]
                sources.extend(found[:1] or [("real", "no shared set has enough documents")])
            else:
                sources.append(source)
        for source in sources:
            if isinstance(source, tuple):
                print(f"| real | {size:,} | skipped: {source[1]} |||||||||||||||")
                continue
            r = run(source, size, args.queries, args.dense_queries, args.spec, args.seed, args.passes)
            if r is None:
                print(f"| {source} | {size:,} | skipped: data missing or too small |||||||||||||||")
                continue
            results.append(r)
            print(f"| {source} | {size:,} | {r['labels']:,} | {r['per_doc_postings']:,.0f} / {r['per_doc_postings_read']:,.0f}"
                  f" / {r['per_doc_lookups']:,.0f} | {r['per_doc_groups']:,.0f} / {r['per_doc_groups_read']:,.0f} | "
                  f"{r['per_doc_nodes_met']:,.0f} / {r['per_doc_nodes_kept']:,.0f} | {r['per_doc_node_passes']:.0%} | "
                  f"{r['tdm_ms']:.3f} | {r['unpruned_ms']:.3f} | {r['group_path_ms']:.3f} | "
                  f"{r['dense_ms']:.2f} ({r['dense_queries']}) | {r['dense_ms'] / r['tdm_ms']:.1f}x | "
                  f"{r['dense_sparse_ms']:.2f} | {r['dense_sparse_ms'] / r['tdm_ms']:.1f}x | "
                  f"{max(r['unpruned_vs_dense_log_joint'], r['unpruned_vs_dense_sparse_log_joint']):.1e} | "
                  f"{r['tdm_vs_dense_posterior']:.1e} | {r['tdm_vs_unpruned_posterior']:.1e} |", flush=True)
    print("\ndiff, log joint: largest difference of a log joint score (every label) between unpruned and the dense "
          "references;\nposterior: largest difference of a posterior between tdm (pruned) and the dense reference, "
          "vs unpruned: and the unpruned kernel (the group path's: in the --out file)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
