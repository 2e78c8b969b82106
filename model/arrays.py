"""Growable arrays, compensated and exact sums: the storage of the count tables (:mod:`model.state`).

Running sums are kept as ``hi + lo`` pairs (Knuth's TwoSum), so that adding a
value and later subtracting it again restores the remainder almost exactly; see
:class:`CompensatedArray`. The totals per class, per term and of the model are
*exact* (:class:`ExactArray`, :class:`ExactSum`): the rare rounding residual a
pair cannot hold is kept beside it, so the value read is always the correctly
rounded sum of what is live, whatever order things were added and removed in.
"""
from __future__ import annotations

import math

import numpy as np

from .loops.sums import compensated_add, exact_add_many, exact_running_sum


def grow(array: np.ndarray, size: int) -> np.ndarray:
    """Return ``array`` with room for ``size`` items (amortized doubling, zero-filled)."""
    if size <= len(array):
        return array
    bigger = np.zeros(max(size, 2 * len(array), 16), dtype=array.dtype)
    bigger[: len(array)] = array
    return bigger


def distinct_sorted(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` of an integer array (its distinct values, ascending, same dtype), by a sort and a mask.

    Any shape is flattened first, as ``np.unique`` does (a 0-d array gives one value).

    The same array as ``np.unique``, which in numpy 2.x hashes integers before sorting them: ~60 us for 600
    term ids against ~7 us here, and 18x at 200,000 (on the per-document paths of learning and scoring).

    >>> distinct_sorted(np.array([5, 3, 5, -1, 3])).tolist()
    [-1, 3, 5]
    """
    if values.dtype.kind not in "iu":
        raise TypeError(f"distinct_sorted takes integers, got {values.dtype}")
    ordered = np.sort(values, axis=None)  # axis=None flattens, as np.unique does
    if len(ordered) < 2:
        return ordered
    keep = np.empty(len(ordered), dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


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


#: A residual list longer than this is merged into its shortest exact form.
_SPILL_MERGE_AT = 4


def _exact_add_one(hi: float, lo: float, x: float) -> tuple[float, float, float]:
    """``x`` added to the pair ``hi + lo``: the new pair and the residual it cannot hold, by two TwoSums in Python
    floats -- the operations of :func:`model.loops.sums.exact_add` (IEEE doubles both, so the same bits), for the
    one-value additions of the learn step (no array, no compiled call)."""
    t = hi + x
    b = t - hi
    e = (hi - (t - b)) + (x - b)
    v = lo + e
    c = v - lo
    return t, v, (lo - (v - c)) + (e - c)


def exact_partials(values) -> list[float]:
    """Non-overlapping doubles, smallest first, whose sum is exactly the sum of ``values`` (Shewchuk).

    >>> exact_partials([1e100, 1.0, -1e100, 1e-30])
    [1e-30, 1.0]
    """
    partials: list[float] = []
    for x in values:
        i = 0
        for y in partials:
            if abs(x) < abs(y):
                x, y = y, x
            high = x + y
            low = y - (high - x)
            if low:
                partials[i] = low
                i += 1
            x = high
        partials[i:] = [x]
    return [p for p in partials if p]


def canonical_expansion(values: list[float]) -> list[float]:
    """The exact sum of ``values`` as its greedy expansion: the correctly rounded sum, then the correctly
    rounded remainder, ... (unique for a given exact value; empty when it is 0).

    >>> canonical_expansion([2.0 ** -80, 1.0, -(2.0 ** -80)]), canonical_expansion([1e-300, -1e-300])
    ([1.0], [])
    """
    rest, out = list(values), []
    while (value := math.fsum(rest)) != 0.0:
        out.append(value)
        rest.append(-value)
    return out


class SpillBuffer:
    """Scratch arrays the compiled exact additions write their residuals to (drained after every call)."""

    __slots__ = ("index", "value", "count")

    def __init__(self) -> None:
        self.index = np.zeros(64, dtype=np.int64)
        self.value = np.zeros(64)
        self.count = np.zeros(1, dtype=np.int64)

    def reserve(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Room for ``n`` residuals, count reset: the three buffer arguments of the exact loops."""
        if len(self.index) < n:
            self.index = np.zeros(max(n, 2 * len(self.index)), dtype=np.int64)
            self.value = np.zeros(len(self.index))
        self.count[0] = 0
        return self.index, self.value, self.count


#: One buffer for every exact array (the state's updates run one at a time).
SPILL = SpillBuffer()


class ExactArray(CompensatedArray):
    """Running sums that are exact: ``hi + lo`` plus, rarely, residuals kept in ``spill``.

    :meth:`get` returns the correctly rounded exact sum of every value added
    (and not subtracted again), so it does not depend on the order of the
    additions: a sum equals a from-scratch re-summation of its live terms bit
    for bit. Without residuals that is ``hi + lo`` (one IEEE addition of an
    exact pair rounds correctly); with them, ``math.fsum`` of the pair and the
    residuals.

    >>> sums, plain = ExactArray(1), CompensatedArray(1)
    >>> for x in (1.0, 2.0 ** -60, 2.0 ** 80, -2.0 ** 80, -1.0):
    ...     sums.add(0, x); plain.add(0, x)
    >>> float(sums.get(0)) == 2.0 ** -60, float(plain.get(0))
    (True, 0.0)
    """

    __slots__ = ("spill",)

    def __init__(self, size: int = 0) -> None:
        super().__init__(size)
        self.spill: dict[int, list[float]] = {}  # index -> residuals beyond hi + lo (rare)

    def exact(self, j: int) -> float:
        """The correctly rounded sum at ``j``."""
        extra = self.spill.get(j)
        return float(self.hi[j] + self.lo[j]) if extra is None else math.fsum([self.hi[j], self.lo[j], *extra])

    def get(self, index=slice(None)) -> np.ndarray:
        values = self.hi[index] + self.lo[index]
        if not self.spill:
            return values
        if np.ndim(values) == 0:
            return self.exact(int(index)) if int(index) in self.spill else values
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self.hi))
            for j in self.spill:
                if start <= j < stop and (j - start) % step == 0:
                    values[(j - start) // step] = self.exact(j)
            return values
        positions = np.asarray(index)
        if positions.dtype == bool:
            positions = np.flatnonzero(positions)
        hits = np.flatnonzero(np.isin(positions, np.fromiter(self.spill, dtype=np.int64, count=len(self.spill))))
        for p in hits.tolist():
            values[p] = self.exact(int(positions[p]))
        return values

    def add_at(self, j: int, x: float) -> None:
        """:meth:`add` of one value at one index, in Python floats: the operations of
        :func:`model.loops.sums.exact_add` (IEEE doubles both, so the same bits) and the residual kept as
        :meth:`take_spill` keeps it, without the arrays and the compiled call (a few us less per call).

        >>> sums, other = ExactArray(2), ExactArray(2)
        >>> for x in (1.0, 2.0 ** -60, 2.0 ** 80, -2.0 ** 80, -1.0):
        ...     sums.add_at(1, x); other.add(np.array([1]), np.array([x]))
        >>> (sums.hi.tolist(), sums.lo.tolist(), sums.spill) == (other.hi.tolist(), other.lo.tolist(), other.spill)
        True
        """
        self.hi[j], self.lo[j], r = _exact_add_one(float(self.hi[j]), float(self.lo[j]), float(x))
        if r != 0.0:
            extra = self.spill.setdefault(j, [])
            extra.append(r)
            if len(extra) > _SPILL_MERGE_AT:
                self._merge(j)
        if j in self.spill:
            self._settle_one(j)

    def add(self, index, values, distinct: bool = True) -> None:
        """Add ``values`` at ``index`` in order, exactly (repeated indices accumulate)."""
        if np.ndim(index) == 0:
            index, values = np.array([index], dtype=np.int64), np.array([values], dtype=np.float64)
        else:
            index = np.asarray(index, dtype=np.int64)
            values = (np.full(len(index), values, dtype=np.float64) if np.ndim(values) == 0
                      else np.asarray(values, dtype=np.float64))
        exact_add_many(self.hi, self.lo, index, values, *SPILL.reserve(len(index)))
        self.take_spill(SPILL, index)

    def take_spill(self, buffer: SpillBuffer, touched: np.ndarray | None = None) -> None:
        """Keep the residuals a compiled exact loop left in ``buffer``, then :meth:`settle` the indices the loop
        changed (``touched``; ``None``: any)."""
        count = int(buffer.count[0])
        for j, r in zip(buffer.index[:count].tolist(), buffer.value[:count].tolist()):
            extra = self.spill.setdefault(j, [])
            extra.append(r)
            if len(extra) > _SPILL_MERGE_AT:
                self._merge(j)
        if self.spill:
            self.settle(touched)

    def settle(self, touched: np.ndarray | None = None) -> None:
        """Make ``hi + lo`` the correctly rounded exact sum wherever residuals are kept (of ``touched``, or all).

        The compiled readers (class terms, posting weights) read ``hi + lo`` alone. Without residuals that is
        the exact sum, rounded once; with them an addition that leaves no residual can still leave a pair
        that cancels, e.g. ``hi = -2^-52, lo = 2^-52`` beside a residual ``3e-33``: the readers would see 0
        for a positive mass and divide by it. A settled element holds the rounded value in ``hi``, 0 in
        ``lo`` and the exact rest in its residuals.

        >>> sums = ExactArray(1)
        >>> sums.hi[0], sums.lo[0], sums.spill[0] = -2.0 ** -52, 2.0 ** -52, [3e-33]
        >>> sums.settle()
        >>> float(sums.hi[0] + sums.lo[0]), sums.spill
        (3e-33, {})
        """
        spill = self.spill
        if touched is None or len(spill) <= len(touched):
            candidates = list(spill)
        else:
            candidates = [j for j in set(np.asarray(touched).tolist()) if j in spill]
        for j in candidates:
            self._settle_one(j)

    def _settle_one(self, j: int) -> None:
        hi, lo, extra = float(self.hi[j]), float(self.lo[j]), self.spill[j]
        value = math.fsum([hi, lo, *extra])
        if hi + lo == value:
            return
        rest = canonical_expansion([hi, lo, *extra, -value])
        self.hi[j], self.lo[j] = value, 0.0
        if rest:
            self.spill[j] = rest
        else:
            del self.spill[j]

    def _merge(self, j: int) -> None:
        """Rewrite ``j`` as its shortest exact form: the largest two partials in hi, lo, the rest as residuals."""
        partials = exact_partials([self.hi[j], self.lo[j], *self.spill.pop(j)])
        self.hi[j] = partials[-1] if partials else 0.0
        self.lo[j] = partials[-2] if len(partials) > 1 else 0.0
        if len(partials) > 2:
            self.spill[j] = partials[:-2]

    def zero(self, index) -> None:
        super().zero(index)
        if self.spill:
            for j in np.atleast_1d(np.asarray(index, dtype=np.int64)).tolist():
                self.spill.pop(j, None)

    def clamp(self, index) -> None:
        index = np.atleast_1d(np.asarray(index, dtype=np.int64))
        negative = index[self.get(index) < 0]
        if len(negative):
            self.zero(negative)

    def ldexp(self, exponent: int, size: int | None = None) -> None:
        super().ldexp(exponent, size)
        for extra in self.spill.values():
            extra[:] = [math.ldexp(r, exponent) for r in extra]
        if self.spill:
            self.settle()  # scaling is exact unless it reaches subnormals, which can part hi + lo from the rest


class ExactSum(CompensatedSum):
    """A scalar :class:`ExactArray`.

    >>> total = ExactSum()
    >>> for x in (1.0, 2.0 ** -60, 2.0 ** 80, -2.0 ** 80, -1.0):
    ...     total.add(x)
    >>> total.value == 2.0 ** -60
    True
    """

    __slots__ = ("spill",)

    def __init__(self) -> None:
        super().__init__()
        self.spill: list[float] = []

    @property
    def value(self) -> float:
        return self.hi + self.lo if not self.spill else math.fsum([self.hi, self.lo, *self.spill])

    def add(self, x: float) -> None:
        """:meth:`add_many` of one value, in Python floats: the operations of
        :func:`model.loops.sums.exact_running_sum` (IEEE doubles both, so the same bits), without an array and
        a compiled call (a few us less per call; the state adds one per learned document and class).

        >>> one, many = ExactSum(), ExactSum()
        >>> values = [1.0, 2.0 ** -60, 2.0 ** 80, 3.0 * 2.0 ** -120, -2.0 ** 80, -1.0, 2.0 ** -200]
        >>> for x in values:
        ...     one.add(x)
        >>> many.add_many(np.array(values))
        >>> (one.hi, one.lo, one.spill) == (many.hi, many.lo, many.spill)
        True
        """
        self.hi, self.lo, r = _exact_add_one(self.hi, self.lo, float(x))
        if r != 0.0:
            self.spill.append(r)
            self._merge_if_long()

    def add_many(self, values: np.ndarray) -> None:
        """Add ``values`` one by one, in order, exactly."""
        _, residuals, count = SPILL.reserve(len(values))
        self.hi, self.lo = exact_running_sum(self.hi, self.lo, values, residuals, count)
        if count[0]:
            self.spill.extend(residuals[: int(count[0])].tolist())
            self._merge_if_long()

    def _merge_if_long(self) -> None:
        if len(self.spill) > _SPILL_MERGE_AT:
            partials = exact_partials([self.hi, self.lo, *self.spill])
            self.hi = partials[-1] if partials else 0.0
            self.lo = partials[-2] if len(partials) > 1 else 0.0
            self.spill = partials[:-2]

    def zero(self) -> None:
        super().zero()
        self.spill = []

    def clamp(self) -> None:
        if self.value < 0:
            self.zero()

    def ldexp(self, exponent: int) -> None:
        super().ldexp(exponent)
        self.spill = [math.ldexp(r, exponent) for r in self.spill]
