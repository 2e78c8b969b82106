"""Record schemas: every reason code, round trips, and totality on arbitrary input."""
from __future__ import annotations

import json
import math
import pickle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sgm.stream.records import (
    DEFAULT_LIMITS,
    DeadLetter,
    InvalidRecord,
    Limits,
    Op,
    OutputRecord,
    Reason,
    ScoreRecord,
    TrainRecord,
    encode_dead_letter,
    encode_output,
    encode_score,
    encode_train,
    parse_dead_letter,
    parse_output,
    parse_score,
    parse_timestamp,
    parse_train,
)

SMALL = Limits(
    max_record_bytes=6000, max_text_chars=50, max_terms=3, max_term_count=100, max_labels=2,
    max_label_chars=10, max_id_chars=8, max_term_chars=6,
)  # fmt: skip


def js(**fields) -> bytes:
    return json.dumps(fields).encode()


# (case name, parser, raw value, expected reason) -- parsed with SMALL limits
BAD_CASES = [
    ("bytes not utf-8", parse_train, b'{"id": "a\xff", "text": "", "labels": ["x"]}', Reason.INVALID_UTF8),
    ("truncated utf-8", parse_score, b'{"id": "\xc3', Reason.INVALID_UTF8),
    ("lone surrogate in text", parse_train, b'{"id": "a", "text": "x\\ud800y", "labels": ["x"]}', Reason.INVALID_UTF8),
    ("truncated json", parse_train, b'{"id": "a", "text": "x", "lab', Reason.INVALID_JSON),
    ("empty value", parse_score, b"", Reason.INVALID_JSON),
    ("two json texts", parse_score, b'{"id": "a", "text": ""} {}', Reason.INVALID_JSON),
    ("NaN literal", parse_train, b'{"id": "a", "terms": {"x": NaN}, "labels": ["x"]}', Reason.INVALID_JSON),
    ("Infinity ts", parse_score, b'{"id": "a", "text": "", "ts": Infinity}', Reason.INVALID_JSON),
    ("deep nesting", parse_score, b"[" * 1500, Reason.INVALID_JSON),
    ("huge integer literal", parse_score, b'{"id": "a", "text": "", "ts": ' + b"9" * 5000 + b"}", Reason.INVALID_JSON),
    ("array", parse_train, b"[]", Reason.NOT_AN_OBJECT),
    ("string", parse_score, b'"hello"', Reason.NOT_AN_OBJECT),
    ("json null", parse_score, b"null", Reason.NOT_AN_OBJECT),
    ("tombstone", parse_train, None, Reason.NOT_AN_OBJECT),
    ("no id", parse_train, js(text="x", labels=["a"]), Reason.MISSING_FIELD),
    ("null id", parse_score, js(id=None, text="x"), Reason.MISSING_FIELD),
    ("no labels", parse_train, js(id="a", text="x"), Reason.MISSING_FIELD),
    ("empty labels", parse_train, js(id="a", text="x", labels=[]), Reason.MISSING_FIELD),
    ("unlearn without labels", parse_train, js(id="a", text="x", op="unlearn"), Reason.MISSING_FIELD),
    ("no text or terms", parse_train, js(id="a", labels=["x"]), Reason.MISSING_FIELD),
    ("score no text", parse_score, js(id="a"), Reason.MISSING_FIELD),
    ("id number", parse_train, js(id=7, text="x", labels=["a"]), Reason.WRONG_TYPE),
    ("labels string", parse_train, js(id="a", text="x", labels="spam"), Reason.WRONG_TYPE),
    ("label number", parse_train, js(id="a", text="x", labels=["a", 1]), Reason.WRONG_TYPE),
    ("text number", parse_score, js(id="a", text=3), Reason.WRONG_TYPE),
    ("terms list", parse_score, js(id="a", terms=["x"]), Reason.WRONG_TYPE),
    ("count string", parse_score, js(id="a", terms={"x": "2"}), Reason.WRONG_TYPE),
    ("count bool", parse_score, js(id="a", terms={"x": True}), Reason.WRONG_TYPE),
    ("op number", parse_train, js(id="a", text="x", labels=["a"], op=1), Reason.WRONG_TYPE),
    ("ts bool", parse_score, js(id="a", text="x", ts=True), Reason.WRONG_TYPE),
    ("ts object", parse_score, js(id="a", text="x", ts={"s": 1}), Reason.WRONG_TYPE),
    ("text and terms", parse_train, js(id="a", text="x", terms={"x": 1}, labels=["a"]), Reason.CONFLICTING_FIELDS),
    ("score text and terms", parse_score, js(id="a", text="", terms={}), Reason.CONFLICTING_FIELDS),
    ("unknown op", parse_train, js(id="a", text="x", labels=["a"], op="relearn"), Reason.UNKNOWN_OP),
    ("op wrong case", parse_train, js(id="a", op="FORGET"), Reason.UNKNOWN_OP),
    ("ts words", parse_score, js(id="a", text="x", ts="yesterday"), Reason.BAD_TIMESTAMP),
    ("ts month 13", parse_score, js(id="a", text="x", ts="2024-13-01"), Reason.BAD_TIMESTAMP),
    ("ts basic format", parse_score, js(id="a", text="x", ts="20240101"), Reason.BAD_TIMESTAMP),
    ("ts numeric string", parse_score, js(id="a", text="x", ts="1700000000"), Reason.BAD_TIMESTAMP),
    ("ts negative", parse_score, js(id="a", text="x", ts=-1), Reason.BAD_TIMESTAMP),
    ("ts before 1970", parse_score, js(id="a", text="x", ts="1969-12-31"), Reason.BAD_TIMESTAMP),
    ("ts milliseconds", parse_score, js(id="a", text="x", ts=1_700_000_000_000), Reason.BAD_TIMESTAMP),
    ("ts float overflow", parse_score, b'{"id": "a", "text": "x", "ts": 1e400}', Reason.BAD_TIMESTAMP),
    ("forget checks ts", parse_train, js(id="a", op="forget", ts="soon"), Reason.BAD_TIMESTAMP),
    ("record bytes", parse_score, js(id="a", text="x" * 6000), Reason.TOO_LARGE),
    ("text chars", parse_train, js(id="a", text="x" * 51, labels=["a"]), Reason.TOO_LARGE),
    ("terms", parse_score, js(id="a", terms={"a": 1, "b": 1, "c": 1, "d": 1}), Reason.TOO_MANY_TERMS),
    ("labels", parse_train, js(id="a", text="", labels=["a", "b", "c"]), Reason.TOO_MANY_LABELS),
    ("empty label", parse_train, js(id="a", text="", labels=[""]), Reason.BAD_LABEL),
    ("blank label", parse_train, js(id="a", text="", labels=["  "]), Reason.BAD_LABEL),
    ("long label", parse_train, js(id="a", text="", labels=["x" * 11]), Reason.BAD_LABEL),
    ("newline in label", parse_train, js(id="a", text="", labels=["a\nb"]), Reason.BAD_LABEL),
    ("surrogate label", parse_train, b'{"id": "a", "text": "", "labels": ["\\udc80"]}', Reason.BAD_LABEL),
    ("empty term", parse_score, js(id="a", terms={"": 1}), Reason.BAD_TERM),
    ("long term", parse_score, js(id="a", terms={"x" * 7: 1}), Reason.BAD_TERM),
    ("control term", parse_score, js(id="a", terms={"a\x00": 1}), Reason.BAD_TERM),
    ("zero count", parse_score, js(id="a", terms={"x": 0}), Reason.BAD_COUNT),
    ("negative count", parse_score, js(id="a", terms={"x": -2}), Reason.BAD_COUNT),
    ("count over limit", parse_score, js(id="a", terms={"x": 101}), Reason.BAD_COUNT),
    ("count overflow", parse_score, b'{"id": "a", "terms": {"x": 1e400}}', Reason.BAD_COUNT),
    ("raw_b64 not base64", parse_score, js(id="a", raw_b64="not base64!"), Reason.BAD_RAW_B64),
    ("raw_b64 unpadded", parse_train, js(id="a", raw_b64="U3ViamVjdDogaGk", labels=["a"]), Reason.BAD_RAW_B64),
    ("raw_b64 line breaks", parse_score, js(id="a", raw_b64="U3Vi\namVjdDogaGk="), Reason.BAD_RAW_B64),
    ("raw_b64 number", parse_score, js(id="a", raw_b64=12), Reason.WRONG_TYPE),
    ("raw_b64 and text", parse_train, js(id="a", text="x", raw_b64="", labels=["a"]), Reason.CONFLICTING_FIELDS),
    ("raw_b64 and terms", parse_score, js(id="a", terms={}, raw_b64="eA=="), Reason.CONFLICTING_FIELDS),
    ("raw_b64 too large", parse_score, js(id="a", raw_b64="eA==" * 1500), Reason.TOO_LARGE),
    ("empty id", parse_train, js(id="", text="", labels=["a"]), Reason.BAD_ID),
    ("long id", parse_score, js(id="x" * 9, text=""), Reason.BAD_ID),
    ("tab in id", parse_score, js(id="a\tb", text=""), Reason.BAD_ID),
]


