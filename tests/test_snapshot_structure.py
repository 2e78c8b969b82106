"""A crafted snapshot whose hashes are right but whose index structures point out of range is refused on load.

The content hash and the state checksum can be recomputed by whoever writes
the file (tests/test_safety.py), and the checksum covers the model's content,
not its layout: the term arena, the free lists and the documents' id arrays.
The compiled loops index those without bounds checks, so an out-of-range value
there used to load fine and then crash the process with SIGSEGV at the first
scoring (arena classes or slots), or escape ``load`` as an ``IndexError`` /
``OverflowError`` instead of a :class:`SnapshotError` (``sgm serve`` then
printed a traceback instead of "refusing to start"). Derived counts outside
the checksum (entries per class, the vocabulary size V of the uniform
background, the arena's garbage) loaded too, and then failed an assertion at
the next learn or forget, or changed every score silently (V). Each case
below was one of those; every one is now a :class:`SnapshotError`.
"""
from __future__ import annotations

import io

import numpy as np
import pytest

from sgm.model import build_model
from sgm.model.persistence import SnapshotError, loads
from tests.test_safety import archive_of, members_of

CONFIGS = {"mnb": {"model": "uc_pd_jm_dp", "params": {"beta": 0.3, "mu": 20.0, "delta": 0.5, "ups": 0.2}},
           "tdm": {"model": "tdm_uc_jm_dp_kpd_kdp", "params": {}}}


def snapshot(kind: str) -> bytes:
    """A model that has scored (its arena copies counts), with a freed document, entry, class and term."""
    model = build_model(CONFIGS[kind])
    model.learn_many(["cheap pills now", "meeting at noon", "win cash prize", "lunch at noon"],
                     [["spam"], ["work"], ["spam"], ["ham"]], ids=["a", "b", "c", "d"])
    model.forget("d")
    model.predict_log_proba_many(["cheap meeting", "new words"])
    return model.to_bytes({"train_offsets": {"0": 4}})


def replaced(data: bytes, name: str, change) -> bytes:
    meta, arrays = members_of(data)
    array = np.load(io.BytesIO(arrays[name]))
    out = io.BytesIO()
    np.save(out, np.ascontiguousarray(change(array)))
    return archive_of(meta, dict(arrays, **{name: out.getvalue()}))


def biggest(array: np.ndarray) -> np.ndarray:
    return np.full_like(array, np.iinfo(array.dtype).max)


CASES = {
    "arena_cls": [lambda a: a[:0], biggest, lambda a: np.full_like(a, -1)],  # SIGSEGV at scoring (first two)
    "arena_slot": [biggest, lambda a: np.full_like(a, -1)],
    "arena_start": [lambda a: np.full_like(a, -1)],
    "arena_length": [lambda a: np.full_like(a, -1), lambda a: np.where(a > 0, a + 1, a)],
    "class_free": [biggest],  # IndexError at the next new class
    "term_free": [biggest],  # SIGABRT / SIGSEGV at the next new term
    "ent_free": [lambda a: np.full_like(a, -1), lambda a: np.concatenate([a, a[-1:]])],  # AssertionError at use
    "cls_entries": [lambda a: a + 1],  # AssertionError at use
    "doc_classes": [biggest],  # IndexError out of load
    "doc_terms": [biggest],  # IndexError out of load
    "doc_seq": [lambda a: np.full_like(a, -1)],  # OverflowError out of load
}


def header_scalar(name: str, value: int):
    def change(data: bytes) -> bytes:
        meta, arrays = members_of(data)
        return archive_of(dict(meta, scalars=dict(meta["scalars"], **{name: value})), arrays)
    return change


HEADER_CASES = [header_scalar("n_vocab", 10**30), header_scalar("n_vocab", 1),  # OverflowError at use / other scores
                header_scalar("arena_garbage", 10**30), header_scalar("arena_garbage", -1)]


@pytest.mark.parametrize("kind", sorted(CONFIGS))
def test_out_of_range_structures_are_refused_on_load(kind):
    data = snapshot(kind)
    loads(data)  # the untouched snapshot is the baseline
    for name, changes in CASES.items():
        for number, change in enumerate(changes):
            crafted = replaced(data, name, change)
            with pytest.raises(SnapshotError):
                loads(crafted)
                pytest.fail(f"{kind}: {name} change {number} was loaded")
    for number, change in enumerate(HEADER_CASES):
        with pytest.raises(SnapshotError):
            loads(change(data))
            pytest.fail(f"{kind}: header change {number} was loaded")
