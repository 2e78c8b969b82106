"""Background models (u, c, uc): what a label's discounted mass is spread by (MODEL.md section 1).

``V`` is the number of terms the model currently holds counts for (seen in
training, not pruned), so it grows with the vocabulary of the stream.
"""
from __future__ import annotations

import numpy as np

from ..params import ParamInfo
from .contract import Background


class Uniform(Background):
    """``p_b(n) = 1 / V``.

    >>> Uniform().probability(np.array([3.0, 1.0]), 4.0, 8)
    array([0.125, 0.125])
    """

    affix = "u"
    doc = "uniform ``1/V``"

    def probability(self, term_mass: np.ndarray, total_mass: float, vocabulary: int) -> np.ndarray:
        return np.full(len(term_mass), 1.0 / vocabulary)

    def affine(self, total_mass: float, vocabulary: int) -> tuple[float, float]:
        return 0.0, 1.0 / vocabulary


class Collection(Background):
    """``p_b(n) = C(n) / C``.

    >>> Collection().probability(np.array([3.0, 1.0]), 4.0, 8)
    array([0.75, 0.25])
    """

    affix = "c"
    doc = "collection ``C(n)/C``"

    def probability(self, term_mass: np.ndarray, total_mass: float, vocabulary: int) -> np.ndarray:
        return term_mass / total_mass

    def affine(self, total_mass: float, vocabulary: int) -> tuple[float, float]:
        return 1.0 / total_mass, 0.0


class UniformCollection(Background):
    """``p_b(n) = (1 - ups) C(n) / C + ups / V``.

    >>> UniformCollection(0.5).probability(np.array([3.0, 1.0]), 4.0, 8)
    array([0.4375, 0.1875])
    """

    affix = "uc"
    doc = "uniform-smoothed collection ``(1 - ups) C(n)/C + ups/V``"
    params = (ParamInfo("ups", 0.0, 1.0, 0.5, False, "uniform weight in the uc background", 0.0, 1.0),)

    def __init__(self, ups: float) -> None:
        super().__init__(ups)
        self.ups = ups

    def probability(self, term_mass: np.ndarray, total_mass: float, vocabulary: int) -> np.ndarray:
        return (1.0 - self.ups) * (term_mass / total_mass) + self.ups / vocabulary

    def affine(self, total_mass: float, vocabulary: int) -> tuple[float, float]:
        return (1.0 - self.ups) / total_mass, self.ups / vocabulary