@pytest.mark.parametrize(("parser", "value", "reason"), [c[1:] for c in BAD_CASES], ids=[c[0] for c in BAD_CASES])
def test_bad_record_gives_its_reason(parser, value, reason):
    with pytest.raises(InvalidRecord) as info:
        parser(value, SMALL)
    assert info.value.reason is reason, info.value.detail
    assert info.value.detail


def test_every_reason_code_has_a_case():
    assert {c[3] for c in BAD_CASES} == set(Reason)


def test_reason_codes_are_prometheus_safe():
    for reason in Reason:
        assert reason.value.isidentifier() and reason.value.islower()
        assert str(reason) == reason.value


GOOD_TRAIN = [
    (js(id="a", text="hello world", labels=["x"]), TrainRecord(id="a", labels=("x",), text="hello world")),
    (js(id="a", text="", labels=["x"]), TrainRecord(id="a", labels=("x",), text="")),  # empty docs exist
    (js(id="a", text="t", labels=["b", "a", "b"]), TrainRecord(id="a", labels=("b", "a"), text="t")),
    (js(id="a", terms={"x": 2, "y": 0.5}, labels=["l"], op="unlearn"),
     TrainRecord(id="a", op=Op.UNLEARN, labels=("l",), terms={"x": 2, "y": 0.5})),
    (js(id="a", op="forget"), TrainRecord(id="a", op=Op.FORGET)),
    # forget ignores everything but id/op/ts, even junk
    (js(id="a", op="forget", labels=3, text=1, terms=2), TrainRecord(id="a", op=Op.FORGET)),
    (js(id="a", text="", labels=["x"], op=None, ts=None, terms=None), TrainRecord(id="a", labels=("x",), text="")),
    (js(id="a", text="", labels=["x"], split="train", extra={"any": 1}), TrainRecord(id="a", labels=("x",), text="")),
    (js(id="a", text="", labels=["x"], ts=5), TrainRecord(id="a", labels=("x",), text="", ts=5.0)),
    (js(id="a", text="", labels=["x"], ts="1970-01-01T00:00:05"), TrainRecord(id="a", labels=("x",), text="", ts=5.0)),
    (js(id="a", text="", labels=["économie"]), TrainRecord(id="a", labels=("économie",), text="")),
    ('{"id": "ü", "text": "naïve ☃ \\n", "labels": ["x"]}'.encode(), TrainRecord(id="ü", labels=("x",), text="naïve ☃ \n")),
    # a whole message: standard base64, decoded; an empty message is valid (the model flags it)
    (js(id="m", raw_b64="U3ViamVjdDogaGkKCmZyZWUgcGlsbHM=", labels=["spam"]),
     TrainRecord(id="m", labels=("spam",), raw=b"Subject: hi\n\nfree pills")),
    (js(id="m", raw_b64="", labels=["ham"], text=None), TrainRecord(id="m", labels=("ham",), raw=b"")),
    (js(id="m", raw_b64="/+8A", labels=["ham"], op="unlearn"), TrainRecord(id="m", op=Op.UNLEARN, labels=("ham",),
                                                                          raw=b"\xff\xef\x00")),
]  # fmt: skip


