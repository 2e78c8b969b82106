"""Gaussian random search of meta-parameters (MODEL.md section 9, thesis section 6.1.3).

Pure: the caller supplies the objective (higher is better) and the ranges;
nothing here knows about models or data.

The search keeps a set of best points. Each iteration draws ``points`` new
points, point ``q`` being best point ``q % X`` plus a Gaussian step, clipped to
the ranges; all of an iteration's points are independent, so they can be
evaluated in parallel (``map_fn``). The step's standard deviation starts at
half of each range and is multiplied by ``shrink`` (0.9) after every
iteration: wide sampling first, local search at the end. A new point replaces
the best set when it is at least as good ("good or better", so the search
keeps moving on a plateau); when several points tie for the best, up to
``spread`` (X) of them are kept and the next iteration's steps start from
them in turn. "40x40" means 40 iterations of 40 points.

A parameter on a log scale (``mu``, a mass spanning orders of magnitude) is
searched in log space: its range, steps and clipping use ``log(value)``.

Determinism: all random steps come from one ``numpy`` generator seeded by
``seed``, drawn in the calling process before evaluation, so the result does
not depend on how (or in how many processes) points are evaluated, only on
the objective's values.

Examples
--------
>>> dims = [Dimension("x", -5.0, 5.0), Dimension("y", 0.01, 100.0, log_scale=True)]
>>> def objective(point):  # best at x = 1, y = 10
...     return -(point["x"] - 1) ** 2 - (math.log10(point["y"]) - 1) ** 2
>>> result = gaussian_random_search(objective, dims, start={"x": 0.0, "y": 1.0}, iterations=30, points=8, seed=1)
>>> round(result.best_point["x"], 1), round(result.best_point["y"])
(1.0, 10)
>>> result.best_score > result.start_score
True
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

#: Significant digits kept in every evaluated value (configs and command lines stay readable and
#: reproduce exactly the evaluated point).
SIGNIFICANT_DIGITS = 6


@dataclass(frozen=True)
class Dimension:
    """One searched parameter: its name and inclusive range.

    >>> Dimension("mu", 0.1, 1000.0, log_scale=True).to_internal(10.0) == math.log(10.0)
    True
    """

    name: str
    low: float
    high: float
    log_scale: bool = False

    def __post_init__(self) -> None:
        if not (math.isfinite(self.low) and math.isfinite(self.high) and self.low <= self.high):
            raise ValueError(f"{self.name}: need finite low <= high, got [{self.low}, {self.high}]")
        if self.log_scale and self.low <= 0:
            raise ValueError(f"{self.name}: a log-scale range must be positive, got low={self.low}")

    def to_internal(self, value: float) -> float:
        return math.log(value) if self.log_scale else float(value)

    def from_internal(self, value: float) -> float:
        real = math.exp(value) if self.log_scale else float(value)
        return min(max(_round(real), self.low), self.high)

    @property
    def internal_low(self) -> float:
        return self.to_internal(self.low)

    @property
    def internal_high(self) -> float:
        return self.to_internal(self.high)


def _round(value: float) -> float:
    if value == 0 or not math.isfinite(value):
        return value
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}")


def dimensions_for(names: Iterable[str], ranges: Mapping[str, tuple[float, float]] | None = None) -> list[Dimension]:
    """Dimensions of model parameters from their tuning ranges in :data:`model.spec.PARAMS`.

    ``ranges`` overrides a parameter's ``(low, high)``.

    >>> [(d.name, d.low, d.high, d.log_scale) for d in dimensions_for(["mu", "theta"])]
    [('mu', 0.1, 10000.0, True), ('theta', 0.0, 2.0, False)]
    """
    from sgm.model.spec import PARAMS, SpecError  # local: the search itself needs no model

    dims = []
    for name in names:
        if name not in PARAMS:
            raise SpecError(f"unknown parameter {name!r}; known: {sorted(PARAMS)}")
        info = PARAMS[name]
        low, high = (ranges or {}).get(name, (info.tune_low, info.tune_high))
        dims.append(Dimension(name, float(low), float(high), info.log_scale))
    return dims


@dataclass(frozen=True)
class Trial:
    """One evaluated point; ``iteration`` 0 is the start point."""

    iteration: int
    point: dict[str, float]
    score: float


@dataclass
class SearchResult:
    """What a search found, and every point it evaluated (in evaluation order)."""

    best_point: dict[str, float]
    best_score: float
    start_point: dict[str, float]
    start_score: float
    best_points: list[dict[str, float]]
    trials: list[Trial] = field(default_factory=list)

    @property
    def evaluations(self) -> int:
        return len(self.trials)

    def to_dict(self) -> dict[str, Any]:
        return {
            "best_point": self.best_point,
            "best_score": self.best_score,
            "start_point": self.start_point,
            "start_score": self.start_score,
            "best_points": self.best_points,
            "trials": [{"iteration": t.iteration, "point": t.point, "score": t.score} for t in self.trials],
        }


def _score(value: Any) -> float:
    """Objective values as floats; NaN and None (a failed point) rank below everything."""
    if value is None:
        return -math.inf
    number = float(value)
    return -math.inf if math.isnan(number) else number


def gaussian_random_search(
    objective: Callable[[dict[str, float]], float],
    dimensions: Sequence[Dimension],
    start: Mapping[str, float] | None = None,
    iterations: int = 40,
    points: int = 40,
    spread: int = 4,
    shrink: float = 0.9,
    seed: int = 0,
    map_fn: Callable[[Callable, list], Iterable[float]] = map,
    on_iteration: Callable[[int, "SearchResult"], None] | None = None,
) -> SearchResult:
    """Maximize ``objective`` over the box ``dimensions`` (see module docstring).

    Parameters
    ----------
    objective : callable
        ``objective(point) -> float`` with ``point`` a dict name -> value;
        higher is better. Must be picklable if ``map_fn`` runs it elsewhere.
    dimensions : sequence of Dimension
        The searched parameters and their ranges.
    start : mapping, optional
        The first point (clipped to the ranges); default the middle of each
        range (in log space for log-scale parameters). It is evaluated first
        and reported as ``start_score``.
    iterations, points : int
        ``iterations`` rounds of ``points`` evaluations each ("40x40").
    spread : int
        X: how many tied best points the search keeps and steps from.
    shrink : float
        Factor applied to the step standard deviation after each iteration.
    seed : int
        Seed of the random steps.
    map_fn : callable
        ``map_fn(objective, list_of_points)`` returning the scores in order;
        e.g. ``multiprocessing.Pool.map`` for parallel evaluation.
    on_iteration : callable, optional
        Called as ``on_iteration(iteration, result_so_far)`` after each iteration.

    Returns
    -------
    SearchResult

    Examples
    --------
    >>> result = gaussian_random_search(lambda p: -abs(p["a"] - 0.3), [Dimension("a", 0.0, 1.0)],
    ...                                 iterations=5, points=4, seed=0)
    >>> result.evaluations, 0.0 <= result.best_point["a"] <= 1.0
    (21, True)
    """
    if iterations < 0 or points < 1 or spread < 1:
        raise ValueError("need iterations >= 0, points >= 1 and spread >= 1")
    if not 0 < shrink <= 1:
        raise ValueError("shrink must be in (0, 1]")
    names = [d.name for d in dimensions]
    if len(set(names)) != len(names):
        raise ValueError(f"repeated dimension names in {names}")
    low = np.array([d.internal_low for d in dimensions])
    high = np.array([d.internal_high for d in dimensions])
    std = 0.5 * (high - low)
    rng = np.random.default_rng(seed)

    def to_point(internal: np.ndarray) -> dict[str, float]:
        return {d.name: d.from_internal(float(v)) for d, v in zip(dimensions, internal)}

    def to_internal(point: Mapping[str, float]) -> np.ndarray:
        return np.array([d.to_internal(point[d.name]) for d in dimensions])

    if start is None:
        start_internal = (low + high) / 2.0
    else:
        missing = [n for n in names if n not in start]
        if missing:
            raise ValueError(f"start point lacks {missing}")
        clipped = {d.name: min(max(float(start[d.name]), d.low), d.high) for d in dimensions}
        start_internal = to_internal(clipped)
    start_point = to_point(start_internal)

    # Points are keyed by their rounded values: a clipped step often lands on a point already
    # evaluated (a range bound), and re-evaluating a deterministic objective only costs time.
    known: dict[tuple, float] = {}
    trials: list[Trial] = []

    def evaluate(batch: list[dict[str, float]], iteration: int) -> list[float]:
        keys = [tuple(p[n] for n in names) for p in batch]
        todo: dict[tuple, dict[str, float]] = {}
        for key, point in zip(keys, batch):
            if key not in known and key not in todo:
                todo[key] = point
        for key, value in zip(todo, map_fn(objective, list(todo.values()))):
            known[key] = _score(value)
        scores = [known[key] for key in keys]
        trials.extend(Trial(iteration, dict(p), s) for p, s in zip(batch, scores))
        return scores

    start_score = evaluate([start_point], 0)[0]
    best_points = [start_point]
    best_score = start_score
    result = SearchResult(start_point, start_score, start_point, start_score, [start_point], trials)
    for iteration in range(1, iterations + 1):
        steps = rng.standard_normal((points, len(dimensions))) * std
        bases = np.array([to_internal(best_points[q % len(best_points)]) for q in range(points)])
        candidates = [to_point(np.clip(base + step, low, high)) for base, step in zip(bases, steps)]
        scores = evaluate(candidates, iteration)
        top = max(scores)
        if top >= best_score:
            tied = _unique([c for c, s in zip(candidates, scores) if s == top])
            if top == best_score:  # a plateau: new points first, so the search moves on
                tied = _unique(tied + best_points)
            best_points, best_score = tied[:spread], top
        std = std * shrink
        result = SearchResult(best_points[0], best_score, start_point, start_score, list(best_points), trials)
        if on_iteration is not None:
            on_iteration(iteration, result)
    return result


def _unique(points: list[dict[str, float]]) -> list[dict[str, float]]:
    seen, out = set(), []
    for point in points:
        key = tuple(sorted(point.items()))
        if key not in seen:
            seen.add(key)
            out.append(point)
    return out
