"""Compensated (TwoSum) additions, compiled: the in-order sums behind :mod:`model.arrays`."""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True, inline="always")
def two_sum(hi, lo, j, x):  # pragma: no cover - compiled
    """``hi[j] + lo[j] += x`` keeping the rounding error of the addition in ``lo[j]`` (Knuth's TwoSum)."""
    s = hi[j]
    t = s + x
    b = t - s
    lo[j] += (s - (t - b)) + (x - b)
    hi[j] = t


@njit(cache=True, nogil=True)
def compensated_add(hi: np.ndarray, lo: np.ndarray, index: np.ndarray, values: np.ndarray) -> None:  # pragma: no cover - compiled
    """``hi[index[i]] + lo[index[i]] += values[i]`` for i in order (indices may repeat)."""
    for i in range(index.shape[0]):
        two_sum(hi, lo, index[i], values[i])


@njit(cache=True, nogil=True)
def compensated_running_sum(hi: float, lo: float, values: np.ndarray):  # pragma: no cover - compiled
    """``(hi, lo)`` after adding ``values`` one by one with TwoSum: a scalar running sum, in order."""
    for i in range(values.shape[0]):
        x = values[i]
        t = hi + x
        b = t - hi
        lo += (hi - (t - b)) + (x - b)
        hi = t
    return hi, lo


# Exact sums (model/arrays.py: ExactArray, ExactSum). TwoSum keeps the rounding error of ``hi + x``
# exactly; adding that error to ``lo`` may round again. The error of that second addition is the
# *residual*: when it is not zero it is handed back (``spill``) and kept beside the pair, so that
# ``hi + lo + residuals`` is always the exact sum of everything added. Residuals are rare (a sum
# whose terms span more than ~100 binades, e.g. old decayed documents beside new ones).


@njit(cache=True, nogil=True, inline="always")
def exact_add(hi, lo, j, x, spill_index, spill_value, spill_count):  # pragma: no cover - compiled
    """``hi[j] + lo[j] += x`` exactly: a residual that ``lo[j]`` cannot hold is appended to the spill buffers."""
    s = hi[j]
    t = s + x
    b = t - s
    e = (s - (t - b)) + (x - b)
    hi[j] = t
    u = lo[j]
    v = u + e
    c = v - u
    r = (u - (v - c)) + (e - c)
    lo[j] = v
    if r != 0.0:
        k = spill_count[0]
        spill_index[k] = j
        spill_value[k] = r
        spill_count[0] = k + 1


@njit(cache=True, nogil=True)
def exact_add_many(hi: np.ndarray, lo: np.ndarray, index: np.ndarray, values: np.ndarray, spill_index: np.ndarray,
                   spill_value: np.ndarray, spill_count: np.ndarray) -> None:  # pragma: no cover - compiled
    """:func:`exact_add` of ``values[i]`` at ``index[i]`` for i in order (the spill buffers hold ``len(index)``)."""
    for i in range(index.shape[0]):
        exact_add(hi, lo, index[i], values[i], spill_index, spill_value, spill_count)


@njit(cache=True, nogil=True)
def exact_running_sum(hi: float, lo: float, values: np.ndarray, spill_value: np.ndarray,
                      spill_count: np.ndarray):  # pragma: no cover - compiled
    """A scalar :func:`exact_add` of ``values`` in order; returns ``(hi, lo)``, residuals go to ``spill_value``."""
    for i in range(values.shape[0]):
        x = values[i]
        t = hi + x
        b = t - hi
        e = (hi - (t - b)) + (x - b)
        hi = t
        v = lo + e
        c = v - lo
        r = (lo - (v - c)) + (e - c)
        lo = v
        if r != 0.0:
            k = spill_count[0]
            spill_value[k] = r
            spill_count[0] = k + 1
    return hi, lo
