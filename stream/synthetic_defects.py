"""Malformed records for the generated stream, each with the :class:`Reason` the validator must give.

:class:`MalformedRecords` turns a valid record into one with a single defect
(bad UTF-8, broken JSON, a missing or mistyped field, an unknown ``op``, a bad
timestamp, a value over a limit, ...), chosen among the configured reasons. The
validator (``stream/records.py``) must reject each with exactly that reason;
``tests/test_synthetic.py`` checks it for every code.

Examples
--------
>>> bad = MalformedRecords(Limits(), [Reason.UNKNOWN_OP], np.random.default_rng(0))
>>> kind, value, reason = bad.make("syn-bad-0000000", {"id": "d1", "text": "hello", "labels": ["a"]}, 1.0)
>>> kind, reason.value
('train', 'unknown_op')
"""
from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Literal

import numpy as np

from sgm.stream.records import Limits, Reason

__all__ = ["BIG_REASONS", "Kind", "MalformedRecords"]

#: The topic a record goes to.
Kind = Literal["train", "score"]
#: Defects that make records about ``limits.max_text_chars`` bytes: drawn 5x less often.
BIG_REASONS = {Reason.TOO_LARGE, Reason.TOO_MANY_TERMS}


class MalformedRecords:
    """Builds one record with a single defect, for a given reason, from a valid one."""

    def __init__(self, limits: Limits, reasons: Sequence[Reason], rng: np.random.Generator) -> None:
        self.limits = limits
        self.rng = rng
        self.reasons = list(reasons)
        weights = np.array([0.2 if r in BIG_REASONS else 1.0 for r in self.reasons])
        self.p = weights / weights.sum() if len(weights) else weights

    def pick(self, options: Sequence):
        return options[int(self.rng.integers(len(options)))]

    def make(self, bad_id: str, source: dict, now: float) -> tuple[Kind, bytes, Reason]:
        """A malformed record derived from the valid record ``source``: its topic, value and expected reason."""
        reason = self.reasons[int(self.rng.choice(len(self.reasons), p=self.p))]
        text = " ".join((source.get("text") or " ".join(source.get("terms", ()))).split()[:12]) or "hello world"
        labels = source.get("labels") or ["business"]
        train_only = {Reason.UNKNOWN_OP, Reason.TOO_MANY_LABELS, Reason.BAD_LABEL}
        kind: Kind = "train" if reason in train_only or self.rng.random() < 0.5 else "score"
        base = {"id": bad_id, "text": text, "ts": now} | ({"labels": labels} if kind == "train" else {})
        value = self._value(reason, kind, base)
        if len(value) > self.limits.max_record_bytes:  # only with unusual limits: size is checked first
            reason = Reason.TOO_LARGE
        return kind, value, reason

    def _value(self, reason: Reason, kind: Kind, base: dict) -> bytes:
        lim = self.limits
        dumps = lambda obj: json.dumps(obj).encode()  # noqa: E731
        if reason is Reason.INVALID_UTF8:
            head, tail = dumps(base).split(b'"text": "', 1)
            return head + b'"text": "' + self.pick([b"\xff\xfe", b"\xc3\x28", b"\xed\xa0\x80", b"\xe2\x82"]) + tail
        if reason is Reason.INVALID_JSON:
            full = dumps(base)
            return self.pick([
                full[: len(full) // 2],
                full[:-1] + b",}",
                full.replace(b'"', b"'"),
                full[:-1] + b', "x": NaN}',
                full + b"\n" + full,
            ])  # fmt: skip
        if reason is Reason.NOT_AN_OBJECT:
            return dumps(self.pick([list(base.values()), base["text"], 42, None]))
        if reason is Reason.MISSING_FIELD:
            choice = self.pick(["id", "content"] + (["labels", "empty_labels"] if kind == "train" else []))
            if choice == "id":
                return dumps({k: v for k, v in base.items() if k != "id"})
            if choice == "content":
                return dumps({k: v for k, v in base.items() if k != "text"})
            return dumps(base | {"labels": None if choice == "labels" else []})
        if reason is Reason.WRONG_TYPE:
            options = [{"id": 12345}, {"text": ["not", "a", "string"]}, {"ts": True}, {"text": None, "terms": "a b"}]
            if kind == "train":
                options += [{"labels": base["labels"][0]}, {"labels": [1, 2]}, {"op": 1}]
            return dumps(base | self.pick(options))
        if reason is Reason.CONFLICTING_FIELDS:
            return dumps(base | {"terms": dict(Counter(base["text"].split()))})
        if reason is Reason.UNKNOWN_OP:
            return dumps(base | {"op": self.pick(["relearn", "delete", "LEARN", "update", ""])})
        if reason is Reason.BAD_TIMESTAMP:
            now = base["ts"]
            return dumps(base | {"ts": self.pick(["yesterday", -5, now * 1000, "2024-13-45", "20240101", 1e300])})
        if reason is Reason.TOO_LARGE:
            return dumps(base | {"text": "a" * (lim.max_text_chars + 1)})
        if reason is Reason.TOO_MANY_TERMS:
            return dumps(base | {"text": None, "terms": {f"t{i}": 1 for i in range(lim.max_terms + 1)}})
        if reason is Reason.TOO_MANY_LABELS:
            return dumps(base | {"labels": [f"label-{i}" for i in range(lim.max_labels + 1)]})
        if reason is Reason.BAD_LABEL:
            return dumps(base | {"labels": [self.pick(["", "   ", "two\nlines", "x" * (lim.max_label_chars + 1)])]})
        if reason is Reason.BAD_TERM:
            return dumps(base | {"text": None, "terms": {"ok": 1, self.pick(["", "tab\there"]): 1}})
        if reason is Reason.BAD_COUNT:
            return dumps(base | {"text": None, "terms": {"ok": 1, "bad": self.pick([0, -1, lim.max_term_count * 10])}})
        if reason is Reason.BAD_RAW_B64:  # a whole message whose base64 does not decode
            raw_b64 = self.pick(["not base64!", "U3ViamVjdDogaGk", "U3Vi\namVjdDogaGk=", "U3ViamVjdDogaGk=?"])
            return dumps({k: v for k, v in base.items() if k != "text"} | {"raw_b64": raw_b64})
        if reason is Reason.BAD_ID:
            return dumps(base | {"id": self.pick(["", "line\nbreak", "x" * (lim.max_id_chars + 1)])})
        raise ValueError(f"no malformed record for {reason}")
