"""Files and folders a user points a command at: which reader each file needs, and plain text files.

:func:`read_paths` walks the given files and folders (folders recursively, in
name order, hidden names skipped) and hands each file to its reader:

=====================================  ==========================================
file                                   read as
=====================================  ==========================================
``*.jsonl``, ``*.ndjson`` (``.gz`` too)  JSON Lines records (:mod:`.jsonl`)
a folder with ``cur/`` or ``new/``       a maildir (:mod:`.mail`)
``*.mbox``, or ``From `` lines           an mbox
``*.eml``, or starts with a header       one whole message (also after one ``From `` line)
anything else                            one text document per file
=====================================  ==========================================

``fmt`` other than ``auto`` reads every file the same way (``text``, ``mail``,
``mbox``, ``jsonl``). Text that is not UTF-8 is read as Latin-1; a file with
NUL bytes or mostly control characters is ``binary`` and skipped. With
``label_from_folder`` a document's label is the name of the first folder below
the one given (``data/spam/1.txt`` -> ``spam``), for the usual one folder per
label layout.

Examples
--------
>>> import tempfile, pathlib
>>> root = pathlib.Path(tempfile.mkdtemp()) / "data"
>>> (root / "spam").mkdir(parents=True)
>>> _ = (root / "spam" / "1.txt").write_text("cheap pills")
>>> _ = (root / "spam" / "junk.bin").write_bytes(bytes(range(256)))
>>> for item in read_paths([root], label_from_folder=True):
...     print(item)
SourceDoc(id='text:12ab1508e6adece168c28aa3ac1c5c86', origin='data/spam/1.txt', labels=('spam',), text='cheap pills', terms=None, raw=None, ts=None)
data/spam/junk.bin: binary (NUL bytes)
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Iterator

from .documents import SourceDoc, Skipped
from .ids import ID_SCHEMES, content_id, path_id
from .jsonl import read_jsonl
from .mail import MAX_MESSAGE_BYTES, is_maildir, looks_like_mail, read_eml, read_maildir, read_mbox

__all__ = ["FORMATS", "MAX_TEXT_BYTES", "read_paths", "read_text"]

FORMATS = ("auto", "text", "mail", "mbox", "jsonl")
#: Largest text file read (bytes); the service takes at most 500,000 characters of text anyway.
MAX_TEXT_BYTES = 16 * 1024 * 1024
_JSONL_SUFFIXES = (".jsonl", ".ndjson", ".jsonl.gz", ".ndjson.gz")
_SNIFF_BYTES = 4096


def read_paths(paths: Iterable[str | os.PathLike], *, fmt: str = "auto", ids: str = "content",
               label_from_folder: bool = False) -> Iterator[SourceDoc | Skipped]:
    """Every document under ``paths``, or a :class:`Skipped` for what cannot be one (see module docstring)."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
    if ids not in ID_SCHEMES:
        raise ValueError(f"ids must be one of {ID_SCHEMES}, got {ids!r}")
    for given in paths:
        root = Path(given)
        if root.is_dir():
            root = root.resolve()
            yield from _walk(root, root.parent, fmt, ids, label_from_folder, None, top=True)
        elif root.exists():
            yield from _read_file(root, root.parent, fmt, ids)
        else:
            yield Skipped(str(given), "unreadable", "no such file or folder")


def _walk(folder: Path, base: Path, fmt: str, ids: str, label_from_folder: bool, label: str | None,
          top: bool = False) -> Iterator[SourceDoc | Skipped]:
    """Documents under ``folder``; ``label`` (the first folder below the given one) goes to unlabelled ones."""
    if fmt in ("auto", "mail") and is_maildir(folder):
        found: Iterable[SourceDoc | Skipped] = read_maildir(folder, base, ids)
    else:
        found = _folder_entries(folder, base, fmt, ids, label_from_folder, label, top)
    for item in found:
        yield item.with_labels((label,)) if label and isinstance(item, SourceDoc) and not item.labels else item


