"""Record schemas of the service's topics: validation, parsing and serialization.

Every record on every topic is one UTF-8 JSON object (the Kafka *value*); the Kafka
*key* is the record's ``id`` so that all operations on one document land on one
partition, in order. ``docs/SCHEMAS.md`` is the reference for the fields, limits and
reason codes; this module is its implementation.

* training topic  -> :func:`parse_train` -> :class:`TrainRecord` (:func:`encode_train`)
* scoring topic   -> :func:`parse_score` -> :class:`ScoreRecord` (:func:`encode_score`)
* output topic    <- :func:`encode_output` <- :class:`OutputRecord` (:func:`parse_output`)
* dead letters    <- :func:`encode_dead_letter` <- :class:`DeadLetter` (:func:`parse_dead_letter`)

The parsers are total on bytes: whatever the input, they either return a record or
raise :class:`InvalidRecord`, whose :class:`Reason` is one of a small fixed set of
codes (fit for a Prometheus label) and whose ``detail`` is for humans.

Rules shared by all inputs: a field set to ``null`` is treated as absent; unknown
fields are ignored (producers may add fields such as ``split`` or ``source``).
"""
from __future__ import annotations

import base64
import binascii
import enum
import json
import math
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import orjson
from datetime import datetime, timezone
from typing import Any

__all__ = [
    "DEFAULT_LIMITS",
    "DeadLetter",
    "InvalidRecord",
    "Limits",
    "Op",
    "OutputRecord",
    "Reason",
    "ScoreRecord",
    "TrainRecord",
    "encode_dead_letter",
    "encode_output",
    "encode_score",
    "encode_train",
    "parse_dead_letter",
    "parse_output",
    "parse_score",
    "parse_timestamp",
    "parse_train",
]


class Reason(enum.StrEnum):
    """Why a record was rejected: a fixed, small set of codes.

    The values are stable strings, safe as a Prometheus label value and as the
    ``reason`` of a dead letter. Rule of thumb: ``wrong_type`` when a field (or an
    element of it) has the wrong JSON type, ``bad_<field>`` when the type is right but
    the value is not acceptable.

    Examples
    --------
    >>> Reason.INVALID_JSON.value
    'invalid_json'
    >>> Reason("too_many_labels") is Reason.TOO_MANY_LABELS
    True
    """

    INVALID_UTF8 = "invalid_utf8"  # bytes are not UTF-8, or a string holds an unpaired surrogate escape
    INVALID_JSON = "invalid_json"  # not one JSON text (incl. NaN/Infinity, over-deep nesting)
    NOT_AN_OBJECT = "not_an_object"  # JSON but not an object (or a null value / tombstone)
    MISSING_FIELD = "missing_field"  # a required field is absent or null (or labels is empty)
    WRONG_TYPE = "wrong_type"  # a field or element has the wrong JSON type
    CONFLICTING_FIELDS = "conflicting_fields"  # both text and terms
    UNKNOWN_OP = "unknown_op"  # op is not learn / unlearn / forget
    BAD_TIMESTAMP = "bad_timestamp"  # unparsable, NaN/inf, negative or absurdly large ts
    TOO_LARGE = "too_large"  # record bytes or text characters over the limit
    TOO_MANY_TERMS = "too_many_terms"  # more distinct terms than the limit
    TOO_MANY_LABELS = "too_many_labels"  # more distinct labels than the limit
    BAD_LABEL = "bad_label"  # empty, blank, too long, or holding control characters
    BAD_TERM = "bad_term"  # empty, too long, or holding control characters
    BAD_COUNT = "bad_count"  # term count not finite, not > 0 or over the limit
    BAD_ID = "bad_id"  # empty, too long, or holding control characters


class ApplyReason(enum.StrEnum):
    """Why a *valid* training record could not be applied to the model.

    These come from the consumer, not the validator: the record parsed, but the
    model refused it. Like :class:`Reason`, they label dead letters and metrics.

    >>> ApplyReason.UNKNOWN_ID.value
    'unknown_id'
    """

    UNKNOWN_ID = "unknown_id"  # unlearn/forget of an id the model does not hold (never learned, or pruned)
    UNLEARN_MISMATCH = "unlearn_mismatch"  # unlearn with labels other than those the id was learned with
    MODEL_REJECTED = "model_rejected"  # the model refused the document (e.g. an unusable label)


