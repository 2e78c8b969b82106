"""Model benchmark: sgm-stream MNB against River and scikit-learn naive Bayes, in one run.

    python -m bench.model_bench [--quick] [--json OUT]

Part 1, at 2, 20, 200 and 2,000 labels on the same generated documents (Zipf
words, about 75 distinct terms per document, given to every library as the
same term -> count dicts):

* learning: ours one document per call (``learn_one``) and batched
  (``learn_many``); River ``learn_one``; scikit-learn ``partial_fit`` one
  document per call (DictVectorizer included) and ``fit`` on the whole set;
  and from text (the same documents written out): ours ``learn_many`` on the
  texts, River ``learn_one`` on our tokenizer's counts of each;
* one-document prediction of the full posterior: ours ``predict_proba_one``;
  River ``predict_proba_one``; scikit-learn ``predict_proba`` on one document per
  call (DictVectorizer included) and batched.

Part 2: bytes per stored posting (tracemalloc around learning).

Part 3: many labels (1k, 10k, 100k labels with Zipf-distributed sizes): top-k
cost per document against the postings it touches, with the pruned top-k path
(the thesis's scalability configuration ``u_jm_tXiX`` with Croft-Harper IDF,
which gives terms found in more than half the documents zero weight), beside
the dense per-class pass at the same label counts.

Times are process CPU times (other work on the machine does not inflate them).
"""
from __future__ import annotations

import argparse
import gc
import json
import sys
import time
import tracemalloc
from collections import Counter

import numpy as np

import sgm.model.mnb as mnb_module
from sgm.model import MNB

SPEC = "uc_pd_jm_dp"
PARAMS = {"beta": 0.3, "mu": 50.0, "delta": 0.5, "ups": 0.2}


def clock() -> float:
    return time.process_time()


