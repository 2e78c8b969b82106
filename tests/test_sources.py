"""Readers of a user's own files (stream/sources): what they yield for good input, and for bad input a
Skipped with a reason, never an exception, with every valid document before and after it still read."""
from __future__ import annotations

import base64
import gzip
import json
import os
from pathlib import Path

import pytest

from sgm.stream.sources import SourceDoc, Skipped, read_paths
from sgm.stream.sources.mail import looks_like_mail, read_mbox

MESSAGES = [
    b"From: alice@example.org\nTo: bob@example.org\nSubject: lunch\n\nAt noon?\nFrom the office.\n",
    b"Return-Path: <x@spam.biz>\nReceived: from a by b\nSubject: WIN\n\n>From here, cheap pills\n",
    b"From: carol@example.org\nSubject: notes\n\nline one\n\n",
]


def docs(items):
    return [i for i in items if isinstance(i, SourceDoc)]


def skipped(items):
    return [i for i in items if isinstance(i, Skipped)]


def write_maildir(folder: Path, messages, start_ts=1030000000):
    for sub in ("cur", "new", "tmp"):
        (folder / sub).mkdir(parents=True)
    for i, raw in enumerate(messages):
        sub = "cur" if i % 2 == 0 else "new"
        (folder / sub / f"{start_ts + i}.M{i}P1.host:2,S").write_bytes(raw)
    (folder / "tmp" / "999.in-progress").write_bytes(b"From: x\nSubject: partial")


def mboxrd(messages, start_ts=1030000000) -> bytes:
    import time

    out = bytearray()
    for i, raw in enumerate(messages):
        out += b"From sender@example.org " + time.strftime("%a %b %d %H:%M:%S %Y", time.gmtime(start_ts + i)).encode() + b"\n"
        for line in raw.splitlines(keepends=True):
            out += (b">" + line) if line.lstrip(b">").startswith(b"From ") else line
        if not raw.endswith(b"\n"):
            out += b"\n"
        out += b"\n"
    return bytes(out)


def test_maildir_mbox_and_eml_give_the_same_messages_and_ids(tmp_path):
    write_maildir(tmp_path / "box", MESSAGES)
    (tmp_path / "all.mbox").write_bytes(mboxrd(MESSAGES))
    (tmp_path / "one.eml").write_bytes(b"From someone Sat Aug 31 10:00:00 2002\n" + MESSAGES[1])  # corpus-style file
    from_maildir = docs(read_paths([tmp_path / "box"]))
    from_mbox = docs(read_paths([tmp_path / "all.mbox"]))
    from_eml = docs(read_paths([tmp_path / "one.eml"]))
    assert sorted(d.raw for d in from_maildir) == sorted(MESSAGES)  # tmp/ is not read
    assert [d.raw for d in from_mbox] == MESSAGES  # mboxrd quoting undone, separators dropped
    assert {d.id for d in from_maildir} == {d.id for d in from_mbox}
    assert from_eml[0].raw == MESSAGES[1] and from_eml[0].id == from_mbox[1].id
    assert all(d.id.startswith("mail:") and d.kind == "mail" for d in from_mbox)
    assert [d.ts for d in from_mbox] == [1030000000.0, 1030000001.0, 1030000002.0]
    assert sorted(d.ts for d in from_maildir) == [1030000000.0, 1030000001.0, 1030000002.0]
    assert from_eml[0].ts == 1030788000.0  # from its 'From ' line
    # a record carries the message whole
    record = from_mbox[0].with_labels(("ham",)).record()
    assert base64.b64decode(record["raw_b64"]) == MESSAGES[0] and record["labels"] == ["ham"]


def test_path_ids_and_labels_from_folders(tmp_path):
    root = tmp_path / "corpus"
    write_maildir(root / "spam", MESSAGES[1:2])
    (root / "ham").mkdir()
    (root / "ham" / "a.txt").write_text("see you at lunch")
    (root / "ham" / "deeper").mkdir()
    (root / "ham" / "deeper" / "b.txt").write_text("minutes of the meeting")
    (root / "top.txt").write_text("no folder, no label")
    found = docs(read_paths([root], ids="path", label_from_folder=True))
    by_origin = {d.origin: d for d in found}
    assert by_origin["corpus/ham/a.txt"].labels == ("ham",) and by_origin["corpus/ham/a.txt"].id == "corpus/ham/a.txt"
    assert by_origin["corpus/ham/deeper/b.txt"].labels == ("ham",)
    assert by_origin["corpus/top.txt"].labels == ()
    (spam,) = [d for d in found if d.kind == "mail"]
    assert spam.labels == ("spam",) and spam.origin.startswith("corpus/spam/cur/")
    # content ids do not depend on where the files are
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    (moved / "copy.txt").write_text("see you at lunch")
    assert docs(read_paths([moved / "copy.txt"]))[0].id == docs(read_paths([root / "ham" / "a.txt"]))[0].id


