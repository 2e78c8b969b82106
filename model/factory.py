"""Build a model from a configuration dict (the format ``sgm tune`` writes and
``sgm eval --config`` / ``sgm serve --config`` read), and the registry of model families.

A configuration is a plain dict::

    {"model": "uc_pd_jm_dp_tXiX_ps",          # affix string; "tdm_..." selects TDM
     "params": {"beta": 0.3, "mu": 20, ...},   # numbers named as in MODEL.md
     "half_life": null,                        # optional, seconds of event time
     "multilabel": "per_label",                # or "powerset"
     "label_threshold": null,                  # powerset: output labels whose marginal >= it (optional)
     "tokenizer": {"ngrams": 1},               # optional
     "mail": {"ngrams": 3, "meta_weight": 4.5}, # optional: how messages are read (model.mail.MailOptions)
     "prune_below": null, "max_documents": null,  # memory bounds: a weight, documents,
     "max_bytes": null}                           # and bytes (CountState.approx_bytes)

A model family (:class:`model.mnb.MNB`, :class:`model.tdm.TDM`) registers itself
here when its class is defined (:class:`model.base.GenerativeTextModel` does it for
every subclass that names its ``family``), so this module, and the snapshots built
on it, never import a family.

>>> m = build_model({"model": "u_jm", "params": {"beta": 0.4}})
>>> m
MNB('mnb_u_jm', beta=0.4)
"""
from __future__ import annotations

from typing import Any, Mapping

from .spec import SpecError, parse_spec
from .text import Tokenizer

#: Keys a configuration may hold besides "model" and "params" (kernel_* are TDM's).
OPTION_KEYS = ("half_life", "multilabel", "label_threshold", "tokenizer", "prune_below", "max_documents", "max_bytes", "kernel_sum",
               "kernel_bin_width", "node_pruning", "mail")

#: Model classes by family name (the spec prefix: "mnb", "tdm").
_FAMILIES: dict[str, type] = {}


def register_family(family: str, cls: type) -> None:
    """Make ``cls`` the class that builds specs of ``family``."""
    _FAMILIES[family] = cls


def family_class(family: str) -> type:
    """The class registered for ``family`` (``KeyError`` if none)."""
    return _FAMILIES[family]


def model_class(spec: str) -> type:
    """The model class of an affix string (its family prefix; MNB by default)."""
    return _FAMILIES[parse_spec(spec).family]


def build_model(config: Mapping[str, Any]) -> Any:
    """A fresh, empty model (a :class:`model.base.GenerativeTextModel`) from a configuration dict."""
    if "model" not in config:
        raise SpecError("a configuration needs a 'model' affix string")
    if config["model"] == "ensemble":  # base configurations and a pool (model.ensemble), registered on import
        try:
            return _FAMILIES["ensemble"].from_config(config)
        except (ValueError, TypeError) as exc:
            raise SpecError(f"ensemble configuration: {exc}") from None
    unknown = set(config) - {"model", "params", "family", "spec", *OPTION_KEYS}
    if unknown:
        raise SpecError(f"unknown configuration keys: {sorted(unknown)}")
    options: dict[str, Any] = {k: config[k] for k in OPTION_KEYS if config.get(k) is not None}
    params = config.get("params") or {}
    for name, value in (("params", params), ("tokenizer", options.get("tokenizer", {}))):
        if not isinstance(value, Mapping):
            raise SpecError(f"{name} must be an object of names and values, got {type(value).__name__}")
    if "tokenizer" in options:
        options["tokenizer"] = Tokenizer.from_dict(options["tokenizer"])
    try:
        return model_class(config["model"])(config["model"], **options, **dict(params))
    except TypeError as exc:  # a value of the wrong type in a file ("prune_below": "x", "limits": 3)
        raise SpecError(f"configuration: {exc}") from None


def model_config(model: Any) -> dict[str, Any]:
    """The configuration dict of ``model`` (inverse of :func:`build_model`)."""
    own = getattr(model, "model_config", None)
    if callable(own):  # a family with a configuration of its own shape (model.ensemble)
        return own()
    cfg = model.config()
    return {"model": cfg["spec"], "params": cfg["params"], **{k: cfg[k] for k in OPTION_KEYS if k in cfg}}
