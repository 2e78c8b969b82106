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
