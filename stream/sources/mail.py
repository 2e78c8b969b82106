"""Mail as people keep it: maildir folders, mbox files, single ``.eml`` messages.

Every message is kept whole (its bytes, for ``raw_b64``): the model reads
headers, MIME parts and attachments itself. Nothing here parses MIME; this
module only finds where messages begin and end, and their delivery time
where the container records one:

maildir
    One message per file in ``cur/`` and ``new/`` (``tmp/`` holds deliveries in
    progress and is skipped), in name order. The delivery time is the number
    that starts a maildir file name (``1030000000.M1P2.host:2,S``).
mbox
    Messages concatenated, each starting with a ``From `` line that carries the
    delivery time; read as a stream (any size), unescaping mboxrd's ``>From ``
    quoting, so a message read from an mbox has the bytes it had in a maildir
    (and the same content id). A file that ends in the middle of a line is
    truncated: its last message is skipped as ``truncated``, every message
    before it is read.
``.eml``
    One message per file.

A message is the same bytes wherever it is kept: a ``From `` line at the top of
a single-message file (the SpamAssassin corpus has them) is an mbox separator,
not part of the message, and is dropped as an mbox reader drops it.

A message larger than ``max_bytes`` is skipped as ``too_large``; one that does
not start with a header block (:func:`looks_like_mail`) as ``not_mail``.

Examples
--------
>>> import tempfile, pathlib
>>> box = pathlib.Path(tempfile.mkdtemp()) / "inbox.mbox"
>>> _ = box.write_bytes(b"From a@b Sat Aug 31 10:00:00 2002\\nFrom: a@b\\nSubject: one\\n\\n>From here\\n\\n"
...                     b"From c@d Sun Sep  1 11:00:00 2002\\nFrom: c@d\\nSubject: two\\n\\nbye\\n")
>>> [(doc.origin, doc.raw, doc.ts) for doc in read_mbox(box, box.parent, "path")]  # doctest: +NORMALIZE_WHITESPACE
[('inbox.mbox#1', b'From: a@b\\nSubject: one\\n\\nFrom here\\n', 1030788000.0),
 ('inbox.mbox#2', b'From: c@d\\nSubject: two\\n\\nbye\\n', 1030878000.0)]
"""
from __future__ import annotations

import calendar
import re
import time
from pathlib import Path
from typing import Iterator

from .documents import SourceDoc, Skipped
from .ids import content_id, path_id

__all__ = ["MAX_MESSAGE_BYTES", "is_maildir", "looks_like_mail", "read_eml", "read_maildir", "read_mbox"]

#: Largest message read (bytes). The service's records are at most 1 MiB, so a larger message could not be sent.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
_HEADER_LINE = re.compile(rb"^[\x21-\x39\x3b-\x7e]+:")  # a field name (printable, no colon), then a colon
_MAILDIR_TIME = re.compile(r"^(\d{9,11})\.")
_ESCAPED_FROM = re.compile(rb"^>+From ")
#: Header fields that mark a message (one of them must appear in the header block).
_MAIL_FIELDS = {b"from", b"to", b"cc", b"date", b"subject", b"received", b"return-path", b"message-id",
                b"delivered-to", b"mime-version", b"content-type", b"reply-to", b"sender", b"envelope-to"}


def is_maildir(folder: Path) -> bool:
    """A folder with a ``cur`` or ``new`` sub-folder."""
    return (folder / "cur").is_dir() or (folder / "new").is_dir()


def looks_like_mail(head: bytes) -> bool:
    """``head`` (the first bytes of a file) starts with a message's header block.

    That is: fields (``Name: value``, continuation lines indented) up to a blank
    line or the end of ``head``, at least two of them, one a field every mail
    system writes (``From``, ``Received``, ``Message-ID``...). A text whose first
    line is ``Re: lunch`` is not a message.

    >>> looks_like_mail(b"Return-Path: <a@b>\\nSubject: x\\n\\nbody"), looks_like_mail(b"Re: lunch\\n\\nat noon")
    (True, False)
    >>> looks_like_mail(b"Note: one\\nAgenda: two\\n\\ntext")
    False
    """
    names = []
    for line in head.split(b"\n")[:-1] if not head.endswith(b"\n") else head.split(b"\n"):
        line = line.rstrip(b"\r")
        if not line:
            break
        if line[:1] in (b" ", b"\t") and names:
            continue
        found = _HEADER_LINE.match(line)
        if not found:
            return False
        names.append(found.group()[:-1].lower())
    return len(names) >= 2 and any(name in _MAIL_FIELDS or name.startswith(b"x-") for name in names)