@pytest.mark.parametrize(("value", "expected"), GOOD_TRAIN)
def test_good_training_records(value, expected):
    record = parse_train(value)
    assert record == expected
    assert parse_train(encode_train(record)) == record


@pytest.mark.parametrize(
    ("ts", "seconds"),
    [
        (0, 0.0),
        (1030016176.25, 1030016176.25),
        ("2002-08-22T11:36:16+00:00", 1030016176.0),
        ("2002-08-22T11:36:16Z", 1030016176.0),
        ("2002-08-22T13:36:16+02:00", 1030016176.0),
        ("2002-08-22T11:36:16", 1030016176.0),  # naive = UTC
        ("2002-08-22 11:36:16", 1030016176.0),
        ("2002-08-22T11:36:16.5", 1030016176.5),
        ("2002-08-22", 1029974400.0),  # date only = midnight UTC
        ("1987-10-20T09:05:31", 561719131.0),
    ],
)
def test_timestamps(ts, seconds):
    assert parse_timestamp(ts) == seconds
    assert parse_score(js(id="a", text="", ts=ts)).ts == seconds


def test_limits_defaults_cover_the_shared_datasets():
    # numbers from /work/shared/data: longest text 228,369 chars, 16 labels, id 62 chars
    assert DEFAULT_LIMITS.max_text_chars >= 228_369
    assert DEFAULT_LIMITS.max_labels >= 16
    assert DEFAULT_LIMITS.max_id_chars >= 62
    assert DEFAULT_LIMITS.max_record_bytes == 1 << 20


