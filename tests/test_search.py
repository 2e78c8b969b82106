"""The Gaussian random search: determinism, improvement, ranges, log scale, ties."""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import pytest

from sgm.consumers.evaluation.search import Dimension, dimensions_for, gaussian_random_search
from sgm.model.spec import PARAMS, SpecError

DIMS = [Dimension("a", -2.0, 3.0), Dimension("b", 0.0, 1.0), Dimension("mu", 0.01, 1e4, log_scale=True)]


def bumpy(point):
    """Best at a = 1.3, b = 0.2, mu = 50 (in log space), with ripples (local optima)."""
    return -((point["a"] - 1.3) ** 2) - 4 * (point["b"] - 0.2) ** 2 - (math.log10(point["mu"]) - math.log10(50)) ** 2 \
        + 0.05 * math.cos(20 * point["a"])


def test_deterministic_by_seed_and_independent_of_map():
    first = gaussian_random_search(bumpy, DIMS, iterations=8, points=6, seed=11)
    again = gaussian_random_search(bumpy, DIMS, iterations=8, points=6, seed=11)
    with ThreadPoolExecutor(3) as pool:  # parallel evaluation must not change the result
        parallel = gaussian_random_search(bumpy, DIMS, iterations=8, points=6, seed=11, map_fn=pool.map)
    other = gaussian_random_search(bumpy, DIMS, iterations=8, points=6, seed=12)
    assert first.best_point == again.best_point == parallel.best_point
    assert [t.point for t in first.trials] == [t.point for t in parallel.trials]
    assert [t.point for t in first.trials] != [t.point for t in other.trials]


def test_improves_on_a_toy_objective():
    start = {"a": -2.0, "b": 1.0, "mu": 0.01}
    result = gaussian_random_search(bumpy, DIMS, start=start, iterations=25, points=12, seed=0)
    assert result.start_score == pytest.approx(bumpy(start))
    assert result.best_score > result.start_score + 10
    assert abs(result.best_point["a"] - 1.3) < 0.25
    assert abs(result.best_point["b"] - 0.2) < 0.1
    assert abs(math.log10(result.best_point["mu"]) - math.log10(50)) < 0.5
    assert result.best_score == max(t.score for t in result.trials)


def test_respects_ranges_even_when_the_optimum_is_outside():
    def wants_far_away(point):
        return point["a"] + point["b"] - point["mu"]

    result = gaussian_random_search(wants_far_away, DIMS, iterations=10, points=10, seed=2)
    for trial in result.trials:
        assert -2.0 <= trial.point["a"] <= 3.0
        assert 0.0 <= trial.point["b"] <= 1.0
        assert 0.01 <= trial.point["mu"] <= 1e4
    assert result.best_point["a"] == 3.0 and result.best_point["b"] == 1.0 and result.best_point["mu"] == 0.01


def test_log_scale_samples_orders_of_magnitude():
    """In log space the first iteration's steps spread mu over decades, not mostly near the top."""
    result = gaussian_random_search(lambda p: 0.0, [DIMS[2]], start={"mu": 1.0}, iterations=1, points=200, seed=4)
    values = [t.point["mu"] for t in result.trials[1:]]
    assert sum(v < 0.1 for v in values) > 20 and sum(v > 10 for v in values) > 20


def test_start_point_is_the_default_and_counted():
    result = gaussian_random_search(bumpy, DIMS, iterations=2, points=3, seed=0)
    assert result.trials[0].iteration == 0
    assert result.start_point["b"] == 0.5  # middle of the range when no start is given
    assert result.start_point["mu"] == pytest.approx(10.0)  # middle of [0.01, 1e4] in log space
    assert result.evaluations == 1 + 2 * 3


def test_ties_spread_over_several_best_points():
    """On a plateau the best set holds up to `spread` tied points and steps alternate between them."""
    flat = gaussian_random_search(lambda p: 1.0, [Dimension("x", 0.0, 1.0)], iterations=3, points=5, spread=3, seed=0)
    assert len(flat.best_points) == 3
    assert len({p["x"] for p in flat.best_points}) == 3
    # a strictly better point replaces the whole set
    best = gaussian_random_search(lambda p: -abs(p["x"] - 0.5), [Dimension("x", 0.0, 1.0)], start={"x": 0.0},
                                  iterations=3, points=5, spread=3, seed=0)
    assert len(best.best_points) == 1


def test_failed_points_rank_last_and_repeated_points_are_not_reevaluated():
    calls = []

    def objective(point):
        calls.append(point["x"])
        return float("nan") if point["x"] > 0.5 else point["x"]

    # a tiny range makes clipped points repeat
    result = gaussian_random_search(objective, [Dimension("x", 0.0, 1.0)], start={"x": 0.0}, iterations=6, points=6,
                                    seed=1)
    assert result.best_point["x"] <= 0.5
    assert len(calls) == len(set(calls))


def test_dimensions_for_model_parameters():
    dims = {d.name: d for d in dimensions_for(["mu", "beta", "phi"], {"phi": (0.0, 1.0)})}
    assert dims["mu"].log_scale and dims["mu"].low == PARAMS["mu"].tune_low
    assert (dims["beta"].low, dims["beta"].high) == (PARAMS["beta"].tune_low, PARAMS["beta"].tune_high)
    assert (dims["phi"].low, dims["phi"].high) == (0.0, 1.0)
    with pytest.raises(SpecError):
        dimensions_for(["no_such_number"])  # (gamma was unknown until the fw affix named it)
    with pytest.raises(ValueError):
        Dimension("mu", 0.0, 1.0, log_scale=True)
