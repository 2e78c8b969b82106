"""Power-law discounting (pd, kpd): ``D(x) = min(x, delta * x**delta)`` (thesis section 4.2)."""
from __future__ import annotations

import numpy as np

from ..loops.weights import POWER
from ..params import ParamInfo
from .contract import DELTA
from .totals import CountDiscount


class PowerLawDiscount(CountDiscount):
    """``D(x) = min(x, delta x**delta)``; ``delta="kn"`` uses the Kneser-Ney estimate.

    A discount never exceeds its count, which matters for fractional TF-IDF
    counts where ``delta * x**delta > x``.

    >>> PowerLawDiscount(0.5).discount(np.array([4.0, 0.01]), 0.5)
    array([1.  , 0.01])

    Per-label totals ``D(l)`` are kept from the entries each update touched
    (:mod:`model.smoothing.totals`): with a fixed ``delta`` as sums below and
    above the count where ``delta x**delta`` falls under ``x``; with ``"kn"``
    and no decay as per-label histograms of the stored counts; with ``"kn"``
    under decay by the pass over every entry.
    """

    affix = "pd"
    doc = "power-law discounting ``min(C, delta * C**delta)``"
    order = 0
    params = (DELTA,)
    kernel_params = (ParamInfo("kdelta", 0.0, 1.0, 0.5, True, "TDM kernel power-law discount (kpd)", 0.01, 1.0,
                               kneser_ney=True),)
    totals_kind = "power"
    form = POWER

    def discount(self, counts: np.ndarray, value: float) -> np.ndarray:
        return np.minimum(counts, value * np.power(counts, value))
