"""The math: sparse generative text models. Pure, deterministic; no I/O, no Kafka.

>>> from sgm.model import MNB
>>> m = MNB("u_jm", beta=0.5)
>>> m.learn_one("good news", "pos"); m.learn_one("bad news", "neg")
True
True
>>> m.predict_one("good")
'pos'
"""
from .base import GenerativeTextModel, LearnGuardError
from .ensemble import Ensemble
from .factory import build_model, model_config
from .mnb import MNB
from .spec import ModelSpec, SpecError, parse_spec
from .tdm import TDM
from .text import Tokenizer

__all__ = ["MNB", "TDM", "Ensemble", "build_model", "model_config", "GenerativeTextModel", "LearnGuardError", "ModelSpec", "SpecError", "Tokenizer", "parse_spec"]
