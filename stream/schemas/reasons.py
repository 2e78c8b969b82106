"""Why a record is rejected: the fixed reason codes and the :class:`InvalidRecord` error."""
from __future__ import annotations

import enum

__all__ = ["ApplyReason", "InvalidRecord", "Reason"]


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
    CONFLICTING_FIELDS = "conflicting_fields"  # more than one of text, terms, raw_b64
    UNKNOWN_OP = "unknown_op"  # op is not learn / unlearn / forget
    BAD_TIMESTAMP = "bad_timestamp"  # unparsable, NaN/inf, negative or absurdly large ts
    TOO_LARGE = "too_large"  # record bytes or text characters over the limit
    TOO_MANY_TERMS = "too_many_terms"  # more distinct terms than the limit
    TOO_MANY_LABELS = "too_many_labels"  # more distinct labels than the limit
    BAD_LABEL = "bad_label"  # empty, blank, too long, or holding control characters
    BAD_TERM = "bad_term"  # empty, too long, or holding control characters
    BAD_COUNT = "bad_count"  # term count not finite, not > 0 or over the limit
    BAD_ID = "bad_id"  # empty, too long, or holding control characters
    BAD_RAW_B64 = "bad_raw_b64"  # raw_b64 is not standard base64 (alphabet, padding; no line breaks)


class ApplyReason(enum.StrEnum):
    """Why a record the validator alone cannot judge was not applied.

    These come from the consumer, not the validator: the record parsed, but the
    model refused it, its event time lies too far ahead of the consumer's clock,
    the Kafka client could not fetch it at all, or its output could never be delivered. Like :class:`Reason`, they
    label dead letters and metrics.

    Examples
    --------
    >>> ApplyReason.UNKNOWN_ID.value
    'unknown_id'
    """

    UNKNOWN_ID = "unknown_id"  # unlearn/forget of an id the model does not hold (never learned, or pruned)
    UNLEARN_MISMATCH = "unlearn_mismatch"  # unlearn with labels other than those the id was learned with
    MODEL_REJECTED = "model_rejected"  # the model refused the document (e.g. an unusable label)
    FUTURE_TIMESTAMP = "future_timestamp"  # a learn whose event time is beyond the allowed skew ahead of the clock
    PAST_TIMESTAMP = "past_timestamp"  # a learn so far behind the model's time (decay) that it would weigh nothing
    UNFETCHABLE = "unfetchable"  # the client could not fetch the record within its limits (too large): skipped
    OUTPUT_TOO_LARGE = "output_too_large"  # the scoring record's output is larger than the producer or topic accepts
    SCORING_FAILED = "scoring_failed"  # the model raised while scoring this document alone (a fault, isolated)
    LEARN_FAILED = "learn_failed"  # the model raised while learning this record alone: skipped, model reloaded


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
    >>> from sgm.stream.records import parse_train
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
