"""Batch learning's fast paths: all-or-nothing interning and the no-decay clock."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from model import MNB
from model.decay import DecayClock
from model.state import Interner


def _docs(n: int, offset: int = 0) -> list[dict[str, int]]:
    return [{f"w{(i + offset) % 7}": 1 + i % 3, f"v{i + offset}": 2, "common": 1} for i in range(n)]


def test_a_non_string_term_leaves_the_model_as_if_never_seen():
    """A new term that is not a string fails the whole batch and changes nothing, term ids included."""
    def prefix() -> MNB:
        model = MNB("uc_pd_jm_dp")
        model.learn_many(_docs(12), [f"l{i % 3}" for i in range(12)], ids=[f"d{i}" for i in range(12)])
        for i in (2, 5, 7):  # their unique terms leave: freed ids that new terms reuse
            model.forget(f"d{i}")
        return model

    attempted, clean = prefix(), prefix()
    attempted.state.terms.changes = []  # a follower reads the change log: it must not see the failed terms
    clean.state.terms.changes = []
    before = attempted.checksum()
    bad = [{"fresh1": 1, "common": 2}, {"fresh2": 1, 3: 1}]
    with pytest.raises(TypeError, match="terms must be strings"):
        attempted.learn_many(bad, ["l0", "l1"], ids=["x1", "x2"])
    with pytest.raises(TypeError, match="terms must be strings"):
        attempted.learn_one({"fresh3": 1, ("t",): 1}, "l0", id="x3")
    assert attempted.checksum() == before
    for model in (attempted, clean):
        model.learn_many(_docs(6, offset=40), ["l1"] * 6, ids=[f"e{i}" for i in range(6)])
    assert attempted.checksum() == clean.checksum()
    assert attempted.state.terms.names == clean.state.terms.names
    assert attempted.state.terms.free == clean.state.terms.free
    assert attempted.state.terms.changes == clean.state.terms.changes


def test_interner_lookups_outside_a_batch_do_not_add():
    names = Interner()
    names.ids_of(["a", "b"])
    with pytest.raises(KeyError):
        names.ids["c"]
    assert names.names == ["a", "b"] and names.ids_of(["b", "c", "b"]).tolist() == [1, 2, 1]


stamps = st.lists(st.one_of(st.none(), st.floats(-1e6, 1e6)), max_size=12)


@settings(deadline=None)
@given(stamps, stamps)
def test_observe_all_equals_observing_one_by_one(earlier, batch):
    one_by_one, at_once = DecayClock(), DecayClock()
    for ts in earlier:
        one_by_one.observe(ts)
        at_once.observe(ts)
    expected = []
    for ts in batch:
        assert one_by_one.observe(ts) == 0
        expected.append(one_by_one.event_time(ts))
    assert at_once.observe_all(batch) == expected
    assert (at_once.now, at_once.origin) == (one_by_one.now, one_by_one.origin)


def test_a_non_string_term_is_refused_even_when_the_id_is_already_learned():
    model = MNB("uc_pd_jm_dp")
    model.learn_many([{"a": 1}], ["l0"], ids=["d1"])
    before = model.checksum()
    with pytest.raises(TypeError, match="terms must be strings"):
        model.learn_many([{"a": 1, 7: 1}], ["l0"], ids=["d1"])
    with pytest.raises(TypeError, match="terms must be strings"):
        model.learn_one({"a": 1, 7: 1}, "l0", id="d1")
    assert model.checksum() == before