class Op(enum.StrEnum):
    """What a training record asks the model to do.

    ``learn`` adds the document's counts to its labels; ``unlearn`` subtracts them
    (the caller resends the same text/terms and labels it learnt); ``forget`` removes
    everything learnt under the document's ``id`` and needs only the ``id``.

    Examples
    --------
    >>> Op("unlearn") is Op.UNLEARN
    True
    """

    LEARN = "learn"
    UNLEARN = "unlearn"
    FORGET = "forget"


class InvalidRecord(ValueError):
    """A record failed validation.

    Parameters
    ----------
    reason : Reason
        Machine-readable code (bounded set; use it for metrics and dead letters).
    detail : str
        Human-readable explanation; cut to 500 characters so a hostile record
        cannot make log lines or dead letters arbitrarily large.

    Examples
    --------
    >>> try:
    ...     parse_train(b"[1, 2]")
    ... except InvalidRecord as exc:
    ...     print(exc.reason.value, "|", exc.detail)
    not_an_object | expected a JSON object, got array
    """

    MAX_DETAIL_CHARS = 500

    def __init__(self, reason: Reason, detail: str) -> None:
        if len(detail) > self.MAX_DETAIL_CHARS:
            detail = detail[: self.MAX_DETAIL_CHARS - 3] + "..."
        super().__init__(f"{reason.value}: {detail}")
        self.reason = reason
        self.detail = detail

    def __reduce__(self):  # keep it picklable despite the two-argument constructor
        return (type(self), (self.reason, self.detail))


