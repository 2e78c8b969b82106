"""Snapshot and restore of a whole model, in a safe, versioned format (not pickle).

A snapshot is a ZIP archive (stored, not compressed) holding ``meta.json``
and one ``.npy`` file per array. Loading parses JSON and reads arrays with
``allow_pickle=False``, so a snapshot can never execute code; sizes, dtypes,
shapes and a SHA-256 of the content are checked before anything is built, and
a damaged or oversized snapshot raises :class:`SnapshotError`.

The snapshot keeps the internal layout (slots, ids, free lists, the term
arena), so a restored model computes bit for bit what the original would and
keeps learning. :func:`state_checksum` is different: it hashes the model's
*content* in a canonical order (classes, terms, entries and documents sorted
by name), so two models that learned the same documents in the same order
agree even if their internal layouts differ (e.g. one was restored midway).

A model made of models (:class:`model.ensemble.Ensemble`) writes a snapshot of
another format, :data:`COMPOSITE_FORMAT`: the same kind of archive, whose
``meta.json`` names its configuration and the extra metadata, and which holds
one member per part, each a snapshot of this format. :func:`load` reads both
and hands a composite one to its family's ``load_parts`` (found by name).

A model family with state beyond the :class:`model.state.CountState` and its
configuration hands it over as an :class:`ExtraState` (its ``extra_state()`` /
``restore_extra_state()``): JSON-able options, and arrays holding one value per
live document. The snapshot stores both; the checksum covers both.

This module only converts to and from bytes; writing files atomically and
recording Kafka offsets belongs to :mod:`stream.snapshot_store`. It builds models
through :mod:`model.factory` and never imports a model family.
"""
from __future__ import annotations

import hashlib
import io
import json
import math
import zipfile
from typing import Any, BinaryIO, NamedTuple

import numpy as np

from .decay import DecayClock
from .factory import build_model, family_class, model_config
from .arena import TermArena
from .arrays import CompensatedArray, ExactArray, ExactSum, canonical_expansion
from .interner import Interner
from .state import CountState, DocRecord

FORMAT = "sgm-model-snapshot"
#: The format of a snapshot made of model snapshots (see the module docstring).
COMPOSITE_FORMAT = "sgm-ensemble-snapshot"
VERSION = 1
#: Default ceiling on a snapshot's size (bytes); larger ones are refused.
DEFAULT_MAX_BYTES = 8 * 1024**3

_ALLOWED_DTYPES = {"<f8", "<i8", "<i4", "|u1", "|b1"}
#: Compensated sums of CountState and what they are indexed by (stored as hi and ``_lo`` arrays).
COMPENSATED = {"cls_docs": "class", "cls_mass": "class", "term_mass": "term", "term_df": "term", "ent_count": "entry"}
#: Those that are exact sums (:class:`model.arrays.ExactArray`): their rare residuals travel in the header.
EXACT = ("cls_docs", "cls_mass", "term_mass", "term_df")
TOTALS = ("total_mass", "total_docs", "class_docs_total")


#: The name prefix of a family's per-term arrays in a snapshot (:attr:`ExtraState.per_term`).
PER_TERM = "per_term_"
#: Every array a snapshot holds for the CountState; any other array belongs to the family's extra state.
STATE_ARRAYS = frozenset(
    ["class_names", "class_name_lengths", "class_free", "term_names", "term_name_lengths", "term_free", "ent_free",
     "arena_slot", "arena_cls", "arena_start", "arena_length", "arena_capacity", "doc_ids", "doc_id_lengths",
     "doc_classes", "doc_class_counts", "doc_terms", "doc_term_counts", "doc_weights", "doc_raw", "doc_factor",
     "doc_ts", "doc_seq", "cls_refs", "cls_entries", "term_refs", "term_raw", "ent_class", "ent_term", "ent_refs"]
    + [name + suffix for name in COMPENSATED for suffix in ("", "_lo")])

#: A model; anything with ``state``, ``config()``, ``extra_state()`` and ``restore_extra_state()``
#: (:class:`model.base.GenerativeTextModel`, which imports this module).
Model = Any


class SnapshotError(ValueError):
    """A snapshot is corrupt, oversized, of an unknown format, or inconsistent."""


