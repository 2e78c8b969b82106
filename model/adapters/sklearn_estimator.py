"""A scikit-learn classifier over an sgm model: ``fit``, ``partial_fit``, ``predict``, ``predict_proba``.

``X`` is either a sequence of texts (the model's tokenizer reads them; no
vectorizer needed) or a count matrix, dense or sparse, one row per document
and one non-negative column per term (what ``CountVectorizer`` makes; column
``j`` is the term ``"x<j>"``). ``y`` holds one label per document, of any
type scikit-learn accepts; ``classes_`` is sorted, and ``predict_proba``'s
columns follow it (a class known from ``partial_fit(classes=...)`` but not yet
learned has probability 0).

``fit`` starts a fresh model and learns the whole batch at once (batch TF-IDF,
as ``sgm eval``'s split mode); ``partial_fit`` learns one more batch into the
same model. Every row is a new document. The estimator pickles through the
model's own snapshot format.

Examples
--------
>>> clf = SklearnClassifier("uc_pd_jm_dp").fit(["cheap pills now", "meeting at noon", "buy cheap"],
...                                            ["spam", "ham", "spam"])
>>> clf.predict(["cheap meeting pills"]).tolist(), clf.classes_.tolist()
(['spam'], ['ham', 'spam'])
>>> from sklearn.feature_extraction.text import CountVectorizer
>>> from sklearn.pipeline import make_pipeline
>>> pipe = make_pipeline(CountVectorizer(), SklearnClassifier("u_jm"))
>>> pipe.fit(["red apple", "green pear", "red cherry"], [0, 1, 0]).predict(["red"]).tolist()
[0]
"""
from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data

from ..factory import build_model

__all__ = ["SklearnClassifier"]