# ------------------------------------------------------------------ data
def make_documents(n_docs: int, n_labels: int, seed: int, vocab: int = 20_000, length: int = 100):
    """Labelled documents: each label prefers its own slice of a Zipf vocabulary."""
    rng = np.random.default_rng(seed)
    ranks = np.arange(1, vocab + 1)
    zipf = 1.0 / ranks**1.05
    zipf /= zipf.sum()
    words = np.array([f"w{i}" for i in range(vocab)])
    labels = rng.integers(0, n_labels, size=n_docs)
    shift = (np.arange(n_labels) * 7919) % vocab  # a label-specific rotation of the vocabulary
    docs = []
    for label in labels.tolist():
        common = rng.choice(vocab, size=length // 2, p=zipf)
        topical = (rng.choice(vocab, size=length - length // 2, p=zipf) + shift[label]) % vocab
        docs.append(dict(Counter(words[np.concatenate([common, topical])].tolist())))
    return docs, [f"l{x}" for x in labels.tolist()]


def timed(function, items) -> float:
    """CPU seconds per item of ``function`` over ``items``."""
    gc.collect()
    start = clock()
    for item in items:
        function(item)
    return (clock() - start) / max(len(items), 1)


# ------------------------------------------------------------------ part 1
def throughput(n_labels: int, n_train: int, n_test: int, seed: int) -> dict:
    from river.naive_bayes import MultinomialNB as RiverNB
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.naive_bayes import MultinomialNB as SkNB

    docs, labels = make_documents(n_train + n_test, n_labels, seed)
    train, test = list(zip(docs[:n_train], labels[:n_train])), docs[n_train:]
    out: dict = {"labels": n_labels, "train_docs": n_train, "test_docs": n_test,
                 "distinct_terms_per_doc": float(np.mean([len(d) for d in docs]))}

    ours = MNB(SPEC, **PARAMS)  # documents carry ids, as in the service (learning is idempotent per id)
    train_ids = [f"d{i}" for i in range(n_train)]
    out["ours_learn_one_s"] = timed(lambda item: ours.learn_one(item[0][0], item[0][1], id=item[1]),
                                    list(zip(train, train_ids)))
    batch_model = MNB(SPEC, **PARAMS)
    start = clock()
    batch_model.learn_many([d for d, _ in train], [l for _, l in train], ids=train_ids)
    out["ours_learn_many_s"] = (clock() - start) / n_train
    river = RiverNB(alpha=1.0)
    out["river_learn_one_s"] = timed(lambda item: river.learn_one(item[0], item[1]), train)
    # the same documents as text (each word repeated by its count): ours tokenizes in compiled code,
    # River gets our tokenizer's counts (its own BagOfWords does not import on Python 3.11 in 0.26)
    texts = [(" ".join(w for w, c in d.items() for _ in range(c)), label) for d, label in train]
    MNB(SPEC, **PARAMS).learn_many(["warm up"], ["x"], ids=["x"])  # compiled kernels loaded outside the timing
    text_model = MNB(SPEC, **PARAMS)
    start = clock()
    text_model.learn_many([t for t, _ in texts], [l for _, l in texts], ids=train_ids)
    out["ours_learn_many_text_s"] = (clock() - start) / n_train
    tokenizer, river_text = text_model.tokenizer, RiverNB(alpha=1.0)
    out["river_learn_one_text_s"] = timed(
        lambda item: river_text.learn_one(dict(Counter(tokenizer.tokens(item[0]))), item[1]), texts)
    vectorizer = DictVectorizer().fit(docs)
    classes = sorted(set(labels))
    sk_online = SkNB(alpha=0.1)
    sk_sample = train[: max(50, min(len(train), 200_000 // n_labels))]  # partial_fit costs O(labels x vocabulary) per call
    out["sklearn_partial_fit_one_s"] = timed(
        lambda item: sk_online.partial_fit(vectorizer.transform([item[0]]), [item[1]], classes=classes), sk_sample)
    start = clock()
    sk = SkNB(alpha=0.1).fit(vectorizer.transform([d for d, _ in train]), [l for _, l in train])
    out["sklearn_fit_batch_s"] = (clock() - start) / n_train

    ours.predict_proba_many(test)  # build the posting lists once (the lazy precomputation), then time steady state
    out["ours_predict_one_s"] = timed(ours.predict_proba_one, test)
    start = clock()
    ours.predict_proba_many(test)
    out["ours_predict_batch_s"] = (clock() - start) / n_test
    river_sample = test[: max(20, min(n_test, int(400 * 200 / max(n_labels, 1))))]
    out["river_predict_one_s"] = timed(river.predict_proba_one, river_sample)
    sk_sample = test[: max(20, min(n_test, 300))]
    out["sklearn_predict_one_s"] = timed(lambda d: sk.predict_proba(vectorizer.transform([d])), sk_sample)
    start = clock()
    sk.predict_proba(vectorizer.transform(test))
    out["sklearn_predict_batch_s"] = (clock() - start) / n_test
    # agreement check: our arg-max is a sensible classifier on this data
    truth = labels[n_train:]
    out["ours_accuracy"] = float(np.mean([p == t for p, t in zip(ours.predict_many(test), truth)]))
    out["sklearn_accuracy"] = float(np.mean(sk.predict(vectorizer.transform(test)) == np.array(truth)))
    return out


# ------------------------------------------------------------------ part 2
def bytes_per_posting(n_docs: int, n_labels: int, seed: int) -> dict:
    docs, labels = make_documents(n_docs, n_labels, seed)
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    model = MNB(SPEC, **PARAMS)
    model.learn_many(docs, labels, ids=[f"d{i}" for i in range(n_docs)])
    model.predict_proba_many(docs[:50])  # posting weights allocated too
    gc.collect()
    total = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    state = model.state
    postings = state.n_entries
    doc_bytes = sum(r.terms.nbytes + r.weights.nbytes + r.raw.nbytes for r in state.docs.values())
    return {"docs": n_docs, "labels": n_labels, "postings": postings, "model_bytes": total,
            "bytes_per_posting": total / postings, "document_record_bytes": doc_bytes,
            "bytes_per_posting_without_documents": (total - doc_bytes - 250 * n_docs) / postings}


# ------------------------------------------------------------------ part 3
def many_labels(n_labels: int, seed: int, n_queries: int = 300) -> dict:
    rng = np.random.default_rng(seed)
    sizes = np.maximum(1, (30.0 / np.arange(1, n_labels + 1) ** 0.8)).astype(int) + 1  # Zipf-like label sizes
    vocab = 50 * n_labels
    topic_words = rng.integers(0, vocab, size=(n_labels, 12))  # each label's own words
    stop_words = [f"s{i}" for i in range(20)]  # in most documents: Croft-Harper IDF weighs them 0
    mid_ranks = np.arange(1, 2001)
    mid_p = 1.0 / mid_ranks / (1.0 / mid_ranks).sum()  # mid-frequency words, Zipf: shared across labels
    docs, labels = [], []
    for label, size in enumerate(sizes.tolist()):
        for _ in range(size):
            chosen = rng.choice(12, size=6, replace=False)
            doc = {f"t{w}": 1.0 for w in topic_words[label, chosen].tolist()}
            for w, present in zip(stop_words, (rng.random(20) < 0.8).tolist()):
                if present:
                    doc[w] = 1.0
            for w in rng.choice(2000, size=2, p=mid_p).tolist():
                doc[f"m{w}"] = doc.get(f"m{w}", 0.0) + 1.0
            docs.append(doc)
            labels.append(f"l{label}")
    model = MNB("u_jm_tXiX", beta=0.5, phi=0.0, ups_idf=-1.0)  # Croft-Harper IDF: common words weigh 0
    start = clock()
    for i in range(0, len(docs), 20_000):
        model.learn_many(docs[i : i + 20_000], labels[i : i + 20_000])
    learn_s = (clock() - start) / len(docs)
    picks = rng.integers(0, len(docs), size=n_queries)
    queries = [dict(docs[i]) for i in picks.tolist()]
    for q in queries:  # perturb: drop a topical word, add another label's
        q[f"t{int(rng.integers(0, vocab))}"] = 1.0
    threshold = mnb_module.PRUNED_TOPK_MIN_CLASSES
    mnb_module.PRUNED_TOPK_MIN_CLASSES = 1  # the pruned path at every size (by default it starts at 512 classes)
    assert model.uses_pruned_topk(5)
    model.predict_topk_many(queries, 5)  # build the posting lists once (the lazy step), then time steady state
    prepared = [model._prepare([q]) for q in queries]
    touched = [int(model.state.arena.length[p.terms].sum()) for p in prepared]
    sparse_s = timed(lambda q: model.predict_topk_many([q], 5), queries)
    dense_queries = queries[: max(10, n_queries // 10)]
    mnb_module.PRUNED_TOPK_MIN_CLASSES = 10**12
    try:
        dense_s = timed(lambda q: model.predict_topk_many([q], 5), dense_queries)
    finally:
        mnb_module.PRUNED_TOPK_MIN_CLASSES = threshold
    return {"labels": n_labels, "train_docs": len(docs), "learn_s_per_doc": learn_s,
            "postings": model.state.n_entries, "postings_touched_per_doc": float(np.mean(touched)),
            "sparse_topk_s": sparse_s, "dense_topk_s": dense_s,
            "sparse_us_per_1k_postings_touched": sparse_s * 1e6 / max(np.mean(touched) / 1000, 1e-9)}


# ------------------------------------------------------------------ report
def ratio(slow: float, fast: float) -> str:
    return f"{slow / fast:8.1f}x" if fast > 0 else "     n/a"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run, not the reported numbers)")
    parser.add_argument("--json", help="write all measurements to this file")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    n_train, n_test = (600, 100) if args.quick else (3000, 400)
    results: dict = {"spec": SPEC, "params": PARAMS, "throughput": [], "memory": None, "many_labels": []}
    print(f"sgm-stream MNB ({SPEC}) vs River 0.26 / scikit-learn MultinomialNB; CPU time per document", flush=True)
    print(f"{'labels':>7} | {'learn: ours one':>15} {'ours batch':>10} {'river one':>10} {'skl one':>9} "
          f"{'skl batch':>10} | {'x river':>8} {'batch x river':>13} | {'predict: ours one':>17} {'ours batch':>10} "
          f"{'river one':>10} {'skl one':>9} {'skl batch':>10} | {'x river':>8} {'x skl one':>9}")
    for n_labels in (2, 20, 200, 2000):
        r = throughput(n_labels, n_train if n_labels < 2000 else n_train * 2, n_test, args.seed)
        results["throughput"].append(r)
        us = lambda k: f"{r[k] * 1e6:8.1f}us"  # noqa: E731
        print(f"{n_labels:>7} | {us('ours_learn_one_s'):>15} {us('ours_learn_many_s'):>10} {us('river_learn_one_s'):>10} "
              f"{us('sklearn_partial_fit_one_s'):>9} {us('sklearn_fit_batch_s'):>10} | "
              f"{ratio(r['river_learn_one_s'], r['ours_learn_one_s'])} {ratio(r['river_learn_one_s'], r['ours_learn_many_s']):>13} | "
              f"{us('ours_predict_one_s'):>17} {us('ours_predict_batch_s'):>10} {us('river_predict_one_s'):>10} "
              f"{us('sklearn_predict_one_s'):>9} {us('sklearn_predict_batch_s'):>10} | "
              f"{ratio(r['river_predict_one_s'], r['ours_predict_one_s'])} {ratio(r['sklearn_predict_one_s'], r['ours_predict_one_s']):>9}",
              flush=True)
    at200 = next(r for r in results["throughput"] if r["labels"] == 200)
    targets = {
        "predict_one_vs_river_200": at200["river_predict_one_s"] / at200["ours_predict_one_s"],
        "predict_one_vs_sklearn_one_200": at200["sklearn_predict_one_s"] / at200["ours_predict_one_s"],
        "learn_one_vs_river_200": at200["river_learn_one_s"] / at200["ours_learn_one_s"],
        "learn_many_vs_river_learn_one_200": at200["river_learn_one_s"] / at200["ours_learn_many_s"],
    }
    results["targets_at_200_labels"] = targets
    print("learning from text (the same documents; River fed by our tokenizer): " + "; ".join(
        f"{r['labels']} labels: ours learn_many {r['ours_learn_many_text_s'] * 1e6:.1f} us/doc, River "
        f"{r['river_learn_one_text_s'] * 1e6:.1f} us/doc = {r['river_learn_one_text_s'] / r['ours_learn_many_text_s']:.1f}x"
        for r in results["throughput"]), flush=True)
    print("\nat 200 labels: one-document predict {:.0f}x River (target >= 100x), {:.0f}x scikit-learn one-document "
          "calls (target >= 10x); learn_one {:.1f}x River learn_one, learn_many {:.1f}x (target >= 10x)".format(
              targets["predict_one_vs_river_200"], targets["predict_one_vs_sklearn_one_200"],
              targets["learn_one_vs_river_200"], targets["learn_many_vs_river_learn_one_200"]), flush=True)

    memory = bytes_per_posting(2000 if args.quick else 5000, 200, args.seed)
    results["memory"] = memory
    print(f"\nmemory: {memory['postings']} postings, {memory['model_bytes'] / 1e6:.1f} MB -> "
          f"{memory['bytes_per_posting']:.0f} bytes per posting including the document records that make "
          f"forget(id) exact, ~{memory['bytes_per_posting_without_documents']:.0f} without them", flush=True)

    print(f"\nmany labels (u_jm_tXiX, Croft-Harper IDF; top-5 with posteriors; CPU time per document):")
    print(f"{'labels':>8} {'train docs':>10} {'postings':>10} {'touched/doc':>11} | {'pruned top-5':>12} "
          f"{'us per 1k touched':>17} | {'dense top-5':>11} {'dense/pruned':>12}")
    for n_labels in ((1000, 10_000) if args.quick else (1000, 10_000, 100_000)):
        r = many_labels(n_labels, args.seed, 100 if args.quick else 300)
        results["many_labels"].append(r)
        print(f"{n_labels:>8} {r['train_docs']:>10} {r['postings']:>10} {r['postings_touched_per_doc']:>11.0f} | "
              f"{r['sparse_topk_s'] * 1e6:>10.0f}us {r['sparse_us_per_1k_postings_touched']:>17.1f} | "
              f"{r['dense_topk_s'] * 1e6:>9.0f}us {r['dense_topk_s'] / r['sparse_topk_s']:>11.1f}x", flush=True)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