class ExtraState(NamedTuple):
    """What a model family keeps beyond the CountState and its configuration.

    ``meta`` holds JSON-able options (the checksum reads its values in order);
    ``per_document`` holds 1-D arrays with one value per live document, in the
    state's document order (the checksum reads them in document-id order);
    ``per_term`` 1-D arrays with one value per term id (free ids too: ids are
    restored as they were), read by the checksum in term-name order of the live terms.
    """

    meta: dict[str, Any]
    per_document: dict[str, np.ndarray]
    per_term: dict[str, np.ndarray] = {}


# ------------------------------------------------------------------ helpers
def zip_member(name: str) -> zipfile.ZipInfo:
    """A snapshot's archive entry: stored, with a fixed date (1980-01-01, the earliest a ZIP holds), so that a model's
    snapshot bytes depend on the model alone, not on the clock when it was written (two replicas of one state, or
    one state written twice, give the same file).

    >>> zip_member("meta.json").date_time
    (1980, 1, 1, 0, 0, 0)
    """
    member = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    member.external_attr = 0o600 << 16  # as ZipFile.writestr gives a name
    return member


def _pack_strings(names: list[str | None]) -> tuple[np.ndarray, np.ndarray]:
    """Strings (``None`` allowed) as one UTF-8 blob and offsets; ``None`` has offset -1 length."""
    encoded = [b"" if n is None else n.encode("utf-8") for n in names]
    lengths = np.array([-1 if n is None else len(e) for n, e in zip(names, encoded)], dtype=np.int64)
    blob = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    return blob, lengths


def _unpack_strings(blob: np.ndarray, lengths: np.ndarray) -> list[str | None]:
    raw = blob.tobytes()
    out: list[str | None] = []
    at = 0
    for length in lengths.tolist():
        if length < 0:
            out.append(None)
            continue
        out.append(raw[at : at + length].decode("utf-8"))
        at += length
    if at != len(raw):
        raise SnapshotError("string table does not add up")
    return out


def _flatten(parts: list[np.ndarray], dtype) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.array([len(p) for p in parts], dtype=np.int64)
    flat = np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype=dtype)
    return flat, lengths


def _split(flat: np.ndarray, lengths: np.ndarray) -> list[np.ndarray]:
    if lengths.sum() != len(flat):
        raise SnapshotError("ragged array does not add up")
    return np.split(flat, np.cumsum(lengths)[:-1]) if len(lengths) else []


class _HashingWriter:
    """A write-only file object that feeds a hash with everything written through it."""

    def __init__(self, target: BinaryIO, digest: Any) -> None:
        self.target, self.digest = target, digest

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        return self.target.write(data)


# ------------------------------------------------------------------ encode
def dumps(model: Model, extra: dict[str, Any] | None = None) -> bytes:
    """Serialize ``model`` (and JSON-able ``extra`` metadata, e.g. offsets) to bytes."""
    out = io.BytesIO()
    dump(model, out, extra)
    return out.getvalue()