def test_limit_boundaries_are_inclusive():
    parse_train(js(id="x" * 8, text="x" * 50, labels=["a" * 10, "b"]), SMALL)
    parse_score(js(id="a", terms={"aaaaaa": 100, "b": 1, "c": 0.001}), SMALL)
    value = js(id="a", text="x" * 10)
    parse_score(value, Limits(max_record_bytes=len(value)))
    with pytest.raises(InvalidRecord):
        parse_score(value, Limits(max_record_bytes=len(value) - 1))


def test_input_types():
    assert parse_score(bytearray(js(id="a", text=""))).id == "a"
    assert parse_score(memoryview(js(id="a", text=""))).id == "a"
    assert parse_score('{"id": "a", "text": ""}').id == "a"
    with pytest.raises(TypeError):
        parse_score(12)  # a programming error, not data


def test_invalid_record_pickles_and_caps_detail():
    error = InvalidRecord(Reason.BAD_ID, "x" * 10_000)
    assert len(error.detail) == InvalidRecord.MAX_DETAIL_CHARS
    clone = pickle.loads(pickle.dumps(error))
    assert clone.reason is Reason.BAD_ID and clone.detail == error.detail
    assert isinstance(clone, ValueError)


def test_score_round_trip():
    for record in [ScoreRecord(id="q", text="a b"), ScoreRecord(id="q", terms={"a": 1}, ts=3.5)]:
        assert parse_score(encode_score(record)) == record


def test_output_record():
    import numpy as np

    out = OutputRecord.from_scores(
        "q1", [("a", np.float64(0.75)), ("b", 0.25)], model={"kind": "mnb", "version": 2}, latency_ms=3, ts=9
    )
    obj = json.loads(encode_output(out))
    assert obj["labels"] == ["a"]
    assert obj["top_k"] == [{"label": "a", "p": 0.75}, {"label": "b", "p": 0.25}]
    assert type(obj["top_k"][0]["p"]) is float and obj["ts"] == 9.0
    assert abs(obj["scored_at"] - __import__("time").time()) < 60
    assert parse_output(encode_output(out)) == out
    multi = OutputRecord.from_scores("q", [("a", 0.6), ("b", 0.4)], labels=["a", "b"], model={}, latency_ms=0, scored_at=1)
    assert parse_output(encode_output(multi)).labels == ("a", "b")
    assert OutputRecord.from_scores("q", [], model={}, latency_ms=0).labels == ()
    # floating-point slack is clamped, real errors are not
    assert json.loads(encode_output(OutputRecord.from_scores("q", [("a", 1 + 1e-12)], model={}, latency_ms=0)))[
        "top_k"
    ][0]["p"] == 1.0
    for p in (math.nan, 1.5, -0.1, -12.3):
        with pytest.raises(ValueError):
            encode_output(OutputRecord.from_scores("q", [("a", p)], model={}, latency_ms=0))
    with pytest.raises(ValueError):
        encode_output(OutputRecord.from_scores("q", [("a", 1)], model={}, latency_ms=math.inf))
    with pytest.raises(InvalidRecord) as info:
        parse_output(b'{"id": "q", "labels": [], "top_k": [{"label": "a"}], "model": {}, "scored_at": 1, "latency_ms": 0}')
    assert info.value.reason is Reason.MISSING_FIELD


