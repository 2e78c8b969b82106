"""The contract of a smoothing method (MODEL.md sections 1-2, thesis table 4.1).

Every smoothing here is one formula with a per-count discount ``D(x)`` and a
Dirichlet mass ``mu`` over a background ``p_b(n)``::

    p_l(n) = (C(l, n) - D(l, n)) / (mu + C(l)) + a_l p_b(n)
    a_l    = (mu + D(l)) / (mu + C(l))                       D(l) = sum_n D(l, n)

(TDM's document kernels use the same formula with a document's weights for the
counts and the label model for the background). A configuration names its parts
by affixes, and each part is one class of this package:

- :class:`Background` gives ``p_b(n)`` (label level only);
- :class:`Discount` gives ``D(x)`` for a count ``x``; the discounts of a
  configuration apply in ``order``, each to what the earlier ones left
  (``D = D_1(x)``, then ``D += D_2(x - D)``);
- :class:`Mass` gives the Dirichlet mass ``mu``.

A class declares its affix and its numbers (the spec grammar reads them from
:mod:`model.smoothing.registry`), the ``slot`` it fills (methods of one slot
exclude each other) and, if it has one, its form for TDM's document kernels
(affix ``"k" + affix``, with numbers of its own). An instance holds one model's
settings and whatever cache it keeps. The per-label discount totals ``D(l)``
are the discount's business (:meth:`Discount.label_totals`), so a faster way to
keep them stays inside the method that needs it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Protocol, Sequence

import numpy as np

from ..params import ParamInfo

if TYPE_CHECKING:  # pragma: no cover
    from ..state import CountState

#: The number the count discounts (ad, pd) read: one declaration, so PARAMS holds it once.
DELTA = ParamInfo("delta", 0.0, 1.0, 0.5, True, "absolute/power-law discount (ad, pd); 'kn' = Kneser-Ney estimate",
                  0.01, 1.0, kneser_ney=True)


class Method:
    """What every smoothing method declares (class attributes) for the spec grammar."""

    #: the affix naming it in a spec ("jm")
    affix: ClassVar[str] = ""
    #: one line for the affix table of :mod:`model.spec`
    doc: ClassVar[str] = ""
    #: methods filling the same slot exclude each other in one spec
    slot: ClassVar[str] = ""
    #: position among the smoothing affixes of a canonical spec name, and for discounts the order they apply
    #: in (kernel affixes keep the registry's order)
    order: ClassVar[int] = 0
    #: the numbers the method reads (label level)
    params: ClassVar[tuple[ParamInfo, ...]] = ()
    #: the numbers of its TDM document-kernel form (affix "k" + affix); ``None``: it has no such form
    kernel_params: ClassVar[tuple[ParamInfo, ...] | None] = None


class Discount(Method):
    """A per-count discount ``D(x) <= x`` with one setting (a number, or ``"kn"`` where allowed)."""

    slot = "discount"
    #: ``D(x) = D(1) * x``: per-label totals follow from the label masses, no pass over entries
    linear: ClassVar[bool] = False
    #: the formula's code for the compiled loops (:mod:`model.loops.weights`); ``None``: numpy only
    form: ClassVar[int | None] = None

    def __init__(self, setting: Any) -> None:
        self.setting = setting

    @property
    def follows_counts(self) -> bool:
        """The number in force moves with the counts (the Kneser-Ney estimate)."""
        return self.setting == "kn"

    def value(self, state: "CountState") -> float:
        """The number in force for ``state``'s counts."""
        return state.kneser_ney_delta() if self.follows_counts else float(self.setting)

    def discount(self, counts: np.ndarray, value: float) -> np.ndarray:
        """``D(x)`` for each count (true units)."""
        raise NotImplementedError

    def head_totals(self, state: "CountState", scale: float, n: int, value: float) -> np.ndarray | None:
        """``sum_n D(C(l, n))`` of this discount alone for class ids below ``n``, kept up to date from the
        entries each update touched (:mod:`model.smoothing.totals`); ``None``: no faster way than the pass."""
        return None

    def label_totals(self, state: "CountState", scale: float, n: int, values: Sequence[float],
                     chain: "Chain") -> np.ndarray:
        """``D(l) = sum_n D(C(l, n))`` of the whole chain, for class ids below ``n``: one pass over every entry.

        Called on the chain's first discount when it is not linear and has no
        :meth:`head_totals`; ``values`` are the chain's numbers in force (one
        per discount, in chain order).
        """
        used = state.ent_used
        counts = state.ent_count.get(slice(0, used)) * scale
        return np.bincount(state.ent_class[:used], chain.discount(counts, values), minlength=n)[:n]

    def cache_arrays(self) -> tuple[np.ndarray, ...]:
        """Arrays kept only to compute faster (counted by ``cache_bytes``)."""
        return ()


class Chain(Protocol):
    """What :meth:`Discount.label_totals` may ask of the chain it heads (:class:`.composite.DiscountChain`)."""

    discounts: tuple[Discount, ...]

    def discount(self, counts: np.ndarray, values: Sequence[float]) -> np.ndarray:
        """``D(x)`` of the whole chain for each count."""


class Mass(Method):
    """A Dirichlet prior mass ``mu`` added to every label's (or document's) total."""

    slot = "mass"

    def __init__(self, setting: Any) -> None:
        self.mu = float(setting)


class Background(Method):
    """The background distribution ``p_b(n)`` the labels are smoothed towards."""

    slot = "background"

    def __init__(self, *settings: Any) -> None:
        self.settings = settings

    def probability(self, term_mass: np.ndarray, total_mass: float, vocabulary: int) -> np.ndarray:
        """``p_b(n)`` for terms with collection masses ``term_mass`` (any units: only ratios are used)."""
        raise NotImplementedError

    def affine(self, total_mass: float, vocabulary: int) -> tuple[float, float] | None:
        """``(a, b)`` with ``p_b(n) = a C(n) + b`` (masses as for :meth:`probability`), for the compiled
        loops; ``None``: not of that form (numpy only)."""
        return None
