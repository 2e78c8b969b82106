"""Growable arrays and compensated sums: the storage of the count tables (:mod:`model.state`).

Running sums are kept as ``hi + lo`` pairs (Knuth's TwoSum), so that adding a
value and later subtracting it again restores the remainder exactly; see
:class:`CompensatedArray`.
"""
from __future__ import annotations

import math

import numpy as np

from .loops.sums import compensated_add


def grow(array: np.ndarray, size: int) -> np.ndarray:
    """Return ``array`` with room for ``size`` items (amortized doubling, zero-filled)."""
    if size <= len(array):
        return array
    bigger = np.zeros(max(size, 2 * len(array), 16), dtype=array.dtype)
    bigger[: len(array)] = array
    return bigger


def _two_sum_into(hi: np.ndarray, lo: np.ndarray, index, values) -> None:
    """``hi[index] += values`` keeping the exact rounding error in ``lo`` (Knuth's TwoSum).

    ``index`` must not repeat. Branch-free: valid whatever the magnitudes.
    """
    s = hi[index]
    t = s + values
    b = t - s
    lo[index] += (s - (t - b)) + (values - b)
    hi[index] = t


class CompensatedArray:
    """Running sums kept as ``hi + lo`` so that adding and later subtracting is exact.

    Plain float sums lose the low bits of small terms next to large ones; when
    the large term is unlearned again (a recent, heavily weighted document under
    decay, say) the remainder would carry a large *relative* error. TwoSum keeps
    each addition's rounding error in ``lo``, so subtracting the same value
    restores the remainder to within ``2**-104`` relative.

    >>> sums = CompensatedArray(2)
    >>> sums.add(np.array([0]), np.array([1e-3]))
    >>> sums.add(np.array([0]), np.array([2.0 ** 60])); sums.add(np.array([0]), np.array([-2.0 ** 60]))
    >>> float(sums.get(0)) == 1e-3
    True
    """

    __slots__ = ("hi", "lo")

    def __init__(self, size: int = 0) -> None:
        self.hi = np.zeros(size)
        self.lo = np.zeros(size)

    def __len__(self) -> int:
        return len(self.hi)

    def grow(self, size: int) -> None:
        if size > len(self.hi):
            self.hi = grow(self.hi, size)
            self.lo = grow(self.lo, len(self.hi))

    def get(self, index=slice(None)) -> np.ndarray:
        return self.hi[index] + self.lo[index]

    def add(self, index, values, distinct: bool = True) -> None:
        """Add ``values`` at ``index`` in order (repeated indices accumulate as one by one would)."""
        if np.ndim(index) == 0:
            _two_sum_into(self.hi, self.lo, index, values)
            return
        index = np.asarray(index, dtype=np.int64)
        if np.ndim(values) == 0:
            values = np.full(len(index), values, dtype=np.float64)
        compensated_add(self.hi, self.lo, index, np.asarray(values, dtype=np.float64))

    def zero(self, index) -> None:
        self.hi[index] = 0.0
        self.lo[index] = 0.0

    def clamp(self, index) -> None:
        """Sums of positive weights are never negative: reset round-off below zero."""
        negative = np.asarray(index)[(self.hi[index] + self.lo[index]) < 0]
        if len(negative):
            self.zero(negative)

    def ldexp(self, exponent: int, size: int | None = None) -> None:
        part = slice(None) if size is None else slice(0, size)
        self.hi[part] = np.ldexp(self.hi[part], exponent)
        self.lo[part] = np.ldexp(self.lo[part], exponent)


class CompensatedSum:
    """A scalar :class:`CompensatedArray`."""

    __slots__ = ("hi", "lo")

    def __init__(self) -> None:
        self.hi = 0.0
        self.lo = 0.0

    @property
    def value(self) -> float:
        return self.hi + self.lo

    def add(self, x: float) -> None:
        s = self.hi
        t = s + x
        b = t - s
        self.lo += (s - (t - b)) + (x - b)
        self.hi = t

    def zero(self) -> None:
        self.hi = self.lo = 0.0

    def clamp(self) -> None:
        if self.hi + self.lo < 0:
            self.zero()

    def ldexp(self, exponent: int) -> None:
        self.hi = math.ldexp(self.hi, exponent)
        self.lo = math.ldexp(self.lo, exponent)
