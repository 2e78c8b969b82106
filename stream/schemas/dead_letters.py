"""The dead-letter topic's envelope: a rejected input record, kept byte for byte.

Every input record that fails validation (or that the model refuses) is written to
the dead-letter topic as a JSON envelope: the reason code, a human-readable detail,
where it was read, and the original key, value and header values base64-encoded,
so the envelope is valid JSON whatever the original bytes were and a fixed record
can be replayed from it alone.
"""
from __future__ import annotations

import base64
import binascii
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .json_values import dumps_strict, json_type_name, load_object, require_field
from .limits import DEFAULT_LIMITS, Limits
from .reasons import ApplyReason, InvalidRecord, Reason

__all__ = ["DeadLetter", "encode_dead_letter", "parse_dead_letter"]


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _unb64(obj: Mapping[str, Any], name: str) -> bytes | None:
    text = obj.get(name)
    if text is None:
        return None
    if not isinstance(text, str):
        raise InvalidRecord(Reason.WRONG_TYPE, f"{name} must be a base64 string, got {json_type_name(text)}")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRecord(Reason.WRONG_TYPE, f"{name} is not valid base64") from None


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A rejected input record, kept byte-for-byte with why and where it failed.

    Serialized as a JSON envelope (see :func:`encode_dead_letter`) whose original
    key, value and header values are base64: the envelope is valid JSON whatever the
    original bytes were, and replaying a fixed record needs nothing but the envelope.

    Parameters
    ----------
    reason : Reason
        The validation code.
    detail : str
        Human-readable explanation.
    value : bytes or None
        The original Kafka value, untouched (None for a tombstone).
    key : bytes or None
        The original Kafka key.
    topic, partition, offset
        Where the original record was read.
    headers : tuple of (str, bytes or None)
        The original Kafka headers.
    failed_at : float or None
        Wall-clock time of rejection, epoch seconds.

    Examples
    --------
    >>> from sgm.stream.records import parse_train
    >>> try:
    ...     parse_train(b'{"id": 7}')
    ... except InvalidRecord as exc:
    ...     dl = DeadLetter.from_error(exc, b'{"id": 7}', topic="train", partition=0, offset=41, failed_at=0.0)
    >>> encode_dead_letter(dl)
    b'{"reason":"wrong_type","detail":"id must be a string, got number","source":{"topic":"train","partition":0,"offset":41},"key":null,"value":"eyJpZCI6IDd9","headers":[],"failed_at":0.0}'
    >>> parse_dead_letter(encode_dead_letter(dl)) == dl
    True
    """

    reason: Reason
    detail: str
    value: bytes | None
    key: bytes | None = None
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None
    headers: tuple[tuple[str, bytes | None], ...] = field(default=())
    failed_at: float | None = None

    @classmethod
    def from_error(
        cls,
        error: InvalidRecord,
        value: bytes | None,
        *,
        key: bytes | None = None,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
        headers: Iterable[tuple[str, bytes | None]] = (),
        failed_at: float | None = None,
    ) -> DeadLetter:
        """Build the dead letter for ``value`` rejected with ``error``; ``failed_at`` defaults to now."""
        return cls(
            reason=error.reason,
            detail=error.detail,
            value=None if value is None else bytes(value),
            key=None if key is None else bytes(key),
            topic=topic,
            partition=partition,
            offset=offset,
            headers=tuple((str(k), None if v is None else bytes(v)) for k, v in headers),
            failed_at=time.time() if failed_at is None else float(failed_at),
        )


def _reason_of(code: str) -> Reason | ApplyReason:
    try:
        return Reason(code)
    except ValueError:
        return ApplyReason(code)


def encode_dead_letter(letter: DeadLetter) -> bytes:
    """Serialize a :class:`DeadLetter` as a JSON envelope.

    ``{"reason", "detail", "source": {"topic", "partition", "offset"}, "key": b64|null,
    "value": b64|null, "headers": [[name, b64|null], ...], "failed_at"}``.
    """
    return dumps_strict(
        {
            "reason": _reason_of(letter.reason).value,
            "detail": letter.detail,
            "source": {"topic": letter.topic, "partition": letter.partition, "offset": letter.offset},
            "key": _b64(letter.key),
            "value": _b64(letter.value),
            "headers": [[name, _b64(data)] for name, data in letter.headers],
            "failed_at": letter.failed_at,
        }
    )


def parse_dead_letter(value: bytes, limits: Limits | None = None) -> DeadLetter:
    """Parse a dead-letter envelope written by :func:`encode_dead_letter`.

    The envelope of a record near the size limit is about 4/3 its size, so the
    default allows twice ``DEFAULT_LIMITS.max_record_bytes``.

    Raises
    ------
    InvalidRecord
        If the envelope is malformed.
    """
    if limits is None:
        limits = Limits(max_record_bytes=2 * DEFAULT_LIMITS.max_record_bytes)
    obj = load_object(value, limits)
    reason_text = require_field(obj, "reason", str, "a string")
    try:
        reason = _reason_of(reason_text)
    except ValueError:
        raise InvalidRecord(Reason.WRONG_TYPE, f"reason {reason_text[:40]!r} is not a known reason code") from None
    detail = require_field(obj, "detail", str, "a string")
    source = obj.get("source")
    source = {} if source is None else source
    if not isinstance(source, dict):
        raise InvalidRecord(Reason.WRONG_TYPE, f"source must be an object, got {json_type_name(source)}")
    topic, partition, offset = source.get("topic"), source.get("partition"), source.get("offset")
    if topic is not None and not isinstance(topic, str):
        raise InvalidRecord(Reason.WRONG_TYPE, "source.topic must be a string")
    for name, number in (("partition", partition), ("offset", offset)):
        if number is not None and (type(number) is not int):
            raise InvalidRecord(Reason.WRONG_TYPE, f"source.{name} must be an integer")
    headers = []
    raw_headers = obj.get("headers")
    raw_headers = [] if raw_headers is None else raw_headers
    if not isinstance(raw_headers, list):
        raise InvalidRecord(Reason.WRONG_TYPE, "headers must be an array of [name, base64]")
    for pair in raw_headers:
        if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
            raise InvalidRecord(Reason.WRONG_TYPE, "headers must be an array of [name, base64]")
        headers.append((pair[0], _unb64({"header": pair[1]}, "header")))
    failed_at = obj.get("failed_at")
    if failed_at is not None and (isinstance(failed_at, bool) or not isinstance(failed_at, (int, float))):
        raise InvalidRecord(Reason.WRONG_TYPE, "failed_at must be a number")
    return DeadLetter(
        reason=reason,
        detail=detail,
        value=_unb64(obj, "value"),
        key=_unb64(obj, "key"),
        topic=topic,
        partition=partition,
        offset=offset,
        headers=tuple(headers),
        failed_at=None if failed_at is None else float(failed_at),
    )
