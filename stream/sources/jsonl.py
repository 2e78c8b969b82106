"""JSON Lines files of documents (plain or gzip): one record of docs/SCHEMAS.md per line.

Each line is a training or scoring record: ``id`` (optional: a content id is
made when it is missing), one of ``text``, ``terms`` or ``raw_b64``, ``labels``
(optional), ``ts`` (optional); other fields are ignored, as the service does.
The shared datasets have this shape. A line that is not a JSON object, a
record with no content or with ``op`` other than ``learn`` is skipped with a
reason; the values themselves are checked later by the record validator, which
gives the service's own reason codes. A gzip file that ends early keeps every
line read before the damage.

Examples
--------
>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "docs.jsonl"
>>> _ = path.write_text('{"id": "a", "text": "cheap pills", "labels": ["spam"]}\\n[1]\\n{"text": "hello"}\\n')
>>> for item in read_jsonl(path, path.parent, "content"):
...     print(item)
SourceDoc(id='a', origin='docs.jsonl:1', labels=('spam',), text='cheap pills', terms=None, raw=None, ts=None)
docs.jsonl:2: invalid_json (a line is one JSON object, got array)
SourceDoc(id='rec:874d18efa22a5a3f4a0a335371048ac4', origin='docs.jsonl:3', labels=(), text='hello', terms=None, raw=None, ts=None)
"""
from __future__ import annotations

import base64
import binascii
import gzip
import json
import zlib
from pathlib import Path
from typing import Iterator

from .documents import SourceDoc, Skipped
from .ids import path_id, record_content_id

__all__ = ["MAX_LINE_BYTES", "read_jsonl"]

#: Longest line read; a longer one is skipped (``too_large``) without holding it in memory.
MAX_LINE_BYTES = 8 * 1024 * 1024
_GZIP_MAGIC = b"\x1f\x8b"
_CONTENT = ("text", "terms", "raw_b64")


def _lines(path: Path) -> Iterator[bytes | None]:
    """The file's lines; ``None`` in place of a line longer than :data:`MAX_LINE_BYTES` (never held whole)."""
    with open(path, "rb") as probe:
        compressed = probe.read(2) == _GZIP_MAGIC
    opener = gzip.open if compressed else open
    with opener(path, "rb") as handle:
        while True:
            line = handle.readline(MAX_LINE_BYTES + 1)
            if not line:
                return
            if len(line) > MAX_LINE_BYTES:
                while not line.endswith(b"\n") and line:  # drop the rest of the oversized line
                    line = handle.readline(MAX_LINE_BYTES)
                yield None
                continue
            yield line


def read_jsonl(path: Path, base: Path, ids: str) -> Iterator[SourceDoc | Skipped]:
    """The documents of one JSON Lines file; ``base`` and ``ids`` as :mod:`sgm.stream.sources.ids`."""
    name = path_id(path, base)
    line_no = 0
    try:
        for line in _lines(path):
            line_no += 1
            if line is None:
                yield Skipped(f"{name}:{line_no}", "too_large", f"line longer than {MAX_LINE_BYTES} bytes")
            elif line.strip():
                yield _document(line, f"{name}:{line_no}", ids)
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        yield Skipped(f"{name}:{line_no + 1}", "truncated", f"compressed data ends or breaks here: {exc}")
    except OSError as exc:
        yield Skipped(f"{name}:{line_no + 1}" if line_no else name, "unreadable", str(exc))


def _document(line: bytes, origin: str, ids: str) -> SourceDoc | Skipped:
    try:
        obj = json.loads(line)
    except UnicodeDecodeError:
        return Skipped(origin, "invalid_json", "not UTF-8")
    except ValueError as exc:
        return Skipped(origin, "invalid_json", str(exc)[:200])
    if not isinstance(obj, dict):
        return Skipped(origin, "invalid_json", f"a line is one JSON object, got {_type_name(obj)}")
    op = obj.get("op")
    if op not in (None, "learn"):
        return Skipped(origin, "other_op", f"op {op!r}: only learn records are read (sgm forget removes by id)")
    present = [field for field in _CONTENT if obj.get(field) is not None]
    if not present:
        return Skipped(origin, "not_a_document", "no text, terms or raw_b64")
    if len(present) > 1:
        return Skipped(origin, "conflicting_fields", f"{' and '.join(present)}: exactly one is allowed")
    raw = None
    if present[0] == "raw_b64":
        value = obj["raw_b64"]
        try:
            if not isinstance(value, str):
                raise ValueError(f"raw_b64 must be a string, got {_type_name(value)}")
            raw = base64.b64decode(value, validate=True)
        except (ValueError, binascii.Error) as exc:
            return Skipped(origin, "bad_base64", str(exc)[:200])
    doc_id = obj.get("id")
    if doc_id is None:
        doc_id = record_content_id(obj) if ids == "content" else origin
    labels = obj.get("labels")
    if labels is not None and not isinstance(labels, list):  # a string would become one label per character
        return Skipped(origin, "wrong_type", f"labels must be an array of strings, got {_type_name(labels)}")
    return SourceDoc(id=doc_id, origin=origin, labels=() if labels is None else tuple(labels),
                     text=obj.get("text"), terms=obj.get("terms"), raw=raw, ts=obj.get("ts"))


def _type_name(value: object) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number")
