"""Dataset reader: format handling on temporary files; the shared datasets when present."""
from __future__ import annotations

import base64
import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from sgm.stream.datasets import DATASETS, LabelledDoc, data_dir, find_dataset, load_jsonl, split, time_ordered
from sgm.model.mail import Message
from sgm.stream.records import Op, encode_score, encode_train, parse_score, parse_train

LINES = [
    {"id": "a", "text": "Re: hello\n\nbody", "labels": ["ham"], "ts": "2002-08-22T11:36:16+00:00", "split": None},
    {"id": "b", "text": "", "labels": ["spam", "spam"], "ts": "1999-12-10", "split": None},
    {"id": "c", "text": "x", "labels": [], "ts": "1987-03-02T10:15:00", "split": "train"},
    {"id": "d", "text": "y", "labels": ["earn"], "ts": None, "split": "test"},
]


def write(path: Path, lines, compress: bool) -> Path:
    data = ("\n".join(json.dumps(line) for line in lines) + "\n\n").encode()
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


@pytest.mark.parametrize("compress", [False, True])
def test_load_plain_and_gzip(tmp_path, compress):
    path = write(tmp_path / "set.jsonl.gz", LINES, compress)  # compression is detected by content
    docs = list(load_jsonl(path))
    assert [d.id for d in docs] == ["a", "b", "c", "d"]
    assert docs[0].ts == 1030016176.0
    assert docs[1] == LabelledDoc("b", "", ("spam",), 944784000.0, None)  # empty text kept, labels de-duplicated
    assert docs[2].ts == 541678500.0 and docs[2].labels == ()  # naive = UTC; no labels is allowed
    assert docs[3].ts is None
    assert [d.id for d in load_jsonl(path, limit=2)] == ["a", "b"]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "invalid JSON"),
        ("[1]", "JSON object"),
        ('{"id": "a", "text": 1, "labels": []}', "text"),
        ('{"id": "a", "text": "", "labels": "x"}', "labels"),
        ('{"id": "a", "text": "", "labels": [], "ts": "soon"}', "ts"),
        ('{"text": "", "labels": []}', "id"),
    ],
)
def test_bad_lines_name_file_and_line(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(LINES[0]) + "\n" + line + "\n")
    with pytest.raises(ValueError, match=rf"bad.jsonl:2: .*{message}"):
        list(load_jsonl(path))


@pytest.mark.parametrize("compress", [False, True])
def test_a_line_that_is_not_utf8_is_named(tmp_path, compress):
    # the decoder failed on a whole read buffer: "'utf-8' codec can't decode byte 0xff in position 744", no line
    body = (json.dumps(LINES[0]) + "\n").encode() * 3 + b'{"id": "x", "text": "caf\xe9", "labels": []}\n'
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(gzip.compress(body) if compress else body)
    with pytest.raises(ValueError, match=r"latin1.jsonl:4: not UTF-8"):
        list(load_jsonl(path))
    path.write_bytes((json.dumps(LINES[0] | {"text": "café \ud83d"}) + "\n").encode())  # JSON escapes are not bytes
    assert next(load_jsonl(path)).text == "café \ud83d"


def test_pre_1970_times_are_allowed_in_datasets(tmp_path):
    path = write(tmp_path / "old.jsonl", [LINES[0] | {"ts": "1960-01-01"}], compress=False)
    assert next(load_jsonl(path)).ts == -315619200.0


def test_find_dataset_honours_sgm_data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("SGM_DATA_DIR", str(tmp_path))
    assert data_dir() == tmp_path
    assert find_dataset("r8") is None
    write(tmp_path / "r8.jsonl.gz", LINES, compress=True)
    assert find_dataset("r8") == tmp_path / "r8.jsonl.gz"
    assert find_dataset("r8.jsonl.gz") == tmp_path / "r8.jsonl.gz"
    assert find_dataset(str(tmp_path / "r8.jsonl.gz")) == tmp_path / "r8.jsonl.gz"
    monkeypatch.setenv("SGM_DATA_DIR", str(tmp_path / "absent"))
    assert data_dir() is None and find_dataset("r8") is None