def dump(model: Model, handle: BinaryIO, extra: dict[str, Any] | None = None) -> None:
    """Write the snapshot of ``model`` to a seekable binary ``handle``: the same bytes as :func:`dumps`.

    Each array is built only when its turn comes and is streamed into its
    archive member, so besides the model the transient memory is one array
    (the largest: the documents' term ids), not the snapshot.
    """
    state = model.state
    n_cls, n_terms, used = state.classes.capacity, state.terms.capacity, state.ent_used
    arena = state.arena
    records = list(state.docs.values())
    doc_ids = list(state.docs)
    packed: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def strings(key: str, names: list[str | None], part: int) -> np.ndarray:
        # blob and lengths come from one encoding pass; the lengths are written first (sorted names)
        if key not in packed:
            packed[key] = _pack_strings(names)
        return packed.pop(key)[0] if part == 0 else packed[key][1]

    # name -> how to build the array (called once, when it is written)
    builders: dict[str, Any] = {
        "class_names": lambda: strings("class", state.classes.names, 0),
        "class_name_lengths": lambda: strings("class", state.classes.names, 1),
        "class_free": lambda: np.array(state.classes.free, dtype=np.int64),
        "term_names": lambda: strings("term", state.terms.names, 0),
        "term_name_lengths": lambda: strings("term", state.terms.names, 1),
        "term_free": lambda: np.array(state.terms.free, dtype=np.int64),
        "ent_free": lambda: state.free_stack[: state.free_top],
        "arena_slot": lambda: arena.slot[: arena.used],
        "arena_cls": lambda: arena.cls[: arena.used],
        "doc_ids": lambda: strings("doc", doc_ids, 0),
        "doc_id_lengths": lambda: strings("doc", doc_ids, 1),
        "doc_classes": lambda: _flatten([np.array(r.classes, dtype=np.int64) for r in records], np.int64)[0],
        "doc_class_counts": lambda: np.array([len(r.classes) for r in records], dtype=np.int64),
        "doc_terms": lambda: _flatten([r.terms for r in records], np.int64)[0],
        "doc_term_counts": lambda: np.array([len(r.terms) for r in records], dtype=np.int64),
        "doc_weights": lambda: _flatten([r.weights for r in records], np.float64)[0],
        "doc_raw": lambda: _flatten([r.raw for r in records], np.float64)[0],
        "doc_factor": lambda: np.array([r.factor for r in records], dtype=np.float64),
        "doc_ts": lambda: np.array([r.ts for r in records], dtype=np.float64),
        "doc_seq": lambda: np.array([r.seq for r in records], dtype=np.int64),
    }
    for name, size in (("cls_refs", n_cls), ("cls_entries", n_cls), ("term_refs", n_terms), ("term_raw", n_terms),
                       ("ent_class", used), ("ent_term", used), ("ent_refs", used)):
        builders[name] = (lambda name=name, size=size: getattr(state, name)[:size])
    for name, size in COMPENSATED.items():
        limit = {"class": n_cls, "term": n_terms, "entry": used}[size]
        builders[name] = (lambda name=name, limit=limit: getattr(state, name).hi[:limit])
        builders[name + "_lo"] = (lambda name=name, limit=limit: getattr(state, name).lo[:limit])
    for name in ("start", "length", "capacity"):
        builders[f"arena_{name}"] = (lambda name=name: getattr(arena, name)[:n_terms])
    assert set(builders) == STATE_ARRAYS
    extra_state = model.extra_state()
    for name, array in [*extra_state.per_document.items(),
                        *((PER_TERM + name, array) for name, array in extra_state.per_term.items())]:
        if name in builders:
            raise ValueError(f"extra state array {name!r} clashes with a state array")
        builders[name] = (lambda array=array: array)
    scalars = {
        name: getattr(state, name)
        for name in ("n_docs", "n_vocab", "n1", "n2", "seq", "ent_used", "pruned_documents", "pruned_entries",
                     "expired_documents", "class_version")
    }
    for name in TOTALS:
        total = getattr(state, name)
        scalars[name] = [total.hi, total.lo]
    residuals = _residuals(state)
    if residuals:  # absent when there are none: the header (and the checksum) as before
        scalars["residuals"] = residuals
    scalars.update(arena_used=arena.used, arena_garbage=arena.garbage)
    names = sorted(builders)
    digest = hashlib.sha256()
    with zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_STORED) as archive:
        for name in names:
            array = np.ascontiguousarray(builders.pop(name)())
            digest.update(name.encode())
            with archive.open(zip_member(f"{name}.npy"), "w", force_zip64=array.nbytes + 4096 >= zipfile.ZIP64_LIMIT) as member:
                # np.save's bytes, written in pieces straight into the member (and the content hash)
                np.lib.format.write_array(_HashingWriter(member, digest), array, allow_pickle=False)
            del array
        meta = {
            "format": FORMAT,
            "version": VERSION,
            "config": model_config(model),
            "clock": state.clock.to_dict(),
            "scalars": scalars,
            "model_extra": extra_state.meta,
            "extra": extra or {},
            "arrays": names,
            "content_sha256": digest.hexdigest(),
            "state_checksum": state_checksum(model),
        }
        archive.writestr(zip_member("meta.json"), json.dumps(meta, sort_keys=True, allow_nan=True))  # last: the hash


# ------------------------------------------------------------------ decode
def read_meta(data: bytes | BinaryIO, *, max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, Any]:
    """The header of a snapshot (format, config, extra metadata) without building the model."""
    return _open(data, max_bytes)[1]


