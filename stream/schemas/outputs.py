"""The output topic's records: one per scored document.

:func:`encode_outputs` is the schema's one encoder: it writes a batch (what the
classifier scores at once); :func:`encode_output` writes one
:class:`OutputRecord` as a batch of one, so the two cannot drift apart.
:func:`parse_output` reads a record back, and :func:`model_version` is the
``model.version`` the service writes (docs/SCHEMAS.md).

Two optional objects: ``decision`` (the spam verdict: posterior, threshold, learn
guards; when the service has a spam decision configured) and ``mail`` (``flags``:
what was malformed in a whole message read from ``raw_b64``; only for such records).
"""
from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from .json_values import json_type_name, load_object, require_field
from .limits import DEFAULT_LIMITS, Limits
from .reasons import InvalidRecord, Reason
from .timestamps import parse_timestamp

__all__ = ["OutputRecord", "encode_output", "encode_outputs", "model_version", "parse_output"]

#: Rounding slack for posteriors computed in floating point (e.g. 1.0000000000000002).
_P_SLACK = 1e-9


def model_version(train_offsets: Mapping[int, int]) -> int:
    """The ``model.version`` of an output: how many training-topic offsets the model has applied.

    The sum, over the training topic's partitions, of the next offset the model
    will apply (the offsets a snapshot stores with it, docs/PROTOCOL.md). It
    counts every training record read -- learnt, unlearnt, forgotten or
    dead-lettered -- and transaction markers, so it grows as the model learns and
    never depends on the process: with one training partition (the recommended
    layout) two replicas whose outputs carry the same version scored with the
    same model; with several, compare ``model.train_offsets``.

    >>> model_version({0: 1200, 1: 34}), model_version({})
    (1234, 0)
    """
    return sum(int(offset) for offset in train_offsets.values())


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
        ``{"kind": "mnb", "version": 42, "documents": 1000}``; ``version``, when
        present, is a non-negative integer (:func:`model_version`).
    scored_at : float
        Wall-clock time of scoring, epoch seconds.
    latency_ms : float
        Time from the input record's arrival to scoring, milliseconds.
    ts : float or None
        The input record's event time, echoed for evaluation; omitted when None.
    decision : mapping or None
        The spam decision (``label``, ``p``, ``threshold``, ``verdict``, ``learned``, ``min``); omitted when None.
    mail : mapping or None
        For a whole message: ``{"flags": [...]}``; omitted when None.

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
    decision: Mapping[str, Any] | None = None
    mail: Mapping[str, Any] | None = None

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
        decision: Mapping[str, Any] | None = None,
        mail: Mapping[str, Any] | None = None,
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
            decision=decision,
            mail=mail,
        )


def _valid_version(version: Any) -> bool:
    return type(version) is int and version >= 0


def encode_outputs(ids: Sequence[str], top_labels: Sequence[Sequence[str]], top_p: np.ndarray,
                   labels: Sequence[Sequence[str]], *, model: Mapping[str, Any], scored_at: float,
                   latency_ms: Sequence[float], ts: Sequence[float | None],
                   decisions: Sequence[Mapping[str, Any] | None] | None = None,
                   mail: Sequence[Mapping[str, Any] | None] | None = None) -> list[bytes]:
    """Serialize a batch of output records (the output schema's one encoder).

    Record ``i`` is ``ids[i]``, its ``top_labels[i]`` with their posteriors
    ``top_p[i]`` (one row per record, best first), the predicted set ``labels[i]``,
    ``latency_ms[i]`` and event time ``ts[i]`` (``None``: omitted), and when given
    ``decisions[i]`` and ``mail[i]`` (``None``: omitted); ``model`` and ``scored_at``
    are the batch's. The checks run once on the whole array.

    Raises
    ------
    ValueError
        If a ``p`` is not finite or outside [0, 1] (beyond rounding slack, which is
        clamped), another number is not finite, or ``model["version"]`` is not a
        non-negative integer: the output must be strict JSON of the documented schema.

    Examples
    --------
    >>> encode_outputs(["q1", "q2"], [["spam", "ham"], ["ham", "spam"]], np.array([[0.9, 0.1], [0.6, 0.4]]),
    ...                [["spam"], ["ham"]], model={"kind": "mnb", "version": 7}, scored_at=5.0,
    ...                latency_ms=[1.5, 2.0], ts=[2.0, None])[1]
    b'{"id":"q2","labels":["ham"],"top_k":[{"label":"ham","p":0.6},{"label":"spam","p":0.4}],"model":{"kind":"mnb","version":7},"scored_at":5.0,"latency_ms":2.0}'
    """
    top_p = np.asarray(top_p, dtype=np.float64)
    if top_p.size:
        probable = (top_p >= -_P_SLACK) & (top_p <= 1.0 + _P_SLACK)  # also false for NaN
        if not probable.all():
            row, column = np.argwhere(~probable)[0]
            raise ValueError(f"p of label {top_labels[row][column]!r} is {top_p[row, column]}, not a probability")
    scored_at = float(scored_at)
    latencies = [float(x) for x in latency_ms]
    if not math.isfinite(scored_at) or not all(map(math.isfinite, latencies)):
        raise ValueError("scored_at and latency_ms must be finite")
    if not all(t is None or math.isfinite(t) for t in ts):
        raise ValueError("ts must be finite")
    model = dict(model)
    if model.get("version") is not None and not _valid_version(model["version"]):
        raise ValueError(f"model version must be a non-negative integer, got {model['version']!r}")
    for decision in decisions or ():
        if decision is not None and not (0.0 <= decision.get("p", math.nan) <= 1.0):
            raise ValueError(f"decision p must be a probability, got {decision.get('p')!r}")
    extras = list(zip(decisions or [None] * len(ids), mail or [None] * len(ids)))
    if len(extras) != len(ids):
        raise ValueError("decisions and mail must have one entry per record")
    out = []
    # orjson: about 5x faster than json.dumps here; it would write NaN as null, which the
    # checks above rule out
    dumps = orjson.dumps
    model_json = orjson.Fragment(dumps(model))  # the batch's model object, serialized once (the same bytes)
    for doc_id, names, row, chosen, latency, t, (decision, read) in zip(
            ids, top_labels, np.clip(top_p, 0.0, 1.0).tolist(), labels, latencies, ts, extras):
        obj: dict[str, Any] = {"id": doc_id, "labels": list(chosen),
                               "top_k": [{"label": n, "p": p} for n, p in zip(names, row)],
                               "model": model_json, "scored_at": scored_at, "latency_ms": latency}
        if t is not None:
            obj["ts"] = float(t)
        if decision is not None:
            obj["decision"] = decision
        if read is not None:
            obj["mail"] = read
        out.append(dumps(obj))
    return out


