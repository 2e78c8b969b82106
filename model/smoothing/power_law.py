"""Power-law discounting (pd, kpd): ``D(x) = min(x, delta * x**delta)`` (thesis section 4.2)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
from numba import njit

from ..params import ParamInfo
from .contract import DELTA, Chain, Discount

if TYPE_CHECKING:  # pragma: no cover
    from ..state import CountState


class PowerLawDiscount(Discount):
    """``D(x) = min(x, delta x**delta)``; ``delta="kn"`` uses the Kneser-Ney estimate.

    A discount never exceeds its count, which matters for fractional TF-IDF
    counts where ``delta * x**delta > x``.

    >>> PowerLawDiscount(0.5).discount(np.array([4.0, 0.01]), 0.5)
    array([1.  , 0.01])

    Per-label totals ``D(l)`` need a pass over every entry after each update (the
    discount is not linear); with a fixed ``delta`` each entry's ``c**delta`` is
    cached between epochs, keyed by the stored count itself (so it is right
    whoever holds a slot), and only entries whose count changed pay for a ``pow``.
    """

    affix = "pd"
    doc = "power-law discounting ``min(C, delta * C**delta)``"
    order = 0
    params = (DELTA,)
    kernel_params = (ParamInfo("kdelta", 0.0, 1.0, 0.5, True, "TDM kernel power-law discount (kpd)", 0.01, 1.0,
                               kneser_ney=True),)

    def __init__(self, setting: Any) -> None:
        super().__init__(setting)
        # per entry slot: c**delta, the stored count c it was computed for (NaN: never), and that delta
        self._power = np.empty(0)
        self._power_of = np.empty(0)
        self._power_delta: float | None = None

    def discount(self, counts: np.ndarray, value: float) -> np.ndarray:
        return np.minimum(counts, value * np.power(counts, value))

    def label_totals(self, state: "CountState", scale: float, n: int, values: Sequence[float],
                     chain: Chain) -> np.ndarray:
        rest = chain.discounts[1:]
        if self.follows_counts or len(rest) > 1 or (rest and not rest[0].linear):
            # a delta that moves with every update gains nothing from the cache
            return super().label_totals(state, scale, n, values, chain)
        delta = values[0]
        tail = values[1] if rest else 0.0  # the linear discount of what this one left (jm's beta)
        used = state.ent_used
        power, power_of = self._power, self._power_of
        if self._power_delta != delta or len(power) < used:
            fresh = self._power_delta != delta  # a new delta: every cached power is wrong
            size = used if fresh else max(used, 2 * len(power))
            grown_power, grown_of = np.empty(size), np.full(size, np.nan)  # NaN: never equal, so computed
            if not fresh:
                grown_power[: len(power)], grown_of[: len(power_of)] = power, power_of
            power, power_of = grown_power, grown_of
            self._power, self._power_of, self._power_delta = power, power_of, delta
        out = np.zeros(n)
        power_discount_totals(state.ent_class, state.ent_count.hi, state.ent_count.lo, used, scale, scale ** delta,
                              delta, tail, bool(rest), power, power_of, out)
        return out

    def cache_arrays(self) -> tuple[np.ndarray, ...]:
        return (self._power, self._power_of)


@njit(cache=True, nogil=True)
def power_discount_totals(ent_class, ent_hi, ent_lo, used, scale, scale_power, delta, tail, has_tail, power, power_of,
                          out):  # pragma: no cover - compiled
    """``out[l] += D(l, n)`` over the entries: ``min(x, delta x**delta)``, then ``tail`` of the rest if ``has_tail``.

    ``x = c * scale`` for the stored count ``c``; ``x**delta`` is taken as
    ``scale**delta * c**delta`` with ``c**delta`` cached per slot in
    ``power`` and recomputed only where the stored count is not the one it
    was computed for (``power_of``): after an update only the changed
    entries pay for a ``pow``. Entries are summed in slot order, as
    ``np.bincount`` does. Free slots hold 0 and add 0.
    """
    for s in range(used):
        c = ent_hi[s] + ent_lo[s]
        if power_of[s] != c:
            power[s] = c ** delta
            power_of[s] = c
        x = c * scale
        base = min(x, delta * (scale_power * power[s]))
        out[ent_class[s]] += base + tail * (x - base) if has_tail else base