def _open(data: bytes | BinaryIO, max_bytes: int) -> tuple[zipfile.ZipFile, dict[str, Any]]:
    """The archive and its header; ``data`` is the snapshot's bytes or a seekable binary file holding them."""
    handle = io.BytesIO(data) if isinstance(data, (bytes, bytearray, memoryview)) else data
    try:
        size = handle.seek(0, io.SEEK_END)
        handle.seek(0)
    except (OSError, ValueError) as exc:
        raise SnapshotError(f"snapshot unreadable: {exc}") from None
    if size > max_bytes:
        raise SnapshotError(f"snapshot is {size} bytes, above the {max_bytes}-byte limit")
    try:
        archive = zipfile.ZipFile(handle)
        infos = archive.infolist()
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise SnapshotError(f"not a snapshot archive: {exc}") from None
    if infos and min(i.header_offset for i in infos) != 0:
        # bytes before the archive: not a file the writers here made, e.g. a truncated ensemble snapshot
        # whose last complete part (itself an archive) zipfile would otherwise find and read as the whole
        raise SnapshotError("not a snapshot archive: data before its first member (truncated?)")
    if sum(i.file_size for i in infos) > max_bytes:
        raise SnapshotError("snapshot content exceeds the size limit")
    if any(i.compress_type != zipfile.ZIP_STORED or i.compress_size != i.file_size for i in infos):
        # dumps() stores every member uncompressed; refusing compression rules out zip bombs
        # (zipfile would inflate a member in one piece before checking its declared size).
        raise SnapshotError("snapshot members must be stored uncompressed")
    try:
        meta = json.loads(archive.read("meta.json"))
    except (KeyError, ValueError, zipfile.BadZipFile, OSError) as exc:
        raise SnapshotError(f"snapshot header unreadable: {exc}") from None
    except RecursionError:
        raise SnapshotError("snapshot header unreadable: nested too deeply") from None
    if not isinstance(meta, dict) or meta.get("format") not in (FORMAT, COMPOSITE_FORMAT):
        raise SnapshotError("not an sgm model snapshot")
    if meta.get("version") != VERSION:
        raise SnapshotError(f"snapshot version {meta.get('version')!r} is not supported (this build reads {VERSION})")
    for key, kind in (("arrays", list), ("config", dict), ("clock", dict), ("scalars", dict), ("extra", dict)):
        if not isinstance(meta.get(key, kind()), kind):
            raise SnapshotError(f"snapshot header field {key!r} is not a JSON {kind.__name__}")
    if not all(isinstance(name, str) for name in meta.get("arrays", [])):
        raise SnapshotError("snapshot header names an array by something else than a string")
    return archive, meta


def loads(data: bytes, *, max_bytes: int = DEFAULT_MAX_BYTES) -> tuple[Model, dict[str, Any]]:
    """Rebuild a model from :func:`dumps` output; returns ``(model, extra)``."""
    return load(io.BytesIO(data), max_bytes=max_bytes)


def load(handle: BinaryIO, *, max_bytes: int = DEFAULT_MAX_BYTES) -> tuple[Model, dict[str, Any]]:
    """:func:`loads` from a seekable binary file: one array is read at a time, never the whole snapshot.

    A restore then holds the model being rebuilt plus one member's bytes, not
    also a copy of the file (docs/RELIABILITY.md, "Bounded memory").
    """
    archive, meta = _open(handle, max_bytes)
    if meta["format"] == COMPOSITE_FORMAT:
        try:
            return family_class(str(meta.get("config", {}).get("model"))).load_parts(archive, meta, max_bytes)
        except SnapshotError:
            raise
        except (KeyError, IndexError, ValueError, TypeError, AttributeError, OverflowError, RecursionError,
                zipfile.BadZipFile, OSError) as exc:
            raise SnapshotError(f"snapshot is inconsistent: {exc!r}") from None
    digest = hashlib.sha256()
    arrays: dict[str, np.ndarray] = {}
    try:
        for name in meta["arrays"]:
            raw = archive.read(f"{name}.npy")
            digest.update(name.encode())
            digest.update(raw)
            array = _load_array(name, raw)
            del raw
            if array.dtype.str not in _ALLOWED_DTYPES or array.ndim != 1:
                raise SnapshotError(f"array {name!r} has an unexpected type {array.dtype.str} / shape {array.shape}")
            arrays[name] = array
    except (KeyError, ValueError, zipfile.BadZipFile, OSError) as exc:
        if isinstance(exc, SnapshotError):
            raise
        raise SnapshotError(f"snapshot content unreadable: {exc}") from None
    if digest.hexdigest() != meta.get("content_sha256"):
        raise SnapshotError("snapshot content does not match its checksum (corrupt or tampered)")
    try:
        model = _rebuild(meta, arrays)
        stored = meta.get("state_checksum")  # computed in here too: it reads what was rebuilt
        matches = state_checksum(model) == stored or state_checksum(model, legacy=True) == stored
    except SnapshotError:
        raise
    except (KeyError, IndexError, ValueError, TypeError, AssertionError, AttributeError, OverflowError,
            RecursionError) as exc:  # a crafted header: wrong types or shapes anywhere
        raise SnapshotError(f"snapshot is inconsistent: {exc!r}") from None
    if not matches:
        raise SnapshotError("restored model does not match the snapshot's state checksum")
    for name in EXACT:  # a snapshot of an older version may hold unsettled pairs (after the legacy checksum)
        getattr(model.state, name).settle()
    return model, meta.get("extra", {})