def encode_output(record: OutputRecord) -> bytes:
    """Serialize one :class:`OutputRecord`: :func:`encode_outputs` on a batch of one.

    Raises
    ------
    ValueError
        As :func:`encode_outputs`.
    """
    names = [label for label, _ in record.top_k]
    posteriors = np.array([float(p) for _, p in record.top_k], dtype=np.float64).reshape(1, len(names))
    return encode_outputs([record.id], [names], posteriors, [record.labels], model=record.model,
                          scored_at=record.scored_at, latency_ms=[record.latency_ms], ts=[record.ts],
                          decisions=[record.decision], mail=[record.mail])[0]


def parse_output(value: bytes, limits: Limits = DEFAULT_LIMITS) -> OutputRecord:
    """Parse an output-topic value (for evaluators, tests and the demo).

    ``model.version`` may be absent (outputs written before it existed); when
    present it must be a non-negative integer.

    Raises
    ------
    InvalidRecord
        On anything that :func:`encode_outputs` would not have written.

    Examples
    --------
    >>> parse_output(b'{"id":"q","labels":[],"top_k":[],"model":{},"scored_at":1,"latency_ms":0}').labels
    ()
    >>> parse_output(b'{"id":"q","labels":[],"top_k":[],"model":{"version":-1},"scored_at":1,"latency_ms":0}')
    Traceback (most recent call last):
    ...
    sgm.stream.schemas.reasons.InvalidRecord: wrong_type: model.version must be a non-negative integer, got number
    """
    obj = load_object(value, limits)
    doc_id = require_field(obj, "id", str, "a string")
    labels = require_field(obj, "labels", list, "an array of strings")
    if not all(isinstance(label, str) for label in labels):
        raise InvalidRecord(Reason.WRONG_TYPE, "labels must be an array of strings")
    top_k = []
    for entry in require_field(obj, "top_k", list, "an array of {label, p}"):
        if not isinstance(entry, dict):
            raise InvalidRecord(Reason.WRONG_TYPE, f"top_k entries must be objects, got {json_type_name(entry)}")
        label = require_field(entry, "label", str, "a string")
        p = require_field(entry, "p", (int, float), "a number")
        top_k.append((label, float(p)))
    model = require_field(obj, "model", dict, "an object")
    if model.get("version") is not None and not _valid_version(model["version"]):
        raise InvalidRecord(Reason.WRONG_TYPE,
                            f"model.version must be a non-negative integer, got {json_type_name(model['version'])}")
    scored_at = require_field(obj, "scored_at", (int, float), "a number")
    latency_ms = require_field(obj, "latency_ms", (int, float), "a number")
    optional = {}
    for name in ("decision", "mail"):
        value = obj.get(name)
        if value is not None and not isinstance(value, dict):
            raise InvalidRecord(Reason.WRONG_TYPE, f"{name} must be an object, got {json_type_name(value)}")
        optional[name] = value
    return OutputRecord(
        id=doc_id,
        top_k=tuple(top_k),
        labels=tuple(labels),
        model=model,
        scored_at=float(scored_at),
        latency_ms=float(latency_ms),
        ts=parse_timestamp(obj.get("ts"), limits),
        **optional,
    )
