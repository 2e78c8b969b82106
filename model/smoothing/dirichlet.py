"""Dirichlet prior smoothing (dp, kdp): a prior mass ``mu`` spread by the background."""
from __future__ import annotations

from ..params import INF, ParamInfo
from .contract import Mass


class DirichletMass(Mass):
    """``a = (mu + D) / (mu + C)``: ``mu`` pseudo-counts drawn from the background.

    >>> DirichletMass(20).mu
    20.0
    """

    affix = "dp"
    doc = "Dirichlet prior mass ``mu``"
    order = 2
    params = (ParamInfo("mu", 0.0, INF, 100.0, True, "Dirichlet prior mass (dp)", 0.1, 10000.0, True),)
    kernel_params = (ParamInfo("kmu", 0.0, INF, 10.0, True, "TDM kernel Dirichlet mass (kdp)", 0.01, 1000.0, True),)
