"""The models in other libraries' shapes: a River classifier and a scikit-learn estimator.

Both are thin: each wraps one :class:`~sgm.model.MNB` or :class:`~sgm.model.TDM`
(built from the same configuration as everywhere else, :func:`sgm.model.build_model`)
and translates calls; the math is the model's own, so an adapter scores exactly
as the model does.

==========================  ==============================  =====================================
class                       module                          needs
==========================  ==============================  =====================================
:class:`RiverClassifier`    ``river_classifier``            river (``pip install 'sgm-stream[river]'``)
:class:`SklearnClassifier`  ``sklearn_estimator``           scikit-learn (``'sgm-stream[sklearn]'``)
==========================  ==============================  =====================================

They live beside the model because they wrap it and do no I/O (the layers point
consumers -> stream -> model, and a library user of a River pipeline should not
import the service). Neither library is a dependency of the core: importing
``sgm.model`` or this package imports neither; a class is loaded on first use,
and without its library the error says which extra to install.

Examples
--------
>>> from sgm.model.adapters import RiverClassifier
>>> clf = RiverClassifier("u_jm")
>>> clf.learn_one("cheap pills", "spam"); clf.learn_one("meeting at noon", "ham")
>>> clf.predict_one("pills")
'spam'
"""
from __future__ import annotations

import importlib
from typing import Any

__all__ = ["RiverClassifier", "SklearnClassifier"]

_WHERE = {"RiverClassifier": ("river_classifier", "river", "river"),
          "SklearnClassifier": ("sklearn_estimator", "sklearn", "sklearn")}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, library, extra = _WHERE[name]
    try:
        importlib.import_module(library)
    except ImportError as exc:
        raise ImportError(f"{name} needs {library}: pip install 'sgm-stream[{extra}]'") from exc
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
