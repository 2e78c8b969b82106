"""A tunable number of a model configuration, and the error a bad configuration raises.

The numbers themselves are declared where they are used: each smoothing method
in :mod:`model.smoothing` declares its own, :mod:`model.spec` the weighting and
prior-scaling ones, and :data:`model.spec.PARAMS` collects them all.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

INF = math.inf


class SpecError(ValueError):
    """An unknown affix, an impossible combination or an out-of-range number.

    Examples
    --------
    >>> from sgm.model import MNB
    >>> MNB("u_jm", beta=2)
    Traceback (most recent call last):
    ...
    sgm.model.spec.SpecError: beta=2.0 is outside (0.0, 1.0]: Jelinek-Mercer discount fraction (jm)
    """


# Its public home is model.spec (where callers import it from, and where it was defined before the
# smoothing methods needed it without importing the grammar): tracebacks name it there.
SpecError.__module__ = "sgm.model.spec"


@dataclass(frozen=True)
class ParamInfo:
    """One tunable number: its allowed range, default and meaning."""

    name: str
    low: float
    high: float
    default: float
    low_open: bool
    doc: str
    #: range used by ``sgm tune`` (a finite sub-range of the allowed one)
    tune_low: float
    tune_high: float
    log_scale: bool = False
    #: the string ``"kn"`` is also accepted: the Kneser-Ney estimate, recomputed from the counts as they change
    kneser_ney: bool = False

    def check(self, value: Any) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise SpecError(f"{self.name} must be a number, got {value!r}") from None
        if math.isnan(number):
            raise SpecError(f"{self.name} must be a number, got NaN")
        too_low = number <= self.low if self.low_open else number < self.low
        if too_low or number > self.high:
            left = "(" if self.low_open else "["
            raise SpecError(f"{self.name}={number!r} is outside {left}{self.low}, {self.high}]: {self.doc}")
        return number