def _load_array(name: str, raw: bytes) -> np.ndarray:
    """``np.load`` of one member, after checking its header: a plain dtype whose size matches the bytes.

    A crafted header could otherwise ask for a huge allocation (or, with an
    object dtype, for unpickling, which ``allow_pickle=False`` refuses anyway).
    """
    stream = io.BytesIO(raw)
    version = np.lib.format.read_magic(stream)
    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, _fortran, dtype = read_header(stream)
    if dtype.hasobject or dtype.str not in _ALLOWED_DTYPES or len(shape) != 1:
        raise SnapshotError(f"array {name!r} has an unexpected type {dtype.str} / shape {shape}")
    if shape[0] * dtype.itemsize != len(raw) - stream.tell():
        raise SnapshotError(f"array {name!r} declares {shape[0]} items but holds {len(raw) - stream.tell()} bytes")
    return np.load(io.BytesIO(raw), allow_pickle=False)


def _interner(names: list[str | None], free: np.ndarray) -> Interner:
    free_ids = free.tolist()
    if len(set(free_ids)) != len(free_ids) or any(not 0 <= i < len(names) or names[i] is not None for i in free_ids):
        raise SnapshotError("the free list holds an id that is out of range, repeated or in use")
    interner = Interner(names, free_ids)
    if len(interner.ids) + len(interner.free) != len(names):
        raise SnapshotError("id table and free list disagree")
    return interner


def _number(value: Any, what: str, integer: bool = False, optional: bool = False) -> Any:
    """A header number of the right JSON type (never a boolean), else :class:`SnapshotError`."""
    if value is None and optional:
        return None
    kinds = (int,) if integer else (int, float)
    if not isinstance(value, kinds) or isinstance(value, bool):
        raise SnapshotError(f"snapshot header field {what} is not {'an integer' if integer else 'a number'}: {value!r}")
    return value


