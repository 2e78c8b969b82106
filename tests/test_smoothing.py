"""The smoothing methods of model/smoothing/: each discount is its formula, a spec's discounts
compose in order, per-label totals equal a pass over the entries (pd's cache included), and the
spec grammar is read from the registry. A new method adds its formula to EXPECTED below."""
from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sgm.model import MNB
from sgm.model.smoothing import DiscountChain, registry
from sgm.model.smoothing.contract import Background, Discount, Mass
from sgm.model.smoothing.jelinek_mercer import JelinekMercer
from sgm.model.smoothing.power_law import PowerLawDiscount
from sgm.model.spec import BACKGROUNDS, KERNEL_AFFIXES, PARAMS, SMOOTHING, SpecError, parse_spec

ROOT = Path(__file__).resolve().parents[1]
DISCOUNTS = [m for m in registry.METHODS if issubclass(m, Discount)]

#: Each discount's formula written out, for a setting ``d`` and counts ``x``.
EXPECTED = {
    "jm": lambda x, d: d * x,
    "ad": lambda x, d: np.minimum(x, d),
    "pd": lambda x, d: np.minimum(x, d * x**d),
}
#: Each background's formula for collection masses ``m`` (total ``t``) and vocabulary ``v``, ups 0.3.
EXPECTED_BACKGROUND = {
    "u": lambda m, t, v: np.full(len(m), 1 / v),
    "c": lambda m, t, v: m / t,
    "uc": lambda m, t, v: 0.7 * m / t + 0.3 / v,
}


@pytest.mark.parametrize("method", DISCOUNTS, ids=lambda m: m.affix)
def test_each_discount_is_its_formula(method):
    x = np.array([0.0, 1e-3, 0.3, 1.0, 2.0, 4.0, 250.0])
    for setting in (0.1, 0.4, 0.9):
        np.testing.assert_array_equal(method(setting).discount(x, setting), EXPECTED[method.affix](x, setting))


@pytest.mark.parametrize("background", registry.BACKGROUNDS, ids=lambda b: b.affix)
def test_each_background_is_its_formula(background):
    mass = np.array([3.0, 1.0, 0.5])
    made = background(*[0.3 for _ in background.params])
    np.testing.assert_allclose(made.probability(mass, 4.5, 7), EXPECTED_BACKGROUND[background.affix](mass, 4.5, 7),
                               rtol=1e-15)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.0, 1e6, allow_nan=False), min_size=1, max_size=30), st.floats(0.01, 1.0))
def test_a_discount_never_exceeds_its_count(counts, setting):
    x = np.array(counts)
    for method in DISCOUNTS:
        discount = method(setting).discount(x, setting)
        assert (discount >= 0).all() and (discount <= x).all(), method.affix
        if method.linear:
            np.testing.assert_array_equal(discount, method(setting).discount(np.ones(1), setting)[0] * x)


def test_discounts_apply_in_order_each_to_what_the_earlier_left():
    x = np.array([0.0, 0.2, 1.0, 3.0, 40.0])
    chain = DiscountChain([JelinekMercer(0.3), PowerLawDiscount(0.6)])  # named in any order
    assert [d.affix for d in chain.discounts] == ["pd", "jm"]
    first = np.minimum(x, 0.6 * x**0.6)
    np.testing.assert_array_equal(chain.discount(x, (0.6, 0.3)), first + 0.3 * (x - first))
    np.testing.assert_array_equal(DiscountChain([]).discount(x, ()), np.zeros_like(x))


def learned(spec: str, **params) -> MNB:
    rng = np.random.default_rng(5)
    model = MNB(spec, half_life=50.0, **params)
    words = [f"w{i}" for i in range(60)]
    for i in range(120):
        doc = {w: float(rng.integers(1, 4)) for w in rng.choice(words, size=6, replace=False)}
        model.learn_one(doc, [f"c{i % 7}"], ts=float(i), id=str(i))
    return model


def generic_totals(model: MNB) -> np.ndarray:
    """``D(l)`` by the contract's pass over every entry (no cache)."""
    state, smoothing = model.state, model.labels.smoothing
    n, scale = state.classes.capacity, state.clock.scale()
    values = smoothing.values(state)
    return Discount.label_totals(smoothing.chain.discounts[0], state, scale, n, values, smoothing.chain)


