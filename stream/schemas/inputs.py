"""The input topics' records: training and scoring records, validated and encoded.

* training topic -> :func:`parse_train` -> :class:`TrainRecord` (:func:`encode_train`)
* scoring topic  -> :func:`parse_score` -> :class:`ScoreRecord` (:func:`encode_score`)

The parsers are total on bytes: whatever the input, they either return a record or
raise :class:`InvalidRecord` with one of the fixed :class:`Reason` codes. A field set
to ``null`` is treated as absent; unknown fields are ignored.

A document is one of ``text``, ``terms`` or ``raw_b64`` (a whole email: the standard
base64 of its bytes, decoded here into ``raw``; the service reads it as a
:class:`sgm.model.mail.Message`). Base64 that does not decode is ``bad_raw_b64``;
malformed MIME inside valid base64 is not a validation error (the model reads what it
can and flags the rest).
"""
from __future__ import annotations

import base64
import binascii
import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .json_values import dumps_strict, json_type_name, load_object, require_field
from .limits import DEFAULT_LIMITS, Limits
from .reasons import InvalidRecord, Reason
from .timestamps import parse_timestamp

__all__ = ["Op", "ScoreRecord", "TrainRecord", "encode_score", "encode_train", "parse_score", "parse_train"]

# C0/C1 control characters (incl. newline and tab) and lone surrogates: not allowed in
# ids, labels and terms, which end up in keys, metric labels and log lines.
_BAD_NAME_CHARS = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


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


