"""Stable document ids for files a user has: from the content (default) or from the path.

Learning is idempotent per id (a known id with the same labels is a no-op), so
an id that does not change between runs makes relearning the same files change
nothing. Two ways to get one:

``content`` (default)
    ``<kind>:`` and a 128-bit BLAKE2b digest of the document's bytes: the same
    message gets the same id from a maildir, an mbox or an ``.eml`` file, and
    an edited file is a new document (forget the old one by its id).
``path``
    The path relative to the folder the command was given (with the folder's
    own name first), ``#n`` for the n-th message of an mbox, ``:n`` for line n of
    a JSON Lines file: readable ids, but an edited file keeps its id, and
    relearning it with the same labels is a no-op that keeps the old content.

Examples
--------
>>> content_id("text", b"cheap pills")
'text:12ab1508e6adece168c28aa3ac1c5c86'
>>> content_id("text", b"cheap pills") == content_id("text", b"cheap pills")
True
>>> from pathlib import Path
>>> path_id(Path("/home/u/mail/spam/0001.txt"), Path("/home/u/mail"))
'spam/0001.txt'
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Mapping

__all__ = ["ID_SCHEMES", "content_id", "path_id", "record_content_id"]

ID_SCHEMES = ("content", "path")


def content_id(kind: str, data: bytes) -> str:
    """``kind:`` and the BLAKE2b-128 hex digest of ``data``."""
    return f"{kind}:{hashlib.blake2b(data, digest_size=16).hexdigest()}"


def record_content_id(record: Mapping[str, Any]) -> str:
    """The content id of a JSON Lines record without an ``id``: a digest of its text, terms or raw_b64.

    >>> record_content_id({"text": "a b"}) == record_content_id({"text": "a b", "labels": ["x"], "ts": 5})
    True
    """
    for field in ("raw_b64", "text", "terms"):
        value = record.get(field)
        if value is not None:
            canonical = json.dumps({field: value}, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
            return content_id("rec", canonical.encode("utf-8", "surrogatepass"))
    return content_id("rec", b"")


def path_id(path: Path, base: Path) -> str:
    """``path`` relative to ``base`` with ``/`` separators (its name alone when it is not under ``base``).

    Callers pass the parent of the folder they were given, so that the folder's name starts the id,
    or a file's own parent.
    """
    try:
        relative = path.relative_to(base)
    except ValueError:
        relative = Path(path.name)
    return relative.as_posix()