@given(st.lists(st.tuples(st.text(max_size=8), st.integers(1, 3), st.floats(0, 1e6), st.none() | st.floats(-1e9, 1e9)),
                max_size=5),
       st.lists(st.floats(0.0, 1.0), min_size=3, max_size=3))
def test_batch_output_encoding_equals_one_by_one(rows, probs):
    import numpy as np

    from sgm.stream.records import encode_outputs

    ids = [r[0] for r in rows]
    top_labels = [[f"l{j}" for j in range(r[1])] for r in rows]
    matrix = np.array([probs for _ in rows]).reshape(len(rows), 3)
    batch = []  # one record per call, each with its own k
    for (doc_id, k, latency, ts), names, row in zip(rows, top_labels, matrix):
        batch += encode_outputs([doc_id], [names], row[None, :k], [names[:1]], model={"v": 1}, scored_at=7.5,
                                latency_ms=[latency], ts=[ts])
    one = [encode_output(OutputRecord.from_scores(doc_id, list(zip(names, row[:k].tolist())), model={"v": 1},
                                                  scored_at=7.5, latency_ms=latency, ts=ts))
           for (doc_id, k, latency, ts), names, row in zip(rows, top_labels, matrix)]
    assert batch == one
    if rows:
        same_k = [(r, n, p) for r, n, p in zip(rows, top_labels, matrix) if r[1] == rows[0][1]]
        together = encode_outputs([r[0] for r, _, _ in same_k], [n for _, n, _ in same_k],
                                  np.array([p[: rows[0][1]] for _, _, p in same_k]), [n[:1] for _, n, _ in same_k],
                                  model={"v": 1}, scored_at=7.5, latency_ms=[r[2] for r, _, _ in same_k],
                                  ts=[r[3] for r, _, _ in same_k])
        assert together == [o for o, (r, _) in zip(one, zip(rows, top_labels)) if r[1] == rows[0][1]]
    for bad in (np.nan, 1.5, -0.1):
        with pytest.raises(ValueError):
            encode_outputs(["q"], [["a"]], np.array([[bad]]), [["a"]], model={}, scored_at=1.0, latency_ms=[0.0], ts=[None])


def test_dead_letter_keeps_original_bytes():
    raw = b'\xff\x00{"not": json'
    with pytest.raises(InvalidRecord) as info:
        parse_train(raw)
    letter = DeadLetter.from_error(
        info.value, raw, key=b"k\x01", topic="sgm.train", partition=3, offset=99, headers=[("h", b"\xfe"), ("n", None)]
    )
    wire = encode_dead_letter(letter)
    envelope = json.loads(wire)
    assert envelope["reason"] == "invalid_utf8"
    assert envelope["source"] == {"topic": "sgm.train", "partition": 3, "offset": 99}
    back = parse_dead_letter(wire)
    assert back == letter and back.value == raw and back.key == b"k\x01"
    assert back.headers == (("h", b"\xfe"), ("n", None))
    tombstone = DeadLetter.from_error(InvalidRecord(Reason.NOT_AN_OBJECT, "null"), None, failed_at=1)
    assert parse_dead_letter(encode_dead_letter(tombstone)) == tombstone


@pytest.mark.parametrize(
    ("envelope", "reason"),
    [
        (b"[]", Reason.NOT_AN_OBJECT),
        (b'{"detail": "x"}', Reason.MISSING_FIELD),
        (b'{"reason": "no_such_code", "detail": "x"}', Reason.WRONG_TYPE),
        (b'{"reason": "bad_id", "detail": "x", "value": "***"}', Reason.WRONG_TYPE),
        (b'{"reason": "bad_id", "detail": "x", "source": {"offset": "7"}}', Reason.WRONG_TYPE),
        (b'{"reason": "bad_id", "detail": "x", "headers": [["a"]]}', Reason.WRONG_TYPE),
    ],
)
def test_bad_dead_letters(envelope, reason):
    with pytest.raises(InvalidRecord) as info:
        parse_dead_letter(envelope)
    assert info.value.reason is reason