def _mail_doc(data: bytes, origin: str, name_id: str, ids: str, ts: float | None) -> SourceDoc | Skipped:
    if data.startswith(b"From "):  # an mbox 'From ' line kept in a single-message file: not part of the message
        separator, _, data = data.partition(b"\n")
        ts = ts if ts is not None else from_line_time(separator)
    if not data.strip():
        return Skipped(origin, "empty", "no message")
    if not looks_like_mail(data[:4096]):
        return Skipped(origin, "not_mail", "does not start with a message's header fields")
    doc_id = content_id("mail", data) if ids == "content" else name_id
    return SourceDoc(id=doc_id, origin=origin, raw=data, ts=ts)


def _read_file(path: Path, origin: str, max_bytes: int) -> bytes | Skipped:
    try:
        size = path.stat().st_size
        if size > max_bytes:
            return Skipped(origin, "too_large", f"{size} bytes, limit {max_bytes}")
        return path.read_bytes()
    except OSError as exc:
        return Skipped(origin, "unreadable", exc.strerror or str(exc))


def read_eml(path: Path, base: Path, ids: str, max_bytes: int = MAX_MESSAGE_BYTES,
             ts: float | None = None) -> SourceDoc | Skipped:
    """One message file."""
    origin = path_id(path, base)
    data = _read_file(path, origin, max_bytes)
    if isinstance(data, Skipped):
        return data
    return _mail_doc(data, origin, origin, ids, ts)


def read_maildir(folder: Path, base: Path, ids: str, max_bytes: int = MAX_MESSAGE_BYTES) -> Iterator[SourceDoc | Skipped]:
    """The messages of a maildir (``cur/`` then ``new/``, each in name order)."""
    for sub in ("cur", "new"):
        directory = folder / sub
        if not directory.is_dir():
            continue
        try:
            names = sorted(entry.name for entry in directory.iterdir() if not entry.name.startswith("."))
        except OSError as exc:
            yield Skipped(path_id(directory, base), "unreadable", exc.strerror or str(exc))
            continue
        for name in names:
            path = directory / name
            if path.is_dir():
                continue
            found = _MAILDIR_TIME.match(name)
            yield read_eml(path, base, ids, max_bytes, float(found.group(1)) if found else None)


def from_line_time(line: bytes) -> float | None:
    """The delivery time of an mbox ``From `` line (its asctime ending), epoch seconds; None if unreadable.

    >>> from_line_time(b"From MAILER-DAEMON Fri Jul  8 12:08:34 2011"), from_line_time(b"From x")
    (1310126914.0, None)
    """
    words = line.decode("latin-1").split()
    if len(words) < 6:
        return None
    try:
        return float(calendar.timegm(time.strptime(" ".join(words[-5:]), "%a %b %d %H:%M:%S %Y")))
    except (ValueError, OverflowError):
        return None


def read_mbox(path: Path, base: Path, ids: str, max_bytes: int = MAX_MESSAGE_BYTES) -> Iterator[SourceDoc | Skipped]:
    """The messages of an mbox file, streamed (see the module docstring)."""
    name = path_id(path, base)
    number = 0
    try:
        with open(path, "rb") as handle:
            first = handle.readline()
            if not first.startswith(b"From "):
                yield Skipped(name, "not_mbox" if first.strip() else "empty",
                              "the first line is not a 'From ' line" if first.strip() else "no messages")
                return
            separator, lines, size, too_large, last = first, [], 0, False, first
            for line in handle:
                last = line
                if line.startswith(b"From "):
                    number += 1
                    yield _finish(lines, too_large, separator, f"{name}#{number}", ids, size, max_bytes)
                    separator, lines, size, too_large = line, [], 0, False
                    continue
                size += len(line)
                if size > max_bytes:
                    too_large, lines = True, []
                elif not too_large:
                    lines.append(line[1:] if _ESCAPED_FROM.match(line) else line)
            number += 1
            origin = f"{name}#{number}"
            if not last.endswith(b"\n"):
                yield Skipped(origin, "truncated", "the file ends in the middle of a line")
            else:
                yield _finish(lines, too_large, separator, origin, ids, size, max_bytes)
    except OSError as exc:
        yield Skipped(f"{name}#{number + 1}" if number else name, "unreadable", exc.strerror or str(exc))


def _finish(lines: list[bytes], too_large: bool, separator: bytes, origin: str, ids: str, size: int,
            max_bytes: int) -> SourceDoc | Skipped:
    if too_large:
        return Skipped(origin, "too_large", f"over {max_bytes} bytes")
    if lines and lines[-1] in (b"\n", b"\r\n"):
        lines = lines[:-1]  # the blank line an mbox writer puts before the next 'From ' line
    return _mail_doc(b"".join(lines), origin, origin, ids, from_line_time(separator))