def test_truncated_mbox_keeps_every_whole_message(tmp_path):
    data = mboxrd(MESSAGES)
    cut = data[: data.rindex(b"line one") + 4]  # inside the last message's body, mid-line
    (tmp_path / "cut.mbox").write_bytes(cut)
    items = list(read_paths([tmp_path / "cut.mbox"]))
    assert [d.raw for d in docs(items)] == MESSAGES[:2]
    assert [(s.origin, s.reason) for s in skipped(items)] == [("cut.mbox#3", "truncated")]


def test_bad_mail_inputs_are_skipped_with_reasons(tmp_path):
    (tmp_path / "not.mbox").write_bytes(b"hello\nworld\n")
    (tmp_path / "empty.mbox").write_bytes(b"")
    (tmp_path / "junk.eml").write_bytes(os.urandom(300) + b"\x00")
    (tmp_path / "blank.eml").write_bytes(b"\n\n")
    (tmp_path / "gap.mbox").write_bytes(b"From a Sat Aug 31 10:00:00 2002\n\nFrom b Sat Aug 31 10:00:01 2002\n" + MESSAGES[2])
    reasons = {s.origin: s.reason for s in skipped(read_paths([tmp_path]))}
    name = tmp_path.name
    assert reasons == {f"{name}/not.mbox": "not_mbox", f"{name}/empty.mbox": "empty", f"{name}/junk.eml": "not_mail",
                       f"{name}/blank.eml": "empty", f"{name}/gap.mbox#1": "empty"}
    # (its last blank line is taken for the separator an mbox writer adds)
    assert [d.raw for d in docs(read_paths([tmp_path / "gap.mbox"]))] == [MESSAGES[2][:-1]]
    # a message over the limit is skipped without holding it, the next one is read
    big = mboxrd([MESSAGES[0] + b"x" * 5000 + b"\n", MESSAGES[1]])
    (tmp_path / "big.mbox").write_bytes(big)
    items = list(read_mbox(tmp_path / "big.mbox", tmp_path, "content", max_bytes=1000))
    assert [type(i).__name__ for i in items] == ["Skipped", "SourceDoc"] and items[0].reason == "too_large"


def test_jsonl_plain_gzip_and_damage(tmp_path):
    lines = [{"id": "a", "text": "cheap pills", "labels": ["spam"], "ts": "2002-08-01"},
             {"text": "no id here", "labels": ["ham"]},
             {"id": "m", "raw_b64": base64.b64encode(MESSAGES[0]).decode(), "labels": ["ham"]},
             {"id": "t", "terms": {"free": 2}}]
    body = "\n".join(json.dumps(x) for x in lines) + "\n"
    bad = ("not json\n[1, 2]\n" + json.dumps({"id": "f", "op": "forget"}) + "\n"
           + json.dumps({"id": "c", "text": "x", "terms": {"x": 1}}) + "\n" + json.dumps({"id": "b", "raw_b64": "%%%"})
           + "\n" + json.dumps({"id": "n", "labels": ["x"]}) + "\n\n")
    (tmp_path / "d.jsonl").write_text(body + bad)
    items = list(read_paths([tmp_path / "d.jsonl"]))
    good = docs(items)
    assert [d.id for d in good[:1] + good[2:]] == ["a", "m", "t"] and good[1].id.startswith("rec:")
    assert good[0].labels == ("spam",) and good[0].ts == "2002-08-01" and good[2].raw == MESSAGES[0]
    assert good[3].terms == {"free": 2} and good[3].labels == ()
    assert [(s.origin, s.reason) for s in skipped(items)] == [
        ("d.jsonl:5", "invalid_json"), ("d.jsonl:6", "invalid_json"), ("d.jsonl:7", "other_op"),
        ("d.jsonl:8", "conflicting_fields"), ("d.jsonl:9", "bad_base64"), ("d.jsonl:10", "not_a_document")]
    # gzip, and a gzip file cut short: the lines before the damage are read
    packed = gzip.compress(body.encode() * 200)
    (tmp_path / "d.jsonl.gz").write_bytes(packed)
    assert len(docs(read_paths([tmp_path / "d.jsonl.gz"]))) == 800
    (tmp_path / "cut.jsonl.gz").write_bytes(packed[: len(packed) // 2])
    items = list(read_paths([tmp_path / "cut.jsonl.gz"]))
    assert 0 < len(docs(items)) < 800 and [s.reason for s in skipped(items)] == ["truncated"]


def test_text_files_binary_encodings_and_unreadable(tmp_path, monkeypatch):
    (tmp_path / "utf8.txt").write_text("café crème", encoding="utf-8")
    (tmp_path / "latin.txt").write_bytes("déjà vu".encode("latin-1"))
    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbfhello")
    (tmp_path / "zeros.bin").write_bytes(b"\x00" * 100)
    (tmp_path / "controls.dat").write_bytes(bytes(range(1, 9)) * 50)
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / ".hidden").write_text("skipped silently: hidden names are not inputs")
    os.symlink(tmp_path / "missing", tmp_path / "dangling")
    os.mkfifo(tmp_path / "pipe")
    items = list(read_paths([tmp_path, tmp_path / "no-such-file"]))
    texts = {Path(d.origin).name: d.text for d in docs(items)}
    assert texts == {"utf8.txt": "café crème", "latin.txt": "déjà vu", "bom.txt": "hello"}
    reasons = {Path(s.origin).name: s.reason for s in skipped(items)}
    assert reasons == {"zeros.bin": "binary", "controls.dat": "binary", "empty.txt": "empty", "dangling": "unreadable",
                       "pipe": "unreadable", "no-such-file": "unreadable"}
    # a file that cannot be read (a permission error; the tests may run as root, so it is simulated)
    real = Path.read_bytes

    def refuse(self):
        if self.name == "utf8.txt":
            raise PermissionError(13, "Permission denied")
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", refuse)
    items = list(read_paths([tmp_path]))
    assert {Path(s.origin).name: s.detail for s in skipped(items) if s.reason == "unreadable"}["utf8.txt"] == \
        "Permission denied"
    assert "latin.txt" in {Path(d.origin).name for d in docs(items)}


def test_an_empty_folder_yields_nothing(tmp_path):
    assert list(read_paths([tmp_path])) == []


@pytest.mark.parametrize("head, expected", [
    (b"Received: from x\n\tby y\nFrom: a@b\nSubject: s\n\nbody", True),
    (b"X-Spam: yes\nX-Other: 1\n\n", True),
    (b"Re: your message\n\nthanks", False),
    (b"Subject only: one field\n\nbody", False),
    (b"Dear friend,\nHello\n", False),
    (b"", False),
])
def test_mail_sniffing(head, expected):
    assert looks_like_mail(head) is expected


# ---------------------------------------------------------------------------- properties
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=3000), fmt=st.sampled_from(["auto", "text", "mail", "mbox", "jsonl"]))
def test_readers_never_raise_on_any_bytes(tmp_path, data, fmt):
    path = tmp_path / "input"
    path.write_bytes(data)
    for item in read_paths([path], fmt=fmt):
        assert isinstance(item, (SourceDoc, Skipped))
        if isinstance(item, Skipped):
            assert item.reason and item.origin


