"""A River classifier over an sgm model: ``learn_one``, ``predict_proba_one``, ``predict_one``.

Usable wherever River expects a classifier: ``river.evaluate.progressive_val_score``,
pipelines (``feature_extraction.BagOfWords() | RiverClassifier(...)``), River's
metrics. ``x`` is a text (the model's tokenizer reads it) or a ``{term: count}``
dict (what River's feature extractors produce); ``y`` a label.

Every ``learn_one`` is a new observation, as in River's own naive Bayes: it gets
a fresh document id, so the same text seen twice counts twice (the model itself
would treat a repeated id as a no-op). Before anything is learned,
``predict_proba_one`` returns ``{}`` and ``predict_one`` ``None``, River's
convention for "no prediction" (progressive validation does not score those).
Ties go to the class learned first, as :meth:`sgm.model.MNB.predict_one`.

``river.evaluate.progressive_val_score(stream, RiverClassifier(...), metrics.Accuracy())``
gives the accuracy ``sgm eval --mode prequential`` gives on the same stream
(``tests/test_adapters.py``). River 0.26 cannot import ``river.evaluate`` (nor
``river.stream``, ``river.feature_extraction``) on Python 3.11: it subscripts
``csv.DictReader``, which is generic only from Python 3.12; the tests give
``csv.DictReader`` the ``__class_getitem__`` Python 3.12 has before importing
it (``tests/test_adapters.py: river_on_python_311``). ``river.base``,
``river.metrics`` and ``river.compose`` import as they are.

Examples
--------
>>> from river import metrics
>>> clf, accuracy = RiverClassifier("u_jm", params={"beta": 0.5}), metrics.Accuracy()
>>> stream = [("win cash", "spam"), ("lunch today", "ham"), ("cash prize", "spam"), ("lunch menu", "ham"),
...           ("win prize", "spam")]
>>> for x, y in stream:  # test-then-train, as progressive_val_score does
...     predicted = clf.predict_one(x)
...     if predicted is not None:
...         accuracy.update(y, predicted)
...     clf.learn_one(x, y)
>>> accuracy
Accuracy: 75.00%
>>> clf.predict_proba_one("lunch")["ham"] > 0.5
True
"""
from __future__ import annotations

from typing import Any

from river import base

from ..base import GenerativeTextModel
from ..factory import build_model, model_config

__all__ = ["RiverClassifier"]


class RiverClassifier(base.Classifier):
    """River's classifier interface over one sgm model.

    Parameters
    ----------
    model : str
        The spec (``"uc_pd_jm_dp"``, ``"tdm_..."``), as ``sgm eval --model``.
    params : dict, optional
        Model numbers (``{"beta": 0.3, "mu": 20}``), as ``--param``.
    half_life : float, optional
        Time decay, in the units of the ``ts`` given to :meth:`learn_one`.
    config : dict, optional
        A whole configuration (as ``sgm tune`` writes); ``model`` and ``params`` then override its fields.

    Examples
    --------
    >>> clf = RiverClassifier("u_jm", params={"beta": 0.5})
    >>> clf.predict_one("cash") is None  # nothing learned yet: no prediction
    True
    >>> clf.learn_one("win cash", "spam"); clf.learn_one("lunch today", "ham")
    >>> clf.predict_one("cash"), round(clf.predict_proba_one("cash")["spam"], 4)
    ('spam', 0.75)
    """

    def __init__(self, model: str = "uc_pd_jm_dp", params: dict | None = None, half_life: float | None = None,
                 config: dict | None = None) -> None:
        self.model = model
        self.params = params
        self.half_life = half_life
        self.config = config
        settings: dict[str, Any] = dict(config or {})
        settings["model"] = model
        settings["params"] = {**dict(settings.get("params") or {}), **dict(params or {})}
        if half_life is not None:
            settings["half_life"] = half_life
        self.sgm_model: GenerativeTextModel = build_model(settings)
        self._seen = 0

    @property
    def _multiclass(self) -> bool:
        return True

    def learn_one(self, x: str | dict, y: Any, ts: float | None = None) -> None:
        """Learn ``x`` under label ``y`` (a new observation each call)."""
        self._seen += 1
        self.sgm_model.learn_one(x, y, ts=ts, id=f"river:{self._seen}")

    def predict_proba_one(self, x: str | dict) -> dict:
        """The full posterior ``{label: p}``; ``{}`` before the first label is learned."""
        if len(self.sgm_model) == 0:
            return {}
        return self.sgm_model.predict_proba_one(x)

    def predict_one(self, x: str | dict) -> Any:
        """The arg-max label (ties: the label learned first); ``None`` before anything is learned."""
        if len(self.sgm_model) == 0:
            return None
        return self.sgm_model.predict_one(x)

    def configuration(self) -> dict:
        """The wrapped model's configuration (``sgm eval --config`` reads it)."""
        return model_config(self.sgm_model)

    @classmethod
    def _unit_test_params(cls):
        yield {"model": "u_jm"}
        yield {"model": "uc_pd_jm_dp", "params": {"mu": 10.0}}