@dataclass(frozen=True, slots=True)
class TrainRecord:
    """A validated training-topic record.

    Exactly one of ``text`` / ``terms`` / ``raw`` is set for ``learn`` and ``unlearn``;
    ``forget`` carries only ``id`` (and ``ts`` if given). ``terms`` is a plain dict
    for speed and pickling: treat it as read-only. ``raw`` holds the decoded bytes of a
    ``raw_b64`` message (left out of the repr: it can be large).

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
    raw: bytes | None = field(default=None, repr=False)

    @property
    def document(self) -> str | Mapping[str, int | float] | bytes | None:
        """The content: the text, the term counts, or the message bytes (``None`` for ``forget``)."""
        return self.text if self.text is not None else self.terms if self.terms is not None else self.raw


@dataclass(frozen=True, slots=True)
class ScoreRecord:
    """A validated scoring-topic record (exactly one of ``text`` / ``terms`` / ``raw``).

    Examples
    --------
    >>> r = parse_score(b'{"id": "q1", "terms": {"oil": 2, "price": 1}}')
    >>> r.terms, r.text, r.ts
    ({'oil': 2, 'price': 1}, None, None)
    >>> parse_score(encode_score(r)) == r
    True
    >>> parse_score(b'{"id": "m1", "raw_b64": "U3ViamVjdDogaGkKCmZyZWUgcGlsbHM="}').raw
    b'Subject: hi\\n\\nfree pills'
    """

    id: str
    text: str | None = None
    terms: Mapping[str, int | float] | None = None
    ts: float | None = None
    raw: bytes | None = field(default=None, repr=False)

    @property
    def document(self) -> str | Mapping[str, int | float] | bytes:
        """The content: the text, the term counts, or the message bytes."""
        return self.text if self.text is not None else self.terms if self.terms is not None else self.raw


# --------------------------------------------------------------------------- parsing


def _check_id(obj: dict[str, Any], limits: Limits) -> str:
    doc_id = obj.get("id")
    if type(doc_id) is str and 0 < len(doc_id) <= limits.max_id_chars and doc_id.isascii() and doc_id.isprintable():
        return doc_id  # the common case, at a fraction of the cost: printable ASCII holds no control character
    doc_id = require_field(obj, "id", str, "a string")  # "id is required", "id must be a string, got ..."
    if not doc_id:
        raise InvalidRecord(Reason.BAD_ID, "id is empty")
    if len(doc_id) > limits.max_id_chars:
        raise InvalidRecord(Reason.BAD_ID, f"id has {len(doc_id)} characters, limit {limits.max_id_chars}")
    bad = _BAD_NAME_CHARS.search(doc_id)
    if bad:
        raise InvalidRecord(Reason.BAD_ID, f"id holds control character or lone surrogate {bad.group()!r}")
    return doc_id


def _check_labels(obj: dict[str, Any], limits: Limits) -> tuple[str, ...]:
    labels = obj.get("labels")
    if labels is None:
        raise InvalidRecord(Reason.MISSING_FIELD, "labels is required for learn and unlearn")
    if not isinstance(labels, list):
        raise InvalidRecord(Reason.WRONG_TYPE, f"labels must be an array of strings, got {json_type_name(labels)}")
    if not labels:
        raise InvalidRecord(Reason.MISSING_FIELD, "labels is empty; learn and unlearn need at least one label")
    for label in labels:
        if not isinstance(label, str):
            raise InvalidRecord(Reason.WRONG_TYPE, f"labels must be an array of strings, found {json_type_name(label)}")
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
        raise InvalidRecord(Reason.WRONG_TYPE, f"terms must be an object of term: count, got {json_type_name(terms)}")
    if len(terms) > limits.max_terms:
        raise InvalidRecord(Reason.TOO_MANY_TERMS, f"{len(terms)} distinct terms, limit {limits.max_terms}")
    for term, count in terms.items():
        # bool is an int subclass; "true" is not a count
        if type(count) is not int and type(count) is not float:
            raise InvalidRecord(Reason.WRONG_TYPE, f"count of term {term[:60]!r} must be a number, got {json_type_name(count)}")
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


def _check_raw(raw_b64: Any) -> bytes:
    if not isinstance(raw_b64, str):
        raise InvalidRecord(Reason.WRONG_TYPE, f"raw_b64 must be a base64 string, got {json_type_name(raw_b64)}")
    try:
        # validate=True: the RFC 4648 alphabet and padding only (no line breaks, no other characters)
        return base64.b64decode(raw_b64, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidRecord(Reason.BAD_RAW_B64, f"raw_b64 is not standard base64 ({exc})") from None


def _check_content(obj: dict[str, Any], limits: Limits) -> tuple[str | None, dict[str, int | float] | None,
                                                                  bytes | None]:
    text = obj.get("text")
    terms = obj.get("terms")
    raw_b64 = obj.get("raw_b64")
    if type(text) is str and terms is None and raw_b64 is None and len(text) <= limits.max_text_chars \
            and text.isascii():  # the common case (no surrogate in ASCII), checked at a fraction of the cost
        return text, None, None
    given = [name for name, value in (("text", text), ("terms", terms), ("raw_b64", raw_b64)) if value is not None]
    if len(given) > 1:
        raise InvalidRecord(Reason.CONFLICTING_FIELDS,
                            f"give exactly one of text, terms, raw_b64, not {' and '.join(given)}")
    if not given:
        raise InvalidRecord(Reason.MISSING_FIELD, "one of text, terms or raw_b64 is required")
    if raw_b64 is not None:
        return None, None, _check_raw(raw_b64)
    if terms is not None:
        return None, _check_terms(terms, limits), None
    if not isinstance(text, str):
        raise InvalidRecord(Reason.WRONG_TYPE, f"text must be a string, got {json_type_name(text)}")
    if len(text) > limits.max_text_chars:
        raise InvalidRecord(Reason.TOO_LARGE, f"text has {len(text)} characters, limit {limits.max_text_chars}")
    bad = None if text.isascii() else _SURROGATE.search(text)  # isascii() is O(1) in CPython
    if bad:  # a JSON \ud800 escape: valid JSON, but not encodable as UTF-8
        raise InvalidRecord(Reason.INVALID_UTF8, f"text holds a lone surrogate at character {bad.start()}")
    return text, None, None


def parse_train(value: bytes | None, limits: Limits = DEFAULT_LIMITS) -> TrainRecord:
    """Validate a training-topic value and return it as a :class:`TrainRecord`.

    Checks run in this order, the first failure wins: size, UTF-8, JSON, object,
    ``id``, ``op``, ``ts``, then (``learn``/``unlearn`` only) ``labels`` and
    ``text``/``terms``/``raw_b64``. ``forget`` ignores every field but ``id``, ``op`` and ``ts``.

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
    sgm.stream.schemas.reasons.InvalidRecord: missing_field: labels is empty; learn and unlearn need at least one label
    """
    obj = load_object(value, limits)
    doc_id = _check_id(obj, limits)
    op_value = obj.get("op")
    if op_value is None:
        op = Op.LEARN
    elif not isinstance(op_value, str):
        raise InvalidRecord(Reason.WRONG_TYPE, f"op must be a string, got {json_type_name(op_value)}")
    else:
        try:
            op = Op(op_value)
        except ValueError:
            raise InvalidRecord(Reason.UNKNOWN_OP, f"op {op_value[:40]!r} is not one of learn, unlearn, forget") from None
    ts = parse_timestamp(obj.get("ts"), limits)
    if op is Op.FORGET:
        return TrainRecord(id=doc_id, op=op, ts=ts)
    labels = _check_labels(obj, limits)
    text, terms, raw = _check_content(obj, limits)
    return TrainRecord(id=doc_id, op=op, labels=labels, text=text, terms=terms, ts=ts, raw=raw)


def parse_score(value: bytes | None, limits: Limits = DEFAULT_LIMITS) -> ScoreRecord:
    """Validate a scoring-topic value and return it as a :class:`ScoreRecord`.

    Checks: size, UTF-8, JSON, object, ``id``, ``ts``, ``text``/``terms``/``raw_b64``. Other
    fields (``labels``, ``op``...) are ignored. Like :func:`parse_train`, it raises
    only :class:`InvalidRecord`, whatever the bytes.

    Examples
    --------
    >>> parse_score(b'{"id": "q1", "text": "cheap pills", "ts": "2024-01-01T00:00:00Z"}')
    ScoreRecord(id='q1', text='cheap pills', terms=None, ts=1704067200.0)
    >>> parse_score(b'{"id": "q1"}')
    Traceback (most recent call last):
    ...
    sgm.stream.schemas.reasons.InvalidRecord: missing_field: one of text, terms or raw_b64 is required
    >>> parse_score(b'{"id": "m1", "raw_b64": "U3ViamVjdDogaGk"}')
    Traceback (most recent call last):
    ...
    sgm.stream.schemas.reasons.InvalidRecord: bad_raw_b64: raw_b64 is not standard base64 (Incorrect padding)
    """
    obj = load_object(value, limits)
    doc_id = _check_id(obj, limits)
    ts = parse_timestamp(obj.get("ts"), limits)
    text, terms, raw = _check_content(obj, limits)
    return ScoreRecord(id=doc_id, text=text, terms=terms, ts=ts, raw=raw)


# ---------------------------------------------------------------------- serializing


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
    if record.op is Op.FORGET:
        return _encode(obj, record, with_content=False)
    obj["labels"] = list(record.labels)
    return _encode(obj, record)


def encode_score(record: ScoreRecord) -> bytes:
    """Serialize a :class:`ScoreRecord` to its canonical JSON value.

    Examples
    --------
    >>> encode_score(ScoreRecord(id="q1", text="hi"))
    b'{"id":"q1","text":"hi"}'
    >>> encode_score(ScoreRecord(id="m1", raw=b"Subject: hi"))
    b'{"id":"m1","raw_b64":"U3ViamVjdDogaGk="}'
    """
    return _encode({"id": record.id}, record)


def _encode(obj: dict[str, Any], record: TrainRecord | ScoreRecord, with_content: bool = True) -> bytes:
    """Add the record's ``terms`` (or ``raw_b64``, or ``text``) and ``ts`` (when set) to ``obj``, in that order,
    and dump it."""
    if with_content:
        if record.terms is not None:
            obj["terms"] = dict(record.terms)
        elif record.raw is not None:
            obj["raw_b64"] = base64.b64encode(record.raw).decode("ascii")
        else:
            obj["text"] = record.text
    if record.ts is not None:
        obj["ts"] = record.ts
    return dumps_strict(obj)
