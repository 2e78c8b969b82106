"""Strict JSON in and out, shared by every schema.

In: :func:`load_object` reads one JSON object from a Kafka value (size first,
then UTF-8 and strict JSON: no NaN/Infinity, no trailing text), with orjson as
the fast path and the standard library as the exact reference. Out:
:func:`dumps_strict` writes compact UTF-8 JSON and refuses NaN and infinities.

Examples
--------
>>> load_object(b'{"id": "a"}', Limits())
{'id': 'a'}
>>> dumps_strict({"id": "a b", "n": 1.5})
b'{"id":"a b","n":1.5}'
>>> load_object(b'{"x": NaN}', Limits())
Traceback (most recent call last):
...
sgm.stream.schemas.reasons.InvalidRecord: invalid_json: NaN is not valid JSON
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import orjson

from .limits import Limits
from .reasons import InvalidRecord, Reason

__all__ = ["dumps_strict", "json_type_name", "load_object", "require_field"]

_JSON_TYPE_NAMES = {dict: "object", list: "array", str: "string", int: "number", float: "number", bool: "boolean"}


def json_type_name(value: Any) -> str:
    """The JSON name of a decoded value's type, for error messages (``"array"``, ``"null"``, ...)."""
    return "null" if value is None else _JSON_TYPE_NAMES.get(type(value), type(value).__name__)


def _reject_constant(name: str) -> float:
    # json.loads accepts NaN/Infinity by default; they are not JSON.
    raise ValueError(f"{name} is not valid JSON")


def load_object(value: bytes | bytearray | memoryview | str | None, limits: Limits) -> dict[str, Any]:
    """Decode one strict JSON object from a Kafka value.

    Raises
    ------
    InvalidRecord
        ``not_an_object`` (also for a tombstone), ``too_large`` (over
        ``limits.max_record_bytes``, checked first), ``invalid_utf8``, ``invalid_json``.
    """
    if value is None:
        raise InvalidRecord(Reason.NOT_AN_OBJECT, "value is null (a tombstone)")
    if isinstance(value, str):
        size = len(value.encode("utf-8", "surrogatepass"))
        if size > limits.max_record_bytes:
            raise InvalidRecord(Reason.TOO_LARGE, f"record is {size} bytes, limit {limits.max_record_bytes}")
        text = value
    elif isinstance(value, (bytes, bytearray, memoryview)):
        if len(value) > limits.max_record_bytes:
            raise InvalidRecord(Reason.TOO_LARGE, f"record is {len(value)} bytes, limit {limits.max_record_bytes}")
        text = None  # decoded only when the fast path fails: orjson checks UTF-8 (no surrogates) itself
    else:
        raise TypeError(f"expected bytes, got {type(value).__name__}")
    try:
        obj = orjson.loads(value)  # fast path; refuses NaN/Infinity and deep nesting as json does below
    except orjson.JSONDecodeError:
        obj = None  # invalid, or valid but beyond orjson (integers over 64 bits): the exact path decides
    if obj is None:
        if text is None:
            try:
                text = bytes(value).decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InvalidRecord(Reason.INVALID_UTF8, f"byte {exc.start}: {exc.reason}") from None
        obj = _load_exactly(text)
    if not isinstance(obj, dict):
        raise InvalidRecord(Reason.NOT_AN_OBJECT, f"expected a JSON object, got {json_type_name(obj)}")
    return obj


def _load_exactly(text: str) -> Any:
    """The standard library's parser: the reference behaviour and error messages."""
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise InvalidRecord(Reason.INVALID_JSON, f"line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise InvalidRecord(Reason.INVALID_JSON, "nesting too deep") from None
    except ValueError as exc:  # NaN/Infinity, integers over sys.get_int_max_str_digits()
        raise InvalidRecord(Reason.INVALID_JSON, str(exc)) from None


def require_field(obj: Mapping[str, Any], name: str, kind: type | tuple[type, ...], what: str) -> Any:
    """``obj[name]``, which must be present, not null and of ``kind`` (never a boolean)."""
    value = obj.get(name)
    if value is None:
        raise InvalidRecord(Reason.MISSING_FIELD, f"{name} is required")
    if not isinstance(value, kind) or isinstance(value, bool):
        raise InvalidRecord(Reason.WRONG_TYPE, f"{name} must be {what}, got {json_type_name(value)}")
    return value


def dumps_strict(obj: Mapping[str, Any]) -> bytes:
    """Compact, UTF-8 (not \\u-escaped), and strict: NaN/inf raise instead of emitting non-JSON."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
