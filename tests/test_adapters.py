"""The River and scikit-learn adapters (sgm.model.adapters).

* River's own ``progressive_val_score`` runs :class:`RiverClassifier` on a shared dataset and
  agrees with ``sgm eval --mode prequential`` to 1e-9 in accuracy (same documents, same order,
  same model configuration); it also runs inside a River pipeline.
* scikit-learn's estimator checks pass on :class:`SklearnClassifier` (every check of
  ``check_estimator``, MNB and TDM), apart from the two scikit-learn itself skips here, named below.
* Importing ``sgm.model`` (and the adapters package) imports neither library.
"""
from __future__ import annotations

import csv
import json
import pickle
import subprocess
import sys
import types

import numpy as np
import pytest

from sgm.consumers.cli import main
from sgm.consumers.evaluation.harness import load_examples, stream_order
from sgm.model.adapters import RiverClassifier, SklearnClassifier
from sgm.stream.datasets import find_dataset

#: Checks scikit-learn skips by itself here, and why they do not apply.
SKIPPED_CHECKS = {
    "check_array_api_input": "array API namespaces (CuPy, torch...): the model computes with numpy and numba only; "
                             "scikit-learn runs it only with SCIPY_ARRAY_API=1",
    "check_classifier_data_not_an_array": "pandas inputs: pandas is not installed here (scikit-learn skips it)",
}


def river_on_python_311():
    """River 0.26 subscripts csv.DictReader, generic only from Python 3.12: give it what 3.12 has."""
    if not hasattr(csv.DictReader, "__class_getitem__"):
        csv.DictReader.__class_getitem__ = classmethod(types.GenericAlias)  # what Python 3.12 defines
    from river import compose, evaluate, feature_extraction, metrics

    return compose, evaluate, feature_extraction, metrics


@pytest.mark.parametrize("dataset, spec", [("sms-spam", "uc_pd_jm_dp"), ("webkb", "uc_pd_dp_tXiX_ps")])
def test_progressive_val_score_agrees_with_sgm_eval(dataset, spec, capsys):
    if find_dataset(dataset) is None:
        pytest.skip(f"../shared/data/{dataset}.jsonl.gz is absent (set SGM_DATA_DIR)")
    compose, evaluate, feature_extraction, metrics = river_on_python_311()
    docs = stream_order([d for d in load_examples(dataset) if d.labels])  # sgm eval's prequential order
    river_accuracy = evaluate.progressive_val_score(((d.text, d.labels[0]) for d in docs), RiverClassifier(spec),
                                                    metrics.Accuracy()).get()
    assert main(["eval", "--data", dataset, "--model", spec, "--mode", "prequential", "--json", "-"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["docs"] == len(docs) - 1  # the first document comes before any label, in both
    assert abs(river_accuracy - report["accuracy"]) <= 1e-9, (river_accuracy, report["accuracy"])


def test_river_pipeline_and_clone():
    compose, evaluate, feature_extraction, metrics = river_on_python_311()
    pipeline = compose.Pipeline(feature_extraction.BagOfWords(lowercase=True), RiverClassifier("u_jm"))
    stream = [("cheap pills now", "spam"), ("meeting at noon", "ham"), ("buy cheap pills", "spam"),
              ("lunch meeting", "ham")] * 5
    accuracy = evaluate.progressive_val_score(stream, pipeline, metrics.Accuracy())
    assert accuracy.get() == 18 / 19  # the first document is not scored; the second meets only spam so far
    fresh = RiverClassifier("uc_pd_jm_dp", params={"mu": 10.0}).clone()
    assert fresh.params == {"mu": 10.0} and len(fresh.sgm_model) == 0 and fresh.predict_one("x") is None
    assert fresh.predict_proba_one("x") == {}


def test_repeated_text_counts_twice_as_in_river():
    clf = RiverClassifier("u_jm")
    clf.learn_one("same words", "a")
    clf.learn_one("same words", "a")
    clf.learn_one("other words", "b")
    assert len(clf.sgm_model) == 3


@pytest.mark.parametrize("spec", ["uc_pd_jm_dp", "tdm_uc_pd_jm_dp_kjm"])
def test_scikit_learn_estimator_checks(spec):
    from sklearn.utils.estimator_checks import check_estimator

    results = check_estimator(SklearnClassifier(spec), on_fail=None, on_skip=None)
    failed = {r["check_name"]: str(r["exception"])[:300] for r in results if r["status"] == "failed"}
    skipped = {r["check_name"] for r in results if r["status"] == "skipped"}
    assert not failed, failed
    assert skipped <= set(SKIPPED_CHECKS), skipped
    assert sum(r["status"] == "passed" for r in results) >= 50


def test_scikit_learn_on_texts_and_count_matrices():
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.model_selection import GridSearchCV

    from sgm.model import MNB

    texts = ["cheap pills now", "meeting at noon", "buy cheap pills", "lunch meeting today", "win cash now",
             "agenda for the meeting"] * 4
    labels = ["spam", "ham", "spam", "ham", "spam", "ham"] * 4
    reference = MNB("uc_pd_jm_dp")
    reference.learn_many(texts, labels, ids=[str(i) for i in range(len(texts))])
    on_texts = SklearnClassifier("uc_pd_jm_dp").fit(texts, labels)
    queries = ["cheap lunch", "pills meeting now"]
    expected = reference.predict_proba_many(queries)
    got = on_texts.predict_proba(queries)
    for row, want in zip(got, expected):
        assert row.tolist() == pytest.approx([want[c] for c in on_texts.classes_], abs=1e-12)
    # a count matrix (sparse) learns the same counts under other term names: the same posteriors
    vectorizer = CountVectorizer(token_pattern=r"\S+")
    counts = vectorizer.fit_transform(texts)
    on_counts = SklearnClassifier("uc_pd_jm_dp").fit(counts, labels)
    assert np.allclose(on_counts.predict_proba(vectorizer.transform(queries)), got, atol=1e-12)
    # partial_fit in two halves equals one fit without learn-time TF-IDF
    halves = SklearnClassifier("uc_pd_jm_dp")
    halves.partial_fit(texts[:12], labels[:12], classes=["ham", "spam", "phish"])
    halves.partial_fit(texts[12:], labels[12:])
    proba = halves.predict_proba(queries)
    assert halves.classes_.tolist() == ["ham", "phish", "spam"] and proba[:, 1].tolist() == [0.0, 0.0]
    assert np.allclose(proba[:, [0, 2]], got, atol=1e-12)
    # grid search over the model's numbers, and pickling through the model's snapshot format
    search = GridSearchCV(SklearnClassifier("uc_jm"), {"params": [{"beta": 0.1}, {"beta": 0.9}]}, cv=2).fit(texts, labels)
    assert search.best_params_["params"]["beta"] in (0.1, 0.9)
    again = pickle.loads(pickle.dumps(on_texts))
    assert again.predict_proba(queries).tolist() == got.tolist()
    with pytest.raises(ValueError, match="Negative values"):
        SklearnClassifier().fit(np.array([[1.0, -1.0], [0.0, 2.0]]), [0, 1])


def test_neither_library_is_imported_by_the_core():
    code = ("import sys, sgm.model, sgm.model.adapters, sgm.stream.records, sgm.consumers.cli; "
            "print(sorted(m for m in ('river', 'sklearn') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    hint = subprocess.run([sys.executable, "-c", "import sys; sys.modules['river'] = None\n"
                           "from sgm.model.adapters import RiverClassifier"], capture_output=True, text=True)
    assert "RiverClassifier needs river: pip install 'sgm-stream[river]'" in hint.stderr
