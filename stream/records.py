"""Record schemas of the service's topics: validation, parsing and serialization.

Every record on every topic is one UTF-8 JSON object (the Kafka *value*); the Kafka
*key* is the record's ``id`` so that all operations on one document land on one
partition, in order. ``docs/SCHEMAS.md`` is the reference for the fields, limits and
reason codes; this module is their public API, implemented in ``stream/schemas/``
(one module per job):

* training topic  -> :func:`parse_train` -> :class:`TrainRecord` (:func:`encode_train`)   ``schemas/inputs.py``
* scoring topic   -> :func:`parse_score` -> :class:`ScoreRecord` (:func:`encode_score`)   ``schemas/inputs.py``
* output topic    <- :func:`encode_outputs` (a batch; :func:`encode_output`: one
  :class:`OutputRecord`), :func:`parse_output`, :func:`model_version`                  ``schemas/outputs.py``
* dead letters    <- :func:`encode_dead_letter` <- :class:`DeadLetter` (:func:`parse_dead_letter`)
  ``schemas/dead_letters.py``
* :class:`Reason`, :class:`ApplyReason`, :class:`InvalidRecord` (``schemas/reasons.py``),
  :class:`Limits` (``schemas/limits.py``), :func:`parse_timestamp` (``schemas/timestamps.py``)

The parsers are total on bytes: whatever the input, they either return a record or
raise :class:`InvalidRecord`, whose :class:`Reason` is one of a small fixed set of
codes (fit for a Prometheus label) and whose ``detail`` is for humans.

Rules shared by all inputs: a field set to ``null`` is treated as absent; unknown
fields are ignored (producers may add fields such as ``split`` or ``source``).

Examples
--------
>>> record = parse_train(b'{"id": "d1", "text": "cheap pills", "labels": ["spam"]}')
>>> record.op, record.labels
(<Op.LEARN: 'learn'>, ('spam',))
>>> encode_score(ScoreRecord(id="q1", text="cheap pills"))
b'{"id":"q1","text":"cheap pills"}'
"""
from __future__ import annotations

from sgm.stream.schemas.dead_letters import DeadLetter, encode_dead_letter, parse_dead_letter
from sgm.stream.schemas.inputs import (
    Op,
    ScoreRecord,
    TrainRecord,
    encode_score,
    encode_train,
    parse_score,
    parse_train,
)
from sgm.stream.schemas.limits import DEFAULT_LIMITS, MAX_TS, Limits
from sgm.stream.schemas.outputs import OutputRecord, encode_output, encode_outputs, model_version, parse_output
from sgm.stream.schemas.reasons import ApplyReason, InvalidRecord, Reason
from sgm.stream.schemas.timestamps import parse_timestamp

__all__ = [
    "DEFAULT_LIMITS",
    "MAX_TS",
    "ApplyReason",
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
    "encode_outputs",
    "encode_score",
    "encode_train",
    "model_version",
    "parse_dead_letter",
    "parse_output",
    "parse_score",
    "parse_timestamp",
    "parse_train",
]