def _rebuild(meta: dict[str, Any], a: dict[str, np.ndarray]) -> Model:
    model = build_model(meta["config"])
    state: CountState = model.state
    clock = meta["clock"]
    for key in ("half_life", "origin", "now"):
        _number(clock.get(key), f"clock.{key}", optional=True)
    state.clock = DecayClock.from_dict(clock)
    state.classes = _interner(_unpack_strings(a["class_names"], a["class_name_lengths"]), a["class_free"])
    state.terms = _interner(_unpack_strings(a["term_names"], a["term_name_lengths"]), a["term_free"])
    n_cls, n_terms = state.classes.capacity, state.terms.capacity
    used = len(a["ent_refs"])
    sizes = {"class": n_cls, "term": n_terms, "entry": used}
    for name, size in (("cls_refs", "class"), ("cls_entries", "class"), ("term_refs", "term"), ("term_raw", "term"),
                       ("ent_class", "entry"), ("ent_term", "entry"), ("ent_refs", "entry")):
        if len(a[name]) != sizes[size]:
            raise SnapshotError(f"{name} has {len(a[name])} rows for {sizes[size]} {size} ids")
        setattr(state, name, a[name])  # np.load gave each array its own memory: no copy needed
    for name, size in COMPENSATED.items():
        sums = ExactArray() if name in EXACT else CompensatedArray()
        sums.hi, sums.lo = a[name], a[name + "_lo"]
        if not (len(sums.hi) == len(sums.lo) == sizes[size]):
            raise SnapshotError(f"{name} has {len(sums.hi)} rows for {sizes[size]} {size} ids")
        setattr(state, name, sums)
    if used and (a["ent_class"].max() >= max(n_cls, 1) or a["ent_term"].max() >= max(n_terms, 1)):
        raise SnapshotError("an entry refers to an unknown class or term")
    state.free_stack = np.zeros(max(len(state.ent_refs), 16), dtype=np.int64)
    state.free_top = len(a["ent_free"])
    state.free_stack[: state.free_top] = a["ent_free"]
    free = a["ent_free"]
    if state.free_top > used or (state.free_top and (free.max() >= used or free.min() < 0 or len(np.unique(free)) != len(free)
                                                     or (a["ent_refs"][free] != 0).any())):
        raise SnapshotError("free slot list out of range, repeated or naming entries in use")
    live = a["ent_refs"] > 0
    if used and (np.bincount(a["ent_class"][live], minlength=n_cls)[:n_cls] != a["cls_entries"]).any():
        raise SnapshotError("the entries per class disagree with the entries")
    arena = TermArena()
    arena.slot, arena.cls = a["arena_slot"], a["arena_cls"]
    arena.start, arena.length, arena.capacity = a["arena_start"], a["arena_length"], a["arena_capacity"]
    arena.used = len(arena.slot)
    state.arena = arena
    if (len(arena.cls) != arena.used or (arena.start + arena.capacity > arena.used).any()
            or (arena.length > arena.capacity).any() or (arena.start < 0).any() or (arena.length < 0).any()):
        raise SnapshotError("term arena regions out of bounds")
    # The compiled loops index entries and classes by the arena's values without bounds checks (the state
    # checksum does not cover this layout): a region must hold its own term's entries, by their classes.
    # (Counted first: regions that overlap could otherwise ask for a gather of terms x arena size.)
    if int(arena.length[:n_terms].sum()) != int(live.sum()):
        raise SnapshotError("the term arena does not hold every entry once")
    held, lengths = arena.ranges(np.arange(n_terms))
    slots = arena.slot[held]
    if len(slots) and (slots.min() < 0 or slots.max() >= used
                       or (a["ent_term"][slots] != np.repeat(np.arange(n_terms), lengths)).any()
                       or (a["ent_class"][slots] != arena.cls[held]).any()):
        raise SnapshotError("the term arena refers to entries of other terms or classes")
    ids = _unpack_strings(a["doc_ids"], a["doc_id_lengths"])
    for name, size in (("doc_classes", n_cls), ("doc_terms", n_terms)):
        if len(a[name]) and (a[name].min() < 0 or a[name].max() >= size):
            raise SnapshotError(f"{name} refers to an unknown id")
    classes = _split(a["doc_classes"], a["doc_class_counts"])
    terms = _split(a["doc_terms"], a["doc_term_counts"])
    weights = _split(a["doc_weights"], a["doc_term_counts"])
    raws = _split(a["doc_raw"], a["doc_term_counts"])
    state.docs = {}
    for i, doc_id in enumerate(ids):
        if doc_id is None:
            raise SnapshotError("a document without id")
        record = DocRecord(tuple(classes[i].tolist()), terms[i], weights[i], raws[i], float(a["doc_factor"][i]),
                           float(a["doc_ts"][i]), int(a["doc_seq"][i]))
        state.docs[doc_id] = record
    scalars = meta["scalars"]
    for name in ("n_docs", "n_vocab", "n1", "n2", "seq", "ent_used", "pruned_documents", "pruned_entries",
                 "expired_documents", "class_version"):
        setattr(state, name, _number(scalars[name], f"scalars.{name}", integer=True))
    for name in TOTALS:
        total = ExactSum()
        hi, lo = scalars[name]
        total.hi, total.lo = float(_number(hi, f"scalars.{name}")), float(_number(lo, f"scalars.{name}"))
        setattr(state, name, total)
    _restore_residuals(state, scalars.get("residuals") or {}, sizes)
    arena.garbage = _number(scalars["arena_garbage"], "scalars.arena_garbage", integer=True)
    if not 0 <= arena.garbage <= arena.used or state.n_vocab != int((arena.length > 0).sum()):
        raise SnapshotError("the arena's garbage or the vocabulary size disagrees with the arena")
    if state.n_docs != len(state.docs) or state.ent_used != used:
        raise SnapshotError("document or entry counts disagree with the header")
    state.restored()
    # the family checks them
    per_document = {name: array for name, array in a.items() if name not in STATE_ARRAYS and not name.startswith(PER_TERM)}
    per_term = {name[len(PER_TERM):]: array for name, array in a.items() if name.startswith(PER_TERM)}
    model.rebuild_caches()
    model.restore_extra_state(ExtraState(meta.get("model_extra") or {}, per_document, per_term))
    return model


