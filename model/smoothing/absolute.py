"""Absolute discounting (ad): ``D(x) = min(delta, x)``."""
from __future__ import annotations

import numpy as np

from ..loops.weights import ABSOLUTE
from .contract import DELTA
from .totals import CountDiscount


class AbsoluteDiscount(CountDiscount):
    """``D(x) = min(delta, x)``; ``delta="kn"`` uses the Kneser-Ney estimate ``n1 / (n1 + 2 n2)``.

    Per-label totals ``D(l)`` are kept from the entries each update touched (:mod:`model.smoothing.totals`).

    >>> AbsoluteDiscount(0.5).discount(np.array([4.0, 0.2]), 0.5)
    array([0.5, 0.2])
    """

    affix = "ad"
    doc = "absolute discounting ``min(delta, C)``"
    order = 0
    params = (DELTA,)
    totals_kind = "absolute"
    form = ABSOLUTE

    def discount(self, counts: np.ndarray, value: float) -> np.ndarray:
        return np.minimum(counts, value)
