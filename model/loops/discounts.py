"""Compiled per-label discount totals."""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def power_discount_totals(ent_class, ent_hi, ent_lo, used, scale, scale_power, delta, beta, jm, power, power_of,
                          out):  # pragma: no cover - compiled
    """``out[l] += D(l, n)`` over the entries: the ``pd`` discount ``min(x, delta x**delta)``, then ``jm``.

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
        out[ent_class[s]] += base + beta * (x - base) if jm else base
