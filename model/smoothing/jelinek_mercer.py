"""Jelinek-Mercer smoothing (jm, kjm): the linear discount ``D(x) = beta * x``."""
from __future__ import annotations

import numpy as np

from ..params import ParamInfo
from ..loops.weights import LINEAR
from .contract import Discount


class JelinekMercer(Discount):
    """``D(x) = beta x``; after a count discount it takes ``beta`` of what that one left.

    >>> JelinekMercer(0.5).discount(np.array([4.0, 1.0]), 0.5)
    array([2. , 0.5])
    """

    affix = "jm"
    doc = "Jelinek-Mercer: linear discount ``beta * C``"
    slot = "linear discount"
    order = 1
    linear = True
    form = LINEAR
    params = (ParamInfo("beta", 0.0, 1.0, 0.5, True, "Jelinek-Mercer discount fraction (jm)", 0.01, 1.0),)
    kernel_params = (ParamInfo("kbeta", 0.0, 1.0, 0.5, True, "TDM kernel Jelinek-Mercer fraction (kjm)", 0.01, 1.0),)

    def discount(self, counts: np.ndarray, value: float) -> np.ndarray:
        return value * counts