def test_split_and_time_order(tmp_path):
    docs = list(load_jsonl(write(tmp_path / "s.jsonl", LINES, compress=False)))
    parts = split(docs)
    assert ([d.id for d in parts.train], [d.id for d in parts.test], [d.id for d in parts.unsplit]) == (
        ["c"], ["d"], ["a", "b"],
    )  # fmt: skip
    assert [d.id for d in time_ordered(docs)] == ["c", "b", "a", "d"]
    assert [d.id for d in time_ordered(docs, undated="drop")] == ["c", "b", "a"]
    with pytest.raises(ValueError, match="'d' has no ts"):
        time_ordered(docs, undated="error")
    with pytest.raises(ValueError):
        time_ordered(docs, undated="sometimes")


def test_conversion_to_records():
    doc = LabelledDoc("x", "some text", ("a", "b"), 5.0, "train")
    assert parse_train(encode_train(doc.to_train_record())) == doc.to_train_record()
    assert doc.to_train_record(Op.UNLEARN).op is Op.UNLEARN
    assert doc.to_score_record().text == "some text"
    mail = LabelledDoc("m", None, ("spam",), None, None, raw=b"Subject: hi\n\n\xff")
    assert parse_train(encode_train(mail.to_train_record())) == mail.to_train_record()
    assert parse_score(encode_score(mail.to_score_record())).raw == mail.raw
    assert mail.document == Message(mail.raw) and doc.document == "some text"


def test_whole_messages_are_read_from_raw_b64(tmp_path):
    lines = [{"id": "m1", "raw_b64": base64.b64encode(b"Subject: hi\n\nfree").decode(), "labels": ["spam"], "ts": 5},
             {"id": "m2", "raw_b64": "", "text": "twin text", "labels": ["ham"]}]
    docs = list(load_jsonl(write(tmp_path / "raw.jsonl", lines, compress=False)))
    assert [(d.text, d.raw) for d in docs] == [(None, b"Subject: hi\n\nfree"), ("twin text", b"")]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "m3", "raw_b64": "not base64", "labels": ["spam"]}) + "\n")
    with pytest.raises(ValueError, match="bad.jsonl:1: m3: raw_b64 must be standard base64"):
        list(load_jsonl(bad))


# --------------------------------------------------- the shared datasets (skip when absent)


@pytest.mark.parametrize("name", DATASETS)
def test_shared_dataset_matches_its_stats(data_dir, name):
    path = data_dir / f"{name}.jsonl.gz"
    if not path.is_file():
        pytest.skip(f"{path} not present")
    stats = json.loads((data_dir / "stats.json").read_text())[name]
    docs = list(load_jsonl(path))
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        raw = [json.loads(line) for line in lines]
    assert len(docs) == stats["docs"] and len({d.id for d in docs}) == len(docs)
    assert Counter(label for r in raw for label in r["labels"]) == Counter(stats["labels"])
    # label lists are sets: two reuters21578 stories repeat a topic in the source
    assert [d.labels for d in docs] == [tuple(dict.fromkeys(r["labels"])) for r in raw]
    assert [(d.id, d.text, d.split) for d in docs] == [(r["id"], r.get("text"), r["split"]) for r in raw]
    assert [d.raw for d in docs] == [base64.b64decode(r["raw_b64"]) if "raw_b64" in r else None for r in raw]
    assert {str(k): v for k, v in Counter(str(d.split) for d in docs).items()} == stats["splits"]
    assert sum(d.ts is not None for d in docs) == stats["docs_with_ts"]
    if stats["docs_with_ts"]:
        assert docs == time_ordered(docs)  # README: sets with timestamps are sorted by ts
    # every labelled document is a valid training record under the default limits (the rest a scoring record)
    for doc in docs:
        value = encode_train(doc.to_train_record())
        if doc.labels:
            assert parse_train(value).labels == doc.labels
        else:
            assert parse_score(value).id == doc.id