def _residuals(state: CountState, ranks: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
    """The exact sums' residuals beyond their ``hi + lo`` pairs: ``{name: [[index, [residual, ...]], ...]}``.

    With ``ranks`` the indices are the canonical ranks of the checksum (sorted by them), else the ids.
    """
    out: dict[str, Any] = {}
    for name in EXACT:
        spill = getattr(state, name).spill
        if spill:
            rank = None if ranks is None else ranks[COMPENSATED[name]]
            items = [[int(j if rank is None else rank[j]), list(values)] for j, values in spill.items()]
            out[name] = sorted(items)
    for name in TOTALS:
        if getattr(state, name).spill:
            out[name] = list(getattr(state, name).spill)
    return out


def _hashed_pairs(state: CountState, name: str, order: np.ndarray, rank: np.ndarray, tails: dict[str, Any],
                  legacy: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(hi, lo)`` of the exact sums ``name`` in ``order`` as the checksum hashes them.

    Canonical: each pair normalized (TwoSum: ``hi`` the rounded sum, ``lo`` the exact rest); where
    residuals exist, the first two terms of the exact value's expansion, the rest into ``tails``.
    """
    sums = getattr(state, name)
    hi, lo = sums.hi[order], sums.lo[order]
    if legacy:
        return hi, lo
    s = hi + lo
    b = s - hi
    e = (hi - (s - b)) + (lo - b)
    s, e = s + 0.0, e + 0.0  # -0.0 is 0.0
    if sums.spill:
        position = {int(j): k for k, j in enumerate(order.tolist())}
        extra = []
        for j, residuals in sums.spill.items():
            if j not in position:
                continue
            parts = canonical_expansion([float(sums.hi[j]), float(sums.lo[j]), *residuals]) + [0.0, 0.0]
            s[position[j]], e[position[j]] = parts[0], parts[1]
            if len(parts) > 4:
                extra.append([int(rank[j]), parts[2:-2]])
        if extra:
            tails[name] = sorted(extra)
    return s, e


def _restore_residuals(state: CountState, residuals: Any, sizes: dict[str, int]) -> None:
    if not isinstance(residuals, dict):
        raise SnapshotError("residuals of the exact sums are not a mapping")
    for name, items in residuals.items():
        if name in TOTALS:
            getattr(state, name).spill = [float(r) for r in items]
        elif name in EXACT:
            spill = getattr(state, name).spill
            for j, values in items:
                if not 0 <= int(j) < sizes[COMPENSATED[name]]:
                    raise SnapshotError(f"a residual of {name} refers to index {j}, out of range")
                spill[int(j)] = [float(r) for r in values]
        else:
            raise SnapshotError(f"residuals of an unknown sum {name!r}")


# ------------------------------------------------------------------ checksum
def state_checksum(model: Model, legacy: bool = False) -> str:
    """SHA-256 of the model's content in canonical order (independent of internal layout).

    Covers the configuration, the clock, every class/term/entry value and
    every live document (id, classes, terms, weights, raw counts, decay
    factor, event time, sequence number), floats by their exact bits.
    Counters of pruned or expired documents are metrics, not content.
    An exact total is hashed by its exact value (:func:`canonical_expansion`
    of its pair and residuals), not by how it is split: ``legacy=True`` hashes
    the split as snapshots written before did (the loader accepts either).
    """
    state = model.state
    digest = hashlib.sha256()
    digest.update(json.dumps({"config": model_config(model), "clock": state.clock.to_dict()}, sort_keys=True).encode())
    class_names = state.classes.names
    term_names = state.terms.names
    live_classes = [i for i, n in enumerate(class_names) if n is not None]
    live_terms = [i for i, n in enumerate(term_names) if n is not None]
    class_order = sorted(live_classes, key=class_names.__getitem__)
    term_order = sorted(live_terms, key=term_names.__getitem__)
    class_rank = np.full(max(state.classes.capacity, 1), -1, dtype=np.int64)
    class_rank[class_order] = np.arange(len(class_order))
    term_rank = np.full(max(state.terms.capacity, 1), -1, dtype=np.int64)
    term_rank[term_order] = np.arange(len(term_order))
    digest.update(json.dumps([class_names[i] for i in class_order]).encode())
    digest.update(json.dumps([term_names[i] for i in term_order]).encode())
    co, to = np.array(class_order, dtype=np.int64), np.array(term_order, dtype=np.int64)
    tails: dict[str, Any] = {}
    for name in ("cls_docs", "cls_mass"):
        hi, lo = _hashed_pairs(state, name, co, class_rank, tails, legacy)
        digest.update(hi.tobytes() + lo.tobytes())
    digest.update(state.cls_refs[co].tobytes())
    for name in ("term_mass", "term_df"):
        hi, lo = _hashed_pairs(state, name, to, term_rank, tails, legacy)
        digest.update(hi.tobytes() + lo.tobytes())
    for name in ("term_refs", "term_raw"):
        digest.update(getattr(state, name)[to].tobytes())
    live = np.flatnonzero(state.ent_refs[: state.ent_used] > 0)
    ent_c = class_rank[state.ent_class[live]]
    ent_t = term_rank[state.ent_term[live]]
    order = np.lexsort((ent_t, ent_c))
    for values in (ent_c[order], ent_t[order], state.ent_count.hi[live][order], state.ent_count.lo[live][order],
                   state.ent_refs[live][order].astype(np.int64)):
        digest.update(np.ascontiguousarray(values).tobytes())
    if legacy:
        scalars: list = [[t.hi, t.lo] for t in (state.total_mass, state.total_docs, state.class_docs_total)]
        residuals = _residuals(state, {"class": class_rank, "term": term_rank})
    else:
        scalars, residuals = [], tails
        for name in TOTALS:
            total = getattr(state, name)
            parts = canonical_expansion([total.hi, total.lo, *total.spill]) + [0.0, 0.0]
            scalars.append(parts[:2])
            if len(parts) > 4:
                residuals[name] = parts[2:-2]
    scalars += [state.n_docs, state.seq]
    digest.update(json.dumps(scalars).encode())
    if residuals:  # hashed only when there are any: checksums of models without them are as before
        digest.update(json.dumps(residuals, sort_keys=True).encode())
    doc_order = sorted(state.docs)
    for doc_id in doc_order:
        record = state.docs[doc_id]
        digest.update(doc_id.encode("utf-8") + b"\0")
        digest.update(np.sort(class_rank[list(record.classes)]).tobytes())
        digest.update(term_rank[record.terms].tobytes())
        digest.update(np.ascontiguousarray(record.weights, dtype=np.float64).tobytes())
        digest.update(np.ascontiguousarray(record.raw, dtype=np.float64).tobytes())
        digest.update(np.array([record.factor, record.ts], dtype=np.float64).tobytes() + record.seq.to_bytes(8, "little"))
    extra = model.extra_state()
    if extra.meta:
        digest.update(json.dumps(list(extra.meta.values())).encode())
    if extra.per_document:
        position = {doc_id: i for i, doc_id in enumerate(state.docs)}
        order = np.fromiter(map(position.__getitem__, doc_order), dtype=np.int64, count=len(doc_order))
        for name in sorted(extra.per_document):
            digest.update(np.ascontiguousarray(extra.per_document[name][order]).tobytes())
    for name in sorted(extra.per_term):  # (absent from every family but tied term weights': checksums as before)
        digest.update(name.encode() + np.ascontiguousarray(extra.per_term[name][to]).tobytes())
    return digest.hexdigest()