#: 3000-01-01T00:00:00Z. Later event times are almost surely milliseconds or
#: microseconds sent as seconds.
MAX_TS = 32503680000.0


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on a single input record; anything over them is rejected.

    The defaults leave room above every document of the shared datasets (largest
    text 228,369 characters, at most 16 labels, longest id 62 characters) while
    keeping one record's cost bounded.

    Parameters
    ----------
    max_record_bytes : int
        Size of the raw Kafka value. Default 1 MiB, Kafka's default ``message.max.bytes``.
    max_text_chars : int
        Characters of ``text``. Default 500,000.
    max_terms : int
        Distinct keys of ``terms``. Default 50,000.
    max_term_count : float
        Largest count of one term in one document. Default 1,000,000.
    max_labels : int
        Distinct labels of one document. Default 64.
    max_label_chars : int
        Characters of one label. Default 128.
    max_id_chars : int
        Characters of ``id``. Default 512.
    max_term_chars : int
        Characters of one term. Default 256.
    min_ts, max_ts : float
        Accepted event times, epoch seconds. Default 0 (1970) to 3000-01-01.

    Examples
    --------
    >>> Limits().max_labels
    64
    >>> parse_train(b'{"id": "d1", "text": "x", "labels": ["a", "b"]}', Limits(max_labels=1))
    Traceback (most recent call last):
    ...
    sgm.stream.records.InvalidRecord: too_many_labels: 2 distinct labels, limit 1
    """

    max_record_bytes: int = 1 << 20
    max_text_chars: int = 500_000
    max_terms: int = 50_000
    max_term_count: float = 1_000_000.0
    max_labels: int = 64
    max_label_chars: int = 128
    max_id_chars: int = 512
    max_term_chars: int = 256
    min_ts: float = 0.0
    max_ts: float = MAX_TS


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True, slots=True)
class TrainRecord:
    """A validated training-topic record.

    Exactly one of ``text`` / ``terms`` is set for ``learn`` and ``unlearn``;
    ``forget`` carries only ``id`` (and ``ts`` if given). ``terms`` is a plain dict
    for speed and pickling: treat it as read-only.

    Examples
    --------
    >>> r = parse_train(b'{"id": "n1", "text": "oil prices rise", "labels": ["crude", "crude"], "ts": "1987-02-26"}')
    >>> r.op, r.labels, r.ts
    (<Op.LEARN: 'learn'>, ('crude',), 541296000.0)
    >>> parse_train(encode_train(r)) == r
    True
    >>> parse_train(b'{"id": "n1", "op": "forget"}')
    TrainRecord(id='n1', op=<Op.FORGET: 'forget'>, labels=(), text=None, terms=None, ts=None)
    """

    id: str
    op: Op = Op.LEARN
    labels: tuple[str, ...] = ()
    text: str | None = None
    terms: Mapping[str, int | float] | None = None
    ts: float | None = None


@dataclass(frozen=True, slots=True)
class ScoreRecord:
    """A validated scoring-topic record (exactly one of ``text`` / ``terms``).

    Examples
    --------
    >>> r = parse_score(b'{"id": "q1", "terms": {"oil": 2, "price": 1}}')
    >>> r.terms, r.text, r.ts
    ({'oil': 2, 'price': 1}, None, None)
    >>> parse_score(encode_score(r)) == r
    True
    """

    id: str
    text: str | None = None
    terms: Mapping[str, int | float] | None = None
    ts: float | None = None


# --------------------------------------------------------------------------- parsing

# C0/C1 control characters (incl. newline and tab) and lone surrogates: not allowed in
# ids, labels and terms, which end up in keys, metric labels and log lines.
_BAD_NAME_CHARS = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")
# Extended ISO-8601 calendar date first: rejects basic (20020822) and week dates.
_ISO_DATE_PREFIX = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}(?:$|[T ])")
_MAX_TS_STRING = 64
_JSON_TYPE_NAMES = {dict: "object", list: "array", str: "string", int: "number", float: "number", bool: "boolean"}


def _type_name(value: Any) -> str:
    return "null" if value is None else _JSON_TYPE_NAMES.get(type(value), type(value).__name__)


def _reject_constant(name: str) -> float:
    # json.loads accepts NaN/Infinity by default; they are not JSON.
    raise ValueError(f"{name} is not valid JSON")


def _load_object(value: bytes | bytearray | memoryview | str | None, limits: Limits) -> dict[str, Any]:
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
        raise InvalidRecord(Reason.NOT_AN_OBJECT, f"expected a JSON object, got {_type_name(obj)}")
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


def _check_id(obj: dict[str, Any], limits: Limits) -> str:
    doc_id = obj.get("id")
    if doc_id is None:
        raise InvalidRecord(Reason.MISSING_FIELD, "id is required")
    if not isinstance(doc_id, str):
        raise InvalidRecord(Reason.WRONG_TYPE, f"id must be a string, got {_type_name(doc_id)}")
    if not doc_id:
        raise InvalidRecord(Reason.BAD_ID, "id is empty")
    if len(doc_id) > limits.max_id_chars:
        raise InvalidRecord(Reason.BAD_ID, f"id has {len(doc_id)} characters, limit {limits.max_id_chars}")
    bad = _BAD_NAME_CHARS.search(doc_id)
    if bad:
        raise InvalidRecord(Reason.BAD_ID, f"id holds control character or lone surrogate {bad.group()!r}")
    return doc_id


def parse_timestamp(value: Any, limits: Limits = DEFAULT_LIMITS) -> float | None:
    """Normalise an event time to float epoch seconds (``None`` stays ``None``).

    Accepts epoch seconds (int or float) or an ISO-8601 string in extended format:
    date only, date and time, with or without UTC offset or ``Z``. A string without
    offset is taken as UTC.

    Raises
    ------
    InvalidRecord
        ``wrong_type`` for other JSON types, ``bad_timestamp`` for unparsable strings,
        NaN/infinity, or values outside ``[limits.min_ts, limits.max_ts]``.

    Examples
    --------
    >>> parse_timestamp("2002-08-22T11:36:16+00:00")
    1030016176.0
    >>> parse_timestamp("2002-08-22T13:36:16+02:00") == parse_timestamp("2002-08-22 11:36:16")
    True
    >>> parse_timestamp("1999-12-10"), parse_timestamp(1.5), parse_timestamp(None)
    (944784000.0, 1.5, None)
    >>> parse_timestamp(1_700_000_000_000)  # milliseconds by mistake
    Traceback (most recent call last):
    ...
    sgm.stream.records.InvalidRecord: bad_timestamp: ts 1700000000000 is out of range [0.0, 32503680000.0]
    """
    if value is None:
        return None
    if isinstance(value, bool):  # bool is an int subclass; true is not a time
        raise InvalidRecord(Reason.WRONG_TYPE, "ts must be a number, an ISO-8601 string or null, got boolean")
    if isinstance(value, (int, float)):
        try:
            seconds = float(value)
        except OverflowError:
            raise InvalidRecord(Reason.BAD_TIMESTAMP, "ts is too large") from None
        if not math.isfinite(seconds):
            raise InvalidRecord(Reason.BAD_TIMESTAMP, f"ts is {seconds}")
    elif isinstance(value, str):
        if len(value) > _MAX_TS_STRING or not _ISO_DATE_PREFIX.match(value):
            raise InvalidRecord(Reason.BAD_TIMESTAMP, f"ts {value[:_MAX_TS_STRING]!r} is not an ISO-8601 date-time")
        try:
            moment = datetime.fromisoformat(value)
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=timezone.utc)
            seconds = moment.timestamp()
        except (ValueError, OverflowError) as exc:
            raise InvalidRecord(Reason.BAD_TIMESTAMP, f"ts {value!r}: {exc}") from None
    else:
        raise InvalidRecord(Reason.WRONG_TYPE, f"ts must be a number, an ISO-8601 string or null, got {_type_name(value)}")
    if not limits.min_ts <= seconds <= limits.max_ts:
        shown = value if isinstance(value, (int, float)) else repr(value)
        raise InvalidRecord(Reason.BAD_TIMESTAMP, f"ts {shown} is out of range [{limits.min_ts}, {limits.max_ts}]")
    return seconds


def _check_labels(obj: dict[str, Any], limits: Limits) -> tuple[str, ...]:
    labels = obj.get("labels")
    if labels is None:
        raise InvalidRecord(Reason.MISSING_FIELD, "labels is required for learn and unlearn")
    if not isinstance(labels, list):
        raise InvalidRecord(Reason.WRONG_TYPE, f"labels must be an array of strings, got {_type_name(labels)}")
    if not labels:
        raise InvalidRecord(Reason.MISSING_FIELD, "labels is empty; learn and unlearn need at least one label")
    for label in labels:
        if not isinstance(label, str):
            raise InvalidRecord(Reason.WRONG_TYPE, f"labels must be an array of strings, found {_type_name(label)}")
    unique = tuple(dict.fromkeys(labels))  # dedupe, keep first-seen order
    if len(unique) > limits.max_labels:
        raise InvalidRecord(Reason.TOO_MANY_LABELS, f"{len(unique)} distinct labels, limit {limits.max_labels}")
    for label in unique:
        if not label.strip():
            raise InvalidRecord(Reason.BAD_LABEL, f"label {label!r} is empty or blank")
        if len(label) > limits.max_label_chars:
            raise InvalidRecord(
                Reason.BAD_LABEL, f"label {label[:40]!r}... has {len(label)} characters, limit {limits.max_label_chars}"
            )
    if _BAD_NAME_CHARS.search("".join(unique)):
        label = next(lab for lab in unique if _BAD_NAME_CHARS.search(lab))
        raise InvalidRecord(Reason.BAD_LABEL, f"label {label[:60]!r} holds a control character or lone surrogate")
    return unique


def _check_terms(terms: Any, limits: Limits) -> dict[str, int | float]:
    if not isinstance(terms, dict):
        raise InvalidRecord(Reason.WRONG_TYPE, f"terms must be an object of term: count, got {_type_name(terms)}")
    if len(terms) > limits.max_terms:
        raise InvalidRecord(Reason.TOO_MANY_TERMS, f"{len(terms)} distinct terms, limit {limits.max_terms}")
    for term, count in terms.items():
        # bool is an int subclass; "true" is not a count
        if type(count) is not int and type(count) is not float:
            raise InvalidRecord(Reason.WRONG_TYPE, f"count of term {term[:60]!r} must be a number, got {_type_name(count)}")
        if not 0 < count <= limits.max_term_count:  # also false for NaN
            raise InvalidRecord(
                Reason.BAD_COUNT, f"count of term {term[:60]!r} is {count}, must be in (0, {limits.max_term_count}]"
            )
        if not term or len(term) > limits.max_term_chars:
            raise InvalidRecord(
                Reason.BAD_TERM, f"term {term[:60]!r} has {len(term)} characters, must be 1..{limits.max_term_chars}"
            )
    joined = "".join(terms)
    if _BAD_NAME_CHARS.search(joined):
        term = next(t for t in terms if _BAD_NAME_CHARS.search(t))
        raise InvalidRecord(Reason.BAD_TERM, f"term {term[:60]!r} holds a control character or lone surrogate")
    return terms


def _check_content(obj: dict[str, Any], limits: Limits) -> tuple[str | None, dict[str, int | float] | None]:
    text = obj.get("text")
    terms = obj.get("terms")
    if text is not None and terms is not None:
        raise InvalidRecord(Reason.CONFLICTING_FIELDS, "give either text or terms, not both")
    if text is None and terms is None:
        raise InvalidRecord(Reason.MISSING_FIELD, "one of text or terms is required")
    if terms is not None:
        return None, _check_terms(terms, limits)
    if not isinstance(text, str):
        raise InvalidRecord(Reason.WRONG_TYPE, f"text must be a string, got {_type_name(text)}")
    if len(text) > limits.max_text_chars:
        raise InvalidRecord(Reason.TOO_LARGE, f"text has {len(text)} characters, limit {limits.max_text_chars}")
    bad = None if text.isascii() else _SURROGATE.search(text)  # isascii() is O(1) in CPython
    if bad:  # a JSON \ud800 escape: valid JSON, but not encodable as UTF-8
        raise InvalidRecord(Reason.INVALID_UTF8, f"text holds a lone surrogate at character {bad.start()}")
    return text, None


def parse_train(value: bytes | None, limits: Limits = DEFAULT_LIMITS) -> TrainRecord:
    """Validate a training-topic value and return it as a :class:`TrainRecord`.

    Checks run in this order, the first failure wins: size, UTF-8, JSON, object,
    ``id``, ``op``, ``ts``, then (``learn``/``unlearn`` only) ``labels`` and
    ``text``/``terms``. ``forget`` ignores every field but ``id``, ``op`` and ``ts``.

    Parameters
    ----------
    value : bytes or None
        The raw Kafka value (``None`` for a tombstone, which is rejected).
    limits : Limits
        Bounds to enforce.

    Raises
    ------
    InvalidRecord
        The only exception raised for any bytes input.

    Examples
    --------
    >>> parse_train(b'{"id": "d1", "terms": {"win": 3}, "labels": ["spam"], "op": "unlearn", "ts": 10}')
    TrainRecord(id='d1', op=<Op.UNLEARN: 'unlearn'>, labels=('spam',), text=None, terms={'win': 3}, ts=10.0)
    >>> parse_train(b'{"id": "d1", "text": "", "labels": []}')
    Traceback (most recent call last):
    ...
    sgm.stream.records.InvalidRecord: missing_field: labels is empty; learn and unlearn need at least one label
    """
    obj = _load_object(value, limits)
    doc_id = _check_id(obj, limits)
    op_value = obj.get("op")
    if op_value is None:
        op = Op.LEARN
    elif not isinstance(op_value, str):
        raise InvalidRecord(Reason.WRONG_TYPE, f"op must be a string, got {_type_name(op_value)}")
    else:
        try:
            op = Op(op_value)
        except ValueError:
            raise InvalidRecord(Reason.UNKNOWN_OP, f"op {op_value[:40]!r} is not one of learn, unlearn, forget") from None
    ts = parse_timestamp(obj.get("ts"), limits)
    if op is Op.FORGET:
        return TrainRecord(id=doc_id, op=op, ts=ts)
    labels = _check_labels(obj, limits)
    text, terms = _check_content(obj, limits)
    return TrainRecord(id=doc_id, op=op, labels=labels, text=text, terms=terms, ts=ts)


def parse_score(value: bytes | None, limits: Limits = DEFAULT_LIMITS) -> ScoreRecord:
    """Validate a scoring-topic value and return it as a :class:`ScoreRecord`.

    Checks: size, UTF-8, JSON, object, ``id``, ``ts``, ``text``/``terms``. Other
    fields (``labels``, ``op``...) are ignored.

    Raises
    ------
    InvalidRecord
        The only exception raised for any bytes input.

    Examples
    --------
    >>> parse_score(b'{"id": "q1", "text": "cheap pills", "ts": "2024-01-01T00:00:00Z"}')
    ScoreRecord(id='q1', text='cheap pills', terms=None, ts=1704067200.0)
    >>> parse_score(b'{"id": "q1"}')
    Traceback (most recent call last):
    ...
    sgm.stream.records.InvalidRecord: missing_field: one of text or terms is required
    """
    obj = _load_object(value, limits)
    doc_id = _check_id(obj, limits)
    ts = parse_timestamp(obj.get("ts"), limits)
    text, terms = _check_content(obj, limits)
    return ScoreRecord(id=doc_id, text=text, terms=terms, ts=ts)


# ---------------------------------------------------------------------- serializing


def _dumps(obj: Mapping[str, Any]) -> bytes:
    # Compact, UTF-8 (not \u-escaped), and strict: NaN/inf raise instead of emitting non-JSON.
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


def encode_train(record: TrainRecord) -> bytes:
    """Serialize a :class:`TrainRecord` to its canonical JSON value.

    ``op`` is always written; ``ts`` only when set. Encoding does not validate:
    round-tripping through :func:`parse_train` does.

    Examples
    --------
    >>> encode_train(TrainRecord(id="d1", labels=("a",), text="hello world", ts=1.0))
    b'{"id":"d1","op":"learn","labels":["a"],"text":"hello world","ts":1.0}'
    >>> encode_train(TrainRecord(id="d1", op=Op.FORGET))
    b'{"id":"d1","op":"forget"}'
    """
    obj: dict[str, Any] = {"id": record.id, "op": Op(record.op).value}
    if record.op is not Op.FORGET:
        obj["labels"] = list(record.labels)
        if record.terms is not None:
            obj["terms"] = dict(record.terms)
        else:
            obj["text"] = record.text
    if record.ts is not None:
        obj["ts"] = record.ts
    return _dumps(obj)


def encode_score(record: ScoreRecord) -> bytes:
    """Serialize a :class:`ScoreRecord` to its canonical JSON value.

    Examples
    --------
    >>> encode_score(ScoreRecord(id="q1", text="hi"))
    b'{"id":"q1","text":"hi"}'
    """
    obj: dict[str, Any] = {"id": record.id}
    if record.terms is not None:
        obj["terms"] = dict(record.terms)
    else:
        obj["text"] = record.text
    if record.ts is not None:
        obj["ts"] = record.ts
    return _dumps(obj)


# --------------------------------------------------------------------------- output

#: Rounding slack for posteriors computed in floating point (e.g. 1.0000000000000002).
_P_SLACK = 1e-9


@dataclass(frozen=True, slots=True)
class OutputRecord:
    """One scored document, as written to the output topic.

    Parameters
    ----------
    id : str
        The scored document's id (also the Kafka key).
    top_k : sequence of (label, p)
        Best labels first, ``p`` the posterior probability in [0, 1].
    labels : tuple of str
        The predicted label set; :meth:`from_scores` defaults it to the top label.
    model : mapping
        JSON-serializable description of the model that scored, e.g.
        ``{"kind": "mnb", "version": 42, "docs": 1000}``.
    scored_at : float
        Wall-clock time of scoring, epoch seconds.
    latency_ms : float
        Time from the input record's arrival to scoring, milliseconds.
    ts : float or None
        The input record's event time, echoed for evaluation; omitted when None.

    Examples
    --------
    >>> out = OutputRecord.from_scores("q1", [("spam", 0.9), ("ham", 0.1)], model={"kind": "mnb", "version": 3},
    ...                                scored_at=1700000000.25, latency_ms=1.5)
    >>> encode_output(out)
    b'{"id":"q1","labels":["spam"],"top_k":[{"label":"spam","p":0.9},{"label":"ham","p":0.1}],"model":{"kind":"mnb","version":3},"scored_at":1700000000.25,"latency_ms":1.5}'
    >>> parse_output(encode_output(out)) == out
    True
    """

    id: str
    top_k: tuple[tuple[str, float], ...]
    labels: tuple[str, ...]
    model: Mapping[str, Any]
    scored_at: float
    latency_ms: float
    ts: float | None = None

    @classmethod
    def from_scores(
        cls,
        id: str,  # noqa: A002 - the field's name
        top_k: Iterable[tuple[str, float]],
        *,
        model: Mapping[str, Any],
        latency_ms: float,
        labels: Iterable[str] | None = None,
        scored_at: float | None = None,
        ts: float | None = None,
    ) -> OutputRecord:
        """Build an output record; ``p`` values are cast to float (numpy scalars are fine)."""
        pairs = tuple((str(label), float(p)) for label, p in top_k)
        if labels is not None:
            chosen = tuple(labels)
        else:
            chosen = (pairs[0][0],) if pairs else ()
        return cls(
            id=id,
            top_k=pairs,
            labels=chosen,
            model=model,
            scored_at=time.time() if scored_at is None else float(scored_at),
            latency_ms=float(latency_ms),
            ts=ts,
        )


def encode_output(record: OutputRecord) -> bytes:
    """Serialize an :class:`OutputRecord`.

    Raises
    ------
    ValueError
        If a ``p`` is not finite or outside [0, 1] (beyond rounding slack, which is
        clamped), or another number is not finite: the output must be strict JSON.
    """
    top_k = []
    for label, p in record.top_k:
        p = float(p)
        if not (-_P_SLACK <= p <= 1.0 + _P_SLACK):  # also rejects NaN
            raise ValueError(f"p of label {label!r} is {p}, not a probability")
        top_k.append({"label": label, "p": min(max(p, 0.0), 1.0)})
    obj: dict[str, Any] = {
        "id": record.id,
        "labels": list(record.labels),
        "top_k": top_k,
        "model": dict(record.model),
        "scored_at": float(record.scored_at),
        "latency_ms": float(record.latency_ms),
    }
    if record.ts is not None:
        obj["ts"] = float(record.ts)
    if not all(math.isfinite(obj[k]) for k in ("scored_at", "latency_ms", "ts") if k in obj):
        raise ValueError("scored_at, latency_ms and ts must be finite")
    # orjson: about 5x faster than json.dumps here; it would write NaN as null, which the
    # checks above rule out (the model mapping holds ints and strings)
    return orjson.dumps(obj)


def encode_outputs(ids: Sequence[str], top_labels: Sequence[Sequence[str]], top_p: np.ndarray,
                   labels: Sequence[Sequence[str]], *, model: Mapping[str, Any], scored_at: float,
                   latency_ms: Sequence[float], ts: Sequence[float | None]) -> list[bytes]:
    """Serialize a batch of output records: the same bytes as :func:`encode_output` on each.

    ``top_p`` has one row per record (its ``top_labels``' posteriors, best
    first); the checks run once on the whole array instead of per value.

    >>> one = OutputRecord.from_scores("q1", [("spam", 0.9), ("ham", 0.1)], model={"v": 1},
    ...                                scored_at=5.0, latency_ms=1.5, ts=2.0)
    >>> encode_outputs(["q1"], [["spam", "ham"]], np.array([[0.9, 0.1]]), [["spam"]], model={"v": 1},
    ...                scored_at=5.0, latency_ms=[1.5], ts=[2.0]) == [encode_output(one)]
    True
    """
    top_p = np.asarray(top_p, dtype=np.float64)
    if top_p.size and not ((top_p >= -_P_SLACK) & (top_p <= 1.0 + _P_SLACK)).all():  # also rejects NaN
        raise ValueError("a posterior is not a probability")
    latencies = [float(x) for x in latency_ms]
    if not math.isfinite(scored_at) or not all(map(math.isfinite, latencies)):
        raise ValueError("scored_at and latency_ms must be finite")
    if not all(t is None or math.isfinite(t) for t in ts):
        raise ValueError("ts must be finite")
    model = dict(model)
    scored_at = float(scored_at)
    out = []
    dumps = orjson.dumps
    for doc_id, names, row, chosen, latency, t in zip(ids, top_labels, np.clip(top_p, 0.0, 1.0).tolist(), labels,
                                                      latencies, ts):
        obj: dict[str, Any] = {"id": doc_id, "labels": list(chosen),
                               "top_k": [{"label": n, "p": p} for n, p in zip(names, row)],
                               "model": model, "scored_at": scored_at, "latency_ms": latency}
        if t is not None:
            obj["ts"] = float(t)
        out.append(dumps(obj))
    return out


def _require(obj: Mapping[str, Any], name: str, kind: type | tuple[type, ...], what: str) -> Any:
    value = obj.get(name)
    if value is None:
        raise InvalidRecord(Reason.MISSING_FIELD, f"{name} is required")
    if not isinstance(value, kind) or isinstance(value, bool):
        raise InvalidRecord(Reason.WRONG_TYPE, f"{name} must be {what}, got {_type_name(value)}")
    return value


def parse_output(value: bytes, limits: Limits = DEFAULT_LIMITS) -> OutputRecord:
    """Parse an output-topic value (for evaluators, tests and the demo).

    Raises
    ------
    InvalidRecord
        On anything that :func:`encode_output` would not have written.

    Examples
    --------
    >>> parse_output(b'{"id":"q","labels":[],"top_k":[],"model":{},"scored_at":1,"latency_ms":0}').labels
    ()
    """
    obj = _load_object(value, limits)
    doc_id = _require(obj, "id", str, "a string")
    labels = _require(obj, "labels", list, "an array of strings")
    if not all(isinstance(label, str) for label in labels):
        raise InvalidRecord(Reason.WRONG_TYPE, "labels must be an array of strings")
    top_k = []
    for entry in _require(obj, "top_k", list, "an array of {label, p}"):
        if not isinstance(entry, dict):
            raise InvalidRecord(Reason.WRONG_TYPE, f"top_k entries must be objects, got {_type_name(entry)}")
        label = _require(entry, "label", str, "a string")
        p = _require(entry, "p", (int, float), "a number")
        top_k.append((label, float(p)))
    model = _require(obj, "model", dict, "an object")
    scored_at = _require(obj, "scored_at", (int, float), "a number")
    latency_ms = _require(obj, "latency_ms", (int, float), "a number")
    return OutputRecord(
        id=doc_id,
        top_k=tuple(top_k),
        labels=tuple(labels),
        model=model,
        scored_at=float(scored_at),
        latency_ms=float(latency_ms),
        ts=parse_timestamp(obj.get("ts"), limits),
    )


# ----------------------------------------------------------------------- dead letters


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _unb64(obj: Mapping[str, Any], name: str) -> bytes | None:
    text = obj.get(name)
    if text is None:
        return None
    if not isinstance(text, str):
        raise InvalidRecord(Reason.WRONG_TYPE, f"{name} must be a base64 string, got {_type_name(text)}")
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
    return _dumps(
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
    obj = _load_object(value, limits)
    reason_text = _require(obj, "reason", str, "a string")
    try:
        reason = _reason_of(reason_text)
    except ValueError:
        raise InvalidRecord(Reason.WRONG_TYPE, f"reason {reason_text[:40]!r} is not a known reason code") from None
    detail = _require(obj, "detail", str, "a string")
    source = obj.get("source")
    source = {} if source is None else source
    if not isinstance(source, dict):
        raise InvalidRecord(Reason.WRONG_TYPE, f"source must be an object, got {_type_name(source)}")
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