@pytest.mark.parametrize("spec", ["u_pd", "u_pd_jm", "u_ad_jm", "c_ad"])
def test_label_totals_are_the_sum_over_entries(spec):
    model = learned(spec, delta=0.6, **({"beta": 0.3} if "jm" in spec else {}))
    state, smoothing = model.state, model.labels.smoothing
    n, scale = state.classes.capacity, state.clock.scale()
    mass = state.cls_mass.get(slice(0, n)) * scale
    totals = smoothing.label_totals(state, mass, scale, n, smoothing.values(state))
    # pd's cached c**delta is scaled as scale**delta * c**delta: equal up to rounding
    np.testing.assert_allclose(totals, generic_totals(model), rtol=1e-12)


def test_power_law_cache_gives_what_a_fresh_one_gives():
    """After updates the cached c**delta of unchanged entries is reused; the totals equal an empty cache's."""
    model = learned("u_pd_jm", beta=0.3, delta=0.6)
    state = model.state
    model.predict_one({"w1": 1.0})  # fills the cache
    for i in range(0, 120, 3):
        model.forget(str(i))
    model.learn_one({"w1": 2.0, "new": 1.0}, "c0", ts=200.0, id="late")
    n, scale = state.classes.capacity, state.clock.scale()
    mass = state.cls_mass.get(slice(0, n)) * scale
    used = model.labels.smoothing
    fresh = MNB("u_pd_jm", beta=0.3, delta=0.6).labels.smoothing
    values = used.values(state)
    np.testing.assert_array_equal(used.label_totals(state, mass, scale, n, values),
                                  fresh.label_totals(state, mass, scale, n, values))


def test_constant_smoothing_weight_only_without_mass_or_count_discount():
    assert MNB("u_jm", beta=0.3).labels.smoothing.constant_weight == 0.3
    for spec in ("u_dp", "u_jm_dp", "u_pd_jm", "u_ad"):
        assert MNB(spec).labels.smoothing.constant_weight is None, spec


def test_the_grammar_is_read_from_the_registry():
    assert SMOOTHING == tuple(m.affix for m in registry.METHODS)
    assert BACKGROUNDS == tuple(b.affix for b in registry.BACKGROUNDS)
    assert KERNEL_AFFIXES == tuple("k" + m.affix for m in registry.METHODS if m.kernel_params is not None)
    for method in registry.METHODS:
        spec = parse_spec(f"u_{method.affix}")
        assert spec.smoothing == (method.affix,)
        assert {p.name for p in method.params} == spec.free_params
        assert all(PARAMS[p.name] is p for p in method.params)
        assert issubclass(method, (Discount, Mass))
        if method.kernel_params is not None:
            tdm = parse_spec(f"tdm_u_jm_k{method.affix}")
            assert tdm.free_params == {"beta"} | {p.name for p in method.kernel_params}
            assert all(PARAMS[p.name] is p for p in method.kernel_params)
    for background in registry.BACKGROUNDS:
        assert issubclass(background, Background)
        assert parse_spec(f"{background.affix}_jm").free_params == {"beta"} | {p.name for p in background.params}
    slots: dict[str, list[str]] = {}
    for method in registry.METHODS:
        slots.setdefault(method.slot, []).append(method.affix)
    for members in slots.values():  # methods of one slot exclude each other
        for other in members[1:]:
            with pytest.raises(SpecError, match="more than one"):
                parse_spec(f"u_{members[0]}_{other}")


def test_only_the_registry_and_the_grammar_name_smoothing_methods():
    """No model module branches on a method's affix: they ask the smoothing objects."""
    names = set(SMOOTHING) | set(KERNEL_AFFIXES)
    allowed = {ROOT / "model" / "spec.py"}  # ModelSpec's jm/dp views for readers of the parsed fields
    found = []
    for path in sorted((ROOT / "model").rglob("*.py")):
        if path in allowed or (ROOT / "model" / "smoothing") in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in names:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert not found, "\n".join(found)