class SklearnClassifier(ClassifierMixin, BaseEstimator):
    """scikit-learn's classifier interface over one sgm model.

    Parameters
    ----------
    model : str
        The spec (``"uc_pd_jm_dp"``, ``"tdm_..."``), as ``sgm eval --model``.
    params : dict, optional
        Model numbers (``{"beta": 0.3, "mu": 20}``), as ``--param``; searchable with
        ``GridSearchCV(param_grid={"params": [{"beta": 0.1}, {"beta": 0.3}]})``.
    multilabel : {"per_label", "powerset"}
        Passed to the model (``y`` here is one label per document).
    config : dict, optional
        A whole configuration (as ``sgm tune`` writes); ``model`` and ``params`` override its fields.

    Attributes
    ----------
    classes_ : ndarray
        The labels, sorted.
    n_features_in_ : int
        Columns of the count matrix ``fit`` saw (absent for text input).
    sgm_model_ : GenerativeTextModel
        The wrapped model.

    Examples
    --------
    >>> clf = SklearnClassifier("u_jm").fit(["win cash", "lunch today"], ["spam", "ham"])
    >>> clf.classes_.tolist(), clf.predict_proba(["cash"]).round(4).tolist()
    (['ham', 'spam'], [[0.25, 0.75]])
    >>> clf.partial_fit(["free lunch"], ["spam"]).predict(["lunch"]).tolist()  # one more batch, same model
    ['spam']
    """

    def __init__(self, model: str = "uc_pd_jm_dp", params: dict | None = None, multilabel: str = "per_label",
                 config: dict | None = None) -> None:
        self.model = model
        self.params = params
        self.multilabel = multilabel
        self.config = config

    # ------------------------------------------------------------ fitting
    def fit(self, X, y) -> "SklearnClassifier":
        """Learn ``(X, y)`` into a fresh model."""
        for name in ("sgm_model_", "classes_", "n_features_in_", "_rows"):
            self.__dict__.pop(name, None)
        return self._learn(X, y, classes=None, reset=True)

    def partial_fit(self, X, y, classes=None) -> "SklearnClassifier":
        """Learn one more batch; ``classes`` (every label there will be) is needed on the first call only."""
        first = not hasattr(self, "sgm_model_")
        if first and classes is None:
            raise ValueError("classes must be passed on the first call to partial_fit")
        return self._learn(X, y, classes=classes if first else None, reset=first)

    def _learn(self, X, y, classes, reset: bool) -> "SklearnClassifier":
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None")
        docs = self._documents(X, reset=reset)
        y = column_or_1d(np.asarray(y) if not hasattr(y, "__array__") else y, warn=True)
        if len(y) != len(docs):
            raise ValueError(f"X has {len(docs)} documents, y has {len(y)} labels")
        check_classification_targets(y)
        if reset:
            self.classes_ = np.unique(y if classes is None else classes)
            self.sgm_model_ = build_model(self._settings())
            self._rows = 0
        index = np.searchsorted(self.classes_, y)
        unknown = (index >= len(self.classes_)) | (self.classes_[np.minimum(index, len(self.classes_) - 1)] != y)
        if unknown.any():
            raise ValueError(f"labels {sorted(set(np.asarray(y)[unknown].tolist()))!r} are not in classes "
                             f"{self.classes_.tolist()!r}")
        ids = [f"row:{n}" for n in range(self._rows, self._rows + len(docs))]
        self._rows += len(docs)
        self.sgm_model_.learn_many(docs, [str(i) for i in index.tolist()], ids=ids)
        return self

    def _settings(self) -> dict[str, Any]:
        settings: dict[str, Any] = dict(self.config or {})
        settings["model"] = self.model
        settings["params"] = {**dict(settings.get("params") or {}), **dict(self.params or {})}
        settings["multilabel"] = self.multilabel
        return settings

    # ------------------------------------------------------------ input
    def _documents(self, X, reset: bool) -> list:
        """Texts as they are; a count matrix as one ``{"x<j>": count}`` per row."""
        if _is_text(X):
            if reset:
                self.__dict__.pop("n_features_in_", None)
            elif hasattr(self, "n_features_in_"):
                raise ValueError(f"{type(self).__name__} was fitted on a count matrix, not on texts")
            return [str(doc) for doc in X]
        X = validate_data(self, X, accept_sparse="csr", reset=reset, dtype=np.float64)
        if (X.data if sp.issparse(X) else X).min(initial=0.0) < 0:
            raise ValueError(f"Negative values in data passed to {type(self).__name__} (input X): counts are >= 0")
        X = sp.csr_matrix(X)
        X.eliminate_zeros()
        names = np.array([f"x{j}" for j in range(X.shape[1])], dtype=object)
        rows = []
        for start, end in zip(X.indptr[:-1].tolist(), X.indptr[1:].tolist()):
            rows.append(dict(zip(names[X.indices[start:end]].tolist(), X.data[start:end].tolist())))
        return rows

    # ------------------------------------------------------------ prediction
    def predict_log_proba(self, X) -> np.ndarray:
        """Log posteriors, columns in the order of ``classes_``."""
        check_is_fitted(self, "sgm_model_")
        docs = self._documents(X, reset=False)
        out = np.full((len(docs), len(self.classes_)), -np.inf)
        if not docs:
            return out
        names, log_post = self.sgm_model_.predict_log_proba_many(docs)
        out[:, [int(name) for name in names]] = log_post
        return out

    def predict_proba(self, X) -> np.ndarray:
        """Posteriors (rows sum to 1), columns in the order of ``classes_``."""
        return np.exp(self.predict_log_proba(X))

    def predict(self, X) -> np.ndarray:
        """The arg-max class of each document (ties: the first in ``classes_``)."""
        log_proba = self.predict_log_proba(X)  # first: it checks that the estimator is fitted
        return self.classes_[np.argmax(log_proba, axis=1)]

    # ------------------------------------------------------------ scikit-learn plumbing
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.positive_only = True  # counts
        tags.input_tags.string = True  # texts are read directly
        tags.classifier_tags.poor_score = True  # a multinomial model of counts: check data are not counts
        return tags

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        if "sgm_model_" in state:
            state["sgm_model_"] = state["sgm_model_"].to_bytes()  # the model's own, pickle-free format
        return state

    def __setstate__(self, state: dict) -> None:
        if isinstance(state.get("sgm_model_"), bytes):
            from ..base import GenerativeTextModel

            state = {**state, "sgm_model_": GenerativeTextModel.from_bytes(state["sgm_model_"])}
        self.__dict__.update(state)


def _is_text(X) -> bool:
    """A sequence of strings (a list, or a 1-D array of str/object holding strings)."""
    if isinstance(X, str):
        raise ValueError("X is one string; pass a sequence of documents (e.g. [text])")
    if isinstance(X, (list, tuple)):
        return bool(X) and all(isinstance(doc, str) for doc in X)
    array = getattr(X, "dtype", None)
    if array is not None and getattr(X, "ndim", 2) == 1 and X.dtype.kind in "OUS":
        return all(isinstance(doc, str) for doc in X)
    return False
