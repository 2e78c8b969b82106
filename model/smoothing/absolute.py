"""Absolute discounting (ad): ``D(x) = min(delta, x)``."""
from __future__ import annotations

import numpy as np

from .contract import DELTA, Discount


class AbsoluteDiscount(Discount):
    """``D(x) = min(delta, x)``; ``delta="kn"`` uses the Kneser-Ney estimate ``n1 / (n1 + 2 n2)``.

    >>> AbsoluteDiscount(0.5).discount(np.array([4.0, 0.2]), 0.5)
    array([0.5, 0.2])
    """

    affix = "ad"
    doc = "absolute discounting ``min(delta, C)``"
    order = 0
    params = (DELTA,)

    def discount(self, counts: np.ndarray, value: float) -> np.ndarray:
        return np.minimum(counts, value)
