"""A configuration's smoothing, assembled from the methods its spec names (MODEL.md sections 1-2).

With the label's (or, for TDM's kernels, the document's) discount ``D`` and mass ``mu``::

    p_l(n) = (C(l, n) - D(l, n)) / (mu + C(l)) + a_l p_b(n)
    a_l    = (mu + D(l)) / (mu + C(l))                 D(l) = sum_n D(l, n)

and the sparse weight stored in the posting lists is::

    w(l, n) = log p_l(n) - log(a_l p_b(n)) = log1p((C(l,n) - D(l,n)) / ((mu + D(l)) p_b(n)))

All functions take *true* (decayed) counts as numpy arrays.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from . import registry
from .contract import Background, Discount, Mass

if TYPE_CHECKING:  # pragma: no cover
    from ..state import CountState

#: A parsed spec (:class:`model.spec.ModelSpec`; not imported: the grammar is built from this package).
ModelSpec = Any


class DiscountChain:
    """``D(x)`` of a configuration: its discounts in ``order``, each applied to what the earlier ones left.

    Examples
    --------
    >>> from sgm.model.smoothing.jelinek_mercer import JelinekMercer
    >>> from sgm.model.smoothing.power_law import PowerLawDiscount
    >>> chain = DiscountChain([JelinekMercer(0.5), PowerLawDiscount(0.5)])
    >>> chain.discount(np.array([4.0, 0.01]), (0.5, 0.5))  # pd: 1, then jm: 1 + 0.5 * (4 - 1)
    array([2.5 , 0.01])
    """

    def __init__(self, discounts: Sequence[Discount]) -> None:
        self.discounts = tuple(sorted(discounts, key=lambda d: d.order))
        #: ``D(l) = D(C(l))``: the per-label totals follow from the label masses
        self.linear = all(d.linear for d in self.discounts)
        self.follows_counts = any(d.follows_counts for d in self.discounts)
        #: each step's formula code for the compiled loops (:mod:`model.loops.weights`); ``None``: numpy only
        self.forms = (np.array([d.form for d in self.discounts], dtype=np.int64)
                      if all(d.form is not None for d in self.discounts) else None)

    def values(self, state: "CountState | None") -> tuple[float, ...]:
        """The numbers in force, one per discount (``state`` is read only by ``"kn"`` settings)."""
        return tuple(d.value(state) for d in self.discounts)

    def discount(self, counts: np.ndarray, values: Sequence[float]) -> np.ndarray:
        """``D(x)`` for each count; never more than the count."""
        if not self.discounts:
            return np.zeros_like(counts)
        total = self.discounts[0].discount(counts, values[0])
        for step, value in zip(self.discounts[1:], values[1:]):
            total = total + step.discount(counts - total, value)
        return total

    def label_totals(self, state: "CountState", label_mass: np.ndarray, scale: float, n: int,
                     values: Sequence[float]) -> np.ndarray:
        """``D(l)`` for class ids below ``n``; ``label_mass`` is ``C(l)`` in true units.

        A count discount followed by linear ones (pd then jm): the count discount's own totals
        ``D_1(l)``, then each linear step takes its share of what is left, ``C(l) - D_1(l)``.
        """
        if self.linear:
            return self.discount(label_mass, values)
        total = self.head_totals(state, scale, n, values)
        if total is None:
            return self.discounts[0].label_totals(state, scale, n, values, self)
        for step, value in zip(self.discounts[1:], values[1:]):
            total = total + step.discount(label_mass - total, value)
        return total

    def head_totals(self, state: "CountState", scale: float, n: int, values: Sequence[float]) -> np.ndarray | None:
        """A non-linear chain's first discount's totals ``D_1(l)`` when the rest is linear and the first keeps
        them (:meth:`Discount.head_totals`); ``None`` otherwise (then :meth:`label_totals` makes the pass)."""
        if self.linear or not all(d.linear for d in self.discounts[1:]):
            return None
        return self.discounts[0].head_totals(state, scale, n, values[0])

    def cache_arrays(self) -> list[np.ndarray]:
        return [array for d in self.discounts for array in d.cache_arrays()]


class Smoothing:
    """Discounts, Dirichlet mass and (at the label level) background of one model.

    Attributes
    ----------
    chain : DiscountChain
    mu : float
        The Dirichlet mass (0 without one).
    constant_weight : float or None
        ``a_l`` when it is the same for every label whatever the counts (linear
        discounts, no mass: Jelinek-Mercer's ``beta``), else ``None``.

    Examples
    --------
    >>> from sgm.model.smoothing.backgrounds import Uniform
    >>> from sgm.model.smoothing.dirichlet import DirichletMass
    >>> from sgm.model.smoothing.jelinek_mercer import JelinekMercer
    >>> two_stage = Smoothing([JelinekMercer(0.5)], [DirichletMass(10)], Uniform())
    >>> two_stage.mu, two_stage.constant_weight, two_stage.discount(np.array([4.0, 1.0]), two_stage.values(None))
    (10.0, None, array([2. , 0.5]))
    >>> two_stage.background_probability(np.array([3.0, 1.0]), 4.0, 2)  # u: 1 / V
    array([0.5, 0.5])
    >>> Smoothing([JelinekMercer(0.3)]).constant_weight  # a_l = beta for every label
    0.3
    """

    def __init__(self, discounts: Sequence[Discount], masses: Sequence[Mass] = (),
                 background: Background | None = None) -> None:
        self.chain = DiscountChain(discounts)
        self.mu = float(sum(m.mu for m in masses))
        self.background = background
        constant = self.chain.discounts and self.chain.linear and not masses and not self.chain.follows_counts
        self.constant_weight = float(self.chain.discount(np.ones(1), self.chain.values(None))[0]) if constant else None

    @property
    def follows_counts(self) -> bool:
        return self.chain.follows_counts

    def values(self, state: "CountState | None") -> tuple[float, ...]:
        return self.chain.values(state)

    def discount(self, counts: np.ndarray, values: Sequence[float]) -> np.ndarray:
        return self.chain.discount(counts, values)

    def label_totals(self, state: "CountState", label_mass: np.ndarray, scale: float, n: int,
                     values: Sequence[float]) -> np.ndarray:
        return self.chain.label_totals(state, label_mass, scale, n, values)

    def background_probability(self, term_mass: np.ndarray, total_mass: float, vocabulary: int) -> np.ndarray:
        """``p_b(n)`` (masses in any units: only ratios are used)."""
        if len(term_mass) == 0:  # also covers an empty model (V = 0, C = 0)
            return np.zeros(0)
        return self.background.probability(term_mass, total_mass, vocabulary)

    def cache_arrays(self) -> list[np.ndarray]:
        return self.chain.cache_arrays()


def _configured(cls: type, numbers: Sequence[Any], params: Mapping[str, Any]):
    return cls(*[params[p.name] for p in numbers])


def label_smoothing(spec: ModelSpec, params: Mapping[str, Any]) -> Smoothing:
    """The label-level smoothing of ``spec`` with the resolved ``params``."""
    parts = [_configured(registry.method(a), registry.method(a).params, params) for a in spec.smoothing]
    background = registry.background(spec.background)
    return Smoothing([p for p in parts if isinstance(p, Discount)], [p for p in parts if isinstance(p, Mass)],
                     _configured(background, background.params, params))


def kernel_smoothing(spec: ModelSpec, params: Mapping[str, Any]) -> Smoothing:
    """The document-kernel smoothing of a TDM ``spec`` (its ``k...`` affixes) with the resolved ``params``."""
    parts = [_configured(registry.kernel_method(a), registry.kernel_method(a).kernel_params, params)
             for a in sorted(spec.kernel)]
    return Smoothing([p for p in parts if isinstance(p, Discount)], [p for p in parts if isinstance(p, Mass)])


def log_smoothing_weight(mass: np.ndarray, discount_total: np.ndarray, mu: float) -> np.ndarray:
    """``log a = log((mu + D) / (mu + C))``; 0 (``a = 1``) where there is nothing to smooth.

    >>> log_smoothing_weight(np.array([4.0, 0.0]), np.array([2.0, 0.0]), 0.0)
    array([-0.69314718,  0.        ])
    """
    total = mu + mass
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log((mu + discount_total) / total)
    out[total <= 0] = 0.0
    return out


def posting_weight(counts: np.ndarray, discounts: np.ndarray, label_denominator: np.ndarray,
                   background: np.ndarray) -> np.ndarray:
    """``w(l, n) = log1p((C(l,n) - D(l,n)) / ((mu + D(l)) p_b(n)))`` elementwise."""
    return np.log1p((counts - discounts) / (label_denominator * background))
