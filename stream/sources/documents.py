"""What the readers of a user's files yield: a document to send, or a reason it was skipped.

A :class:`SourceDoc` holds exactly one of ``text``, ``terms`` or ``raw`` (the
bytes of a whole RFC 822 message) plus what is known about it: its id, its
labels, its event time and where it came from (``origin``, for messages and
summaries). It turns into the training or scoring record of docs/SCHEMAS.md
(:meth:`SourceDoc.record`); a message travels as ``raw_b64``, the standard
base64 of its bytes.

A :class:`Skipped` says why something found in the input is not a document:
a short ``reason`` code (counted in summaries) and a ``detail`` for humans.
Readers never raise on bad content; they yield a :class:`Skipped` and go on.

Examples
--------
>>> doc = SourceDoc(id="text:1f", origin="notes/a.txt", text="cheap pills")
>>> doc.with_labels(("spam",)).record()
{'id': 'text:1f', 'labels': ['spam'], 'text': 'cheap pills'}
>>> SourceDoc(id="m1", origin="a.eml", raw=b"Subject: hi\\n\\nhello").record(op="forget")
{'id': 'm1', 'op': 'forget'}
>>> SourceDoc(id="m1", origin="a.eml", raw=b"Subject: hi\\n\\nhello").record(with_labels=False)
{'id': 'm1', 'raw_b64': 'U3ViamVjdDogaGkKCmhlbGxv'}
"""
from __future__ import annotations

import base64
from dataclasses import dataclass, replace
from typing import Any, Mapping

__all__ = ["SKIP_REASONS", "SourceDoc", "Skipped"]

#: Why a reader skips something (``Skipped.reason``); record validation adds the codes of docs/SCHEMAS.md.
SKIP_REASONS = {
    "unreadable": "the file or folder could not be read (permissions, vanished, an I/O error)",
    "binary": "not text: NUL bytes or mostly control characters",
    "empty": "no content (an empty file, or an mbox entry without a message)",
    "too_large": "larger than the reader's size limit",
    "truncated": "an mbox that ends in the middle of a line: its last message is incomplete",
    "not_mbox": "given as an mbox but it does not start with a 'From ' line",
    "invalid_json": "a JSON Lines line that is not one JSON object",
    "bad_base64": "raw_b64 that is not standard base64",
    "not_a_document": "a JSON Lines record with neither text, terms nor raw_b64",
}


@dataclass(frozen=True, slots=True)
class SourceDoc:
    """One document read from a user's file (exactly one of ``text``, ``terms``, ``raw`` is set).

    Parameters
    ----------
    id : str
        The document id (stable: see :mod:`sgm.stream.sources.ids`).
    origin : str
        Where it was read: a path, ``path:line`` (JSON Lines) or ``path#n`` (the n-th message of an mbox).
    labels : tuple of str
        Labels it carries (JSON Lines records, a label folder); empty when unlabelled.
    text, terms, raw
        The content: text, a term -> count mapping, or the bytes of a whole message.
    ts : float or str or None
        Event time as the input gave it (validated with the record).

    Examples
    --------
    >>> doc = SourceDoc(id="text:1f", origin="notes/a.txt", terms={"cheap": 2}, ts=1700000000)
    >>> doc.kind, doc.with_labels(("spam",)).record()
    ('terms', {'id': 'text:1f', 'labels': ['spam'], 'terms': {'cheap': 2}, 'ts': 1700000000})
    >>> doc.record(op="unlearn", with_labels=False)
    {'id': 'text:1f', 'op': 'unlearn', 'terms': {'cheap': 2}, 'ts': 1700000000}
    """

    id: str
    origin: str
    labels: tuple[str, ...] = ()
    text: str | None = None
    terms: Mapping[str, Any] | None = None
    raw: bytes | None = None
    ts: float | str | None = None

    @property
    def kind(self) -> str:
        """``text``, ``terms`` or ``mail``."""
        return "mail" if self.raw is not None else "terms" if self.terms is not None else "text"

    def with_labels(self, labels: tuple[str, ...]) -> "SourceDoc":
        return replace(self, labels=tuple(labels))

    def record(self, op: str = "learn", *, with_labels: bool = True) -> dict[str, Any]:
        """The training record (``op`` learn, unlearn or forget) or, ``with_labels=False``, the scoring
        record of docs/SCHEMAS.md, as a JSON-able dict."""
        if op == "forget":
            return {"id": self.id, "op": "forget"}
        out: dict[str, Any] = {"id": self.id}
        if op != "learn":
            out["op"] = op
        if with_labels:
            out["labels"] = list(self.labels)
        if self.raw is not None:
            out["raw_b64"] = base64.b64encode(self.raw).decode("ascii")
        elif self.terms is not None:
            out["terms"] = dict(self.terms)
        else:
            out["text"] = self.text if self.text is not None else ""
        if self.ts is not None:
            out["ts"] = self.ts
        return out


@dataclass(frozen=True, slots=True)
class Skipped:
    """Something in the input that is not a document: where, why (a short code) and the detail.

    Examples
    --------
    >>> str(Skipped("inbox/3", "binary", "NUL bytes")), Skipped("inbox/3", "binary").reason in SKIP_REASONS
    ('inbox/3: binary (NUL bytes)', True)
    """

    origin: str
    reason: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.origin}: {self.reason}" + (f" ({self.detail})" if self.detail else "")