# ------------------------------------------------------------------ property tests

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
json_values = st.recursive(
    json_scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)  # fmt: skip
field_values = {
    "id": st.text(max_size=10) | json_values,
    "text": st.text(max_size=30) | json_values,
    "terms": st.dictionaries(st.text(max_size=8), st.integers(-2, 5) | st.floats() | json_scalars, max_size=4)
    | json_values,
    "labels": st.lists(st.text(max_size=6), max_size=4) | json_values,
    "ts": st.floats() | st.integers() | st.sampled_from(["2002-08-22", "2002-08-22T11:36:16+05:00", "x"])
    | st.from_regex(r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}([T ].{0,24})?\Z") | json_values,  # reaches fromisoformat
    "op": st.sampled_from(["learn", "unlearn", "forget", "LEARN"]) | json_values,
}
# Objects shaped like records, so that the deeper checks are reached, not only the JSON parser.
record_like = st.fixed_dictionaries({}, optional=field_values)


def _parse_both(value: bytes) -> None:
    for parser in (parse_train, parse_score):
        for limits in (DEFAULT_LIMITS, SMALL):
            try:
                parser(value, limits)
            except InvalidRecord as exc:
                assert isinstance(exc.reason, Reason)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_raise_only_invalid_record(value):
    _parse_both(value)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_arbitrary_json_values_raise_only_invalid_record(value):
    _parse_both(json.dumps(value).encode())


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record_like)
def test_record_like_objects_raise_only_invalid_record(obj):
    _parse_both(json.dumps(obj).encode())  # json.dumps writes NaN/Infinity for non-finite floats: must be rejected too


@settings(max_examples=200, deadline=None)
@given(record_like, st.integers(0, 400), st.binary(min_size=1, max_size=3))
def test_corrupted_records_raise_only_invalid_record(obj, position, junk):
    value = json.dumps(obj).encode()
    position = min(position, len(value))
    _parse_both(value[:position] + junk + value[position:])


names = st.text(st.characters(exclude_categories=("Cc", "Cs")), min_size=1, max_size=12).filter(str.strip)
valid_ts = st.none() | st.floats(0, DEFAULT_LIMITS.max_ts) | st.integers(0, 2**31).map(float)
valid_content = st.one_of(
    st.tuples(st.text(max_size=200).filter(lambda t: not any("\ud800" <= c <= "\udfff" for c in t)), st.none(),
              st.none()),
    st.tuples(st.none(), st.dictionaries(names, st.integers(1, 1000) | st.floats(1e-6, 1e6), max_size=8), st.none()),
    st.tuples(st.none(), st.none(), st.binary(max_size=300)),
)
valid_train = st.builds(
    lambda id_, op, labels, content, ts: TrainRecord(
        id=id_, op=op, ts=ts,
        **({} if op is Op.FORGET else {"labels": tuple(labels), "text": content[0], "terms": content[1],
                                        "raw": content[2]}),
    ),
    names, st.sampled_from(Op), st.lists(names, min_size=1, max_size=5, unique=True), valid_content, valid_ts,
)  # fmt: skip
valid_score = st.builds(lambda id_, c, ts: ScoreRecord(id=id_, text=c[0], terms=c[1], ts=ts, raw=c[2]), names,
                        valid_content, valid_ts)


@settings(max_examples=300, deadline=None)
@given(valid_train)
def test_valid_training_records_round_trip(record):
    assert parse_train(encode_train(record)) == record


@settings(max_examples=200, deadline=None)
@given(valid_score)
def test_valid_scoring_records_round_trip(record):
    assert parse_score(encode_score(record)) == record


@settings(max_examples=100, deadline=None)
@given(
    st.binary(max_size=50) | st.none(),
    st.binary(max_size=10) | st.none(),
    st.sampled_from(Reason),
    st.text(max_size=30),
    st.lists(st.tuples(st.text(max_size=5), st.binary(max_size=5) | st.none()), max_size=3),
)
def test_dead_letters_round_trip(value, key, reason, detail, headers):
    letter = DeadLetter.from_error(
        InvalidRecord(reason, detail), value, key=key, topic="t", partition=0, offset=1, headers=headers
    )
    assert parse_dead_letter(encode_dead_letter(letter)) == letter
