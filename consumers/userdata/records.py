"""A document's record, encoded and checked by the service's own validator before it leaves.

:func:`checked_record` returns the bytes to send, or a :class:`Skipped` with
the reason code the service would have given (docs/SCHEMAS.md): a record the
service would dead-letter is not sent at all, and the user learns why at once.

Examples
--------
>>> from sgm.stream.sources import SourceDoc
>>> checked_record(SourceDoc(id="d1", origin="a.txt", text="cheap", labels=("spam",)), "learn")
b'{"id":"d1","labels":["spam"],"text":"cheap"}'
>>> checked_record(SourceDoc(id="d1", origin="a.txt", text="cheap", labels=("",)), "learn")
Skipped(origin='a.txt', reason='bad_label', detail="label '' is empty or blank")
>>> checked_record(SourceDoc(id="d1", origin="a.txt", text="cheap"), "score")
b'{"id":"d1","text":"cheap"}'
"""
from __future__ import annotations

import json

from sgm.stream.records import DEFAULT_LIMITS, InvalidRecord, Limits, Reason, parse_score, parse_train
from sgm.stream.sources import SourceDoc, Skipped

__all__ = ["checked_record"]

def checked_record(doc: SourceDoc, job: str, limits: Limits = DEFAULT_LIMITS) -> bytes | Skipped:
    """The encoded record of ``doc`` for ``job`` (``learn``, ``forget`` or ``score``), or why it cannot be sent."""
    record = doc.record("forget" if job == "forget" else "learn", with_labels=job == "learn")
    try:
        value = json.dumps(record, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
    except UnicodeEncodeError:
        return Skipped(doc.origin, Reason.INVALID_UTF8.value, "a string holds a lone surrogate")
    except (ValueError, TypeError) as exc:
        return Skipped(doc.origin, Reason.INVALID_JSON.value, str(exc)[:200])
    try:
        if job == "score":
            parse_score(value, limits)
        else:
            parse_train(value, limits)
    except InvalidRecord as exc:
        return Skipped(doc.origin, exc.reason.value, exc.detail)
    return value