header = st.from_regex(r"(From|Subject|X-[A-Za-z]{1,8}): [ -~]{0,40}", fullmatch=True)
body_line = st.one_of(st.from_regex(r"[ -~]{0,60}", fullmatch=True),
                      st.from_regex(r">{0,3}From [ -~]{0,30}", fullmatch=True))  # lines an mbox must quote


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.lists(header, min_size=2, max_size=4), st.lists(body_line, max_size=6)),
                min_size=1, max_size=5))
def test_mboxrd_round_trip(tmp_path, messages):
    raws = [("\n".join(["Received: from a by b", *heads]) + "\n\n" + "".join(line + "\n" for line in body)).encode()
            for heads, body in messages]
    path = tmp_path / "box.mbox"
    path.write_bytes(mboxrd(raws))
    found = list(read_paths([path]))
    assert [d.raw for d in found if isinstance(d, SourceDoc)] == raws
    assert not [s for s in found if isinstance(s, Skipped)]


def test_jsonl_labels_that_are_not_an_array_are_skipped_not_split(tmp_path):
    # "labels": "ham" was learned as the three labels h, a, m (the string became one label per character)
    lines = [{"id": "s", "text": "meeting monday", "labels": "ham"},
             {"id": "d", "text": "cheap pills", "labels": {"spam": 1}},
             {"id": "ok", "text": "hello", "labels": ["ham"]}]
    (tmp_path / "l.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    items = list(read_paths([tmp_path / "l.jsonl"]))
    assert [(d.id, d.labels) for d in docs(items)] == [("ok", ("ham",))]
    assert [(s.origin, s.reason) for s in skipped(items)] == [("l.jsonl:1", "wrong_type"), ("l.jsonl:2", "wrong_type")]
    assert "got string" in skipped(items)[0].detail


def test_a_maildir_message_given_alone_keeps_its_id(tmp_path):
    # `sgm forget ~/Mail/Junk/cur/FILE` (docs/YOUR_DATA.md) must derive the id the maildir gave when learned.
    # Corpus-style files start with a 'From ' line; one given alone was read as an mbox, which dropped its
    # last blank line (and would undo '>From' quoting): another id, so forget found nothing to remove.
    box = tmp_path / "Junk"
    separator = b"From someone Sat Aug 31 10:00:00 2002\n"
    write_maildir(box, [separator + MESSAGES[2], separator + MESSAGES[1]])
    in_maildir = {d.origin.rsplit("/", 1)[-1]: d for d in docs(read_paths([box]))}
    assert {d.raw for d in in_maildir.values()} == {MESSAGES[2], MESSAGES[1]}
    for name, doc in in_maildir.items():
        sub = "cur" if (box / "cur" / name).exists() else "new"
        alone = docs(read_paths([box / sub / name]))
        assert [(d.id, d.raw) for d in alone] == [(doc.id, doc.raw)]
    # a file with two 'From ' lines is still an mbox
    (tmp_path / "two").write_bytes(mboxrd([MESSAGES[0], MESSAGES[2]]))
    assert [d.raw for d in docs(read_paths([tmp_path / "two"]))] == [MESSAGES[0], MESSAGES[2]]
