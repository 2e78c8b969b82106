"""Names given as bytes (``Interner.add_new_encoded``, the compiled lexicon's new terms) are built when first
asked for: the interner must behave as if they had been added as strings (``add_new``) at that point."""
import numpy as np
from hypothesis import given, settings, strategies as st

from sgm.model.interner import Interner, encoded_characters

NAMES = st.sampled_from(["spam", "eggs", "café", "a b", "x", "ünï", "\ud800", "bacon", "toast", "zz"])
STEPS = st.lists(st.tuples(st.sampled_from(["encoded", "strings", "add", "remove", "get", "look", "len", "names"]),
                           st.lists(NAMES, max_size=4), st.integers(0, 20)), max_size=30)


def _encoded(names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    parts = [name.encode("utf-8", "surrogatepass") for name in names]
    blob = np.frombuffer(b"".join(parts), dtype=np.uint8)
    starts = np.cumsum([0] + [len(p) for p in parts[:-1]]) if parts else np.zeros(0, dtype=np.int64)
    return blob, np.array([[s, len(p)] for s, p in zip(starts, parts)], dtype=np.int64).reshape(-1, 2)


@settings(deadline=None)
@given(STEPS)
def test_names_given_as_bytes_equal_names_given_as_strings(steps):
    lazy, eager = Interner(), Interner()
    lazy.changes, eager.changes = [], []
    for op, names, k in steps:
        if op in ("encoded", "strings"):
            new = [n for n in dict.fromkeys(names) if eager.get(n) is None]  # absent and distinct, as the lexicon's
            given_ids = lazy.add_new_encoded(*_encoded(new)) if op == "encoded" else lazy.add_new(new)
            assert given_ids.tolist() == eager.add_new(new).tolist()
        elif op == "add":
            for name in names:
                assert lazy.add(name) == eager.add(name)
        elif op == "remove":
            index = k % max(eager.capacity, 1)
            if index < eager.capacity:
                lazy.remove(index)
                eager.remove(index)
        elif op == "get":
            assert [lazy.get(n) for n in names] == [eager.get(n) for n in names]
        elif op == "look":
            assert lazy.ids_of(names).tolist() == eager.ids_of(names).tolist()
        # what needs no strings is right before they are built
        assert (len(lazy), lazy.capacity, lazy.version) == (len(eager), eager.capacity, eager.version)
        assert lazy.changes == eager.changes and lazy.free == eager.free
        if op == "names":  # the strings built, their dict entries not yet
            assert lazy.names == eager.names
        if op == "len":
            assert lazy.names == eager.names and lazy.ids == eager.ids
    assert lazy.names == eager.names and lazy.ids == eager.ids and lazy.free == eager.free


@given(st.lists(NAMES, max_size=6))
def test_encoded_characters_counts_as_len_does(names):
    blob, _ = _encoded(names)
    assert encoded_characters(blob) == sum(map(len, names))


@settings(deadline=None)
@given(st.lists(st.tuples(st.lists(NAMES, max_size=8), st.integers(0, 20)), max_size=12))
def test_ids_of_equals_adding_each_name_in_turn(batches):
    """``ids_of`` (one lookup pass, the new names' ids from their own table) gives every name the id that
    ``add`` one name at a time gives, lists the new names and their ids in first-seen order, and reuses
    freed ids as ``add`` does."""
    bulk, one_by_one = Interner(), Interner()
    for names, k in batches:
        if k % 3 == 0 and one_by_one.capacity:  # free an id now and then: new names take freed ids first
            index = k % one_by_one.capacity
            if one_by_one.names[index] is not None:
                bulk.remove(index)
                one_by_one.remove(index)
        before = set(one_by_one.ids)
        expected = [one_by_one.add(name) for name in names]
        added, added_ids = [], []
        assert bulk.ids_of(names, added, added_ids).tolist() == expected
        new = [name for name in dict.fromkeys(names) if name not in before]
        assert added == new
        assert added_ids == [one_by_one.get(name) for name in new]
        assert bulk.names == one_by_one.names and bulk.free == one_by_one.free


def test_ids_of_refuses_a_new_name_that_is_not_a_string_and_adds_nothing():
    names = Interner(["spam"])
    try:
        names.ids_of(["eggs", 7, "spam"])
    except TypeError:
        pass
    else:
        raise AssertionError("a non-string name was interned")
    assert names.names == ["spam"] and len(names) == 1