def _folder_entries(folder: Path, base: Path, fmt: str, ids: str, label_from_folder: bool, label: str | None,
                    top: bool) -> Iterator[SourceDoc | Skipped]:
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as exc:
        yield Skipped(path_id(folder, base), "unreadable", exc.strerror or str(exc))
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue
        path = Path(entry.path)
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
            is_file = entry.is_file()
        except OSError as exc:
            yield Skipped(path_id(path, base), "unreadable", exc.strerror or str(exc))
            continue
        if is_dir:
            sub_label = entry.name if (top and label_from_folder) else label
            yield from _walk(path, base, fmt, ids, label_from_folder, sub_label)
        elif is_file:
            yield from _read_file(path, base, fmt, ids)
        else:  # a broken link, a pipe, a socket, a device: nothing to read as a document
            why = "not a regular file"
            if entry.is_symlink():
                why = "a link to a folder, not followed" if path.is_dir() else "a broken link"
            yield Skipped(path_id(path, base), "unreadable", why)


def _kind(path: Path, fmt: str) -> str:
    if fmt != "auto":
        return fmt
    name = path.name.lower()
    if name.endswith(_JSONL_SUFFIXES):
        return "jsonl"
    if name.endswith((".mbox", ".mbx")):
        return "mbox"
    if name.endswith(".eml"):
        return "mail"
    try:
        with open(path, "rb") as handle:
            head = handle.read(_SNIFF_BYTES)
    except OSError:
        return "text"  # reported by the text reader
    if head.startswith(b"From ") and looks_like_mail(head.split(b"\n", 1)[-1]):
        return "mbox" if _holds_another_message(path) else "mail"
    return "mail" if looks_like_mail(head) else "text"


def _holds_another_message(path: Path) -> bool:
    """Whether a file that starts with a ``From `` line has a second one (an mbox), or is one message after it.

    One message with a ``From `` line on top (the SpamAssassin corpus's files, a maildir's) is read as the
    maildir reads it, so that it keeps its id when given alone (``sgm forget FILE``); the mbox reader would
    drop its last blank line and undo ``>From`` quoting, which gave it another id.
    """
    try:
        with open(path, "rb") as handle:
            handle.readline()
            size = 0
            for line in handle:
                size += len(line)
                if line.startswith(b"From ") or size > MAX_MESSAGE_BYTES:
                    return True
    except OSError:
        return True  # the mbox reader reports it
    return False


def _read_file(path: Path, base: Path, fmt: str, ids: str) -> Iterator[SourceDoc | Skipped]:
    kind = _kind(path, fmt)
    if kind == "jsonl":
        yield from read_jsonl(path, base, ids)
    elif kind == "mbox":
        yield from read_mbox(path, base, ids)
    elif kind == "mail":
        yield read_eml(path, base, ids, MAX_MESSAGE_BYTES)
    else:
        yield read_text(path, base, ids)


def read_text(path: Path, base: Path, ids: str, max_bytes: int = MAX_TEXT_BYTES) -> SourceDoc | Skipped:
    """One text document per file (UTF-8, else Latin-1); binary content is skipped."""
    origin = path_id(path, base)
    try:
        size = path.stat().st_size
        if size > max_bytes:
            return Skipped(origin, "too_large", f"{size} bytes, limit {max_bytes}")
        data = path.read_bytes()
    except OSError as exc:
        return Skipped(origin, "unreadable", exc.strerror or str(exc))
    if not data.strip():
        return Skipped(origin, "empty", "no text")
    why = binary_reason(data)
    if why:
        return Skipped(origin, "binary", why)
    body = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        text = body.decode("latin-1")
    doc_id = content_id("text", data) if ids == "content" else origin
    return SourceDoc(id=doc_id, origin=origin, text=text)


def binary_reason(data: bytes) -> str:
    """Why ``data`` is not text (NUL bytes, or over 10% control characters in its first 8 KiB), else ``""``.

    >>> binary_reason(b"plain words\\n"), binary_reason(b"a\\x00b"), binary_reason(bytes(range(1, 32)) * 4)
    ('', 'NUL bytes', 'mostly control characters')
    """
    head = data[:8192]
    if b"\x00" in head:
        return "NUL bytes"
    controls = sum(1 for byte in head if byte < 32 and byte not in (9, 10, 12, 13) or byte == 127)
    return "mostly control characters" if controls * 10 > len(head) else ""
