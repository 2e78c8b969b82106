"""bench/mail_extract.py: its digest tells apart what the extractor could change, its mutants are seeded,
and a run against a git revision on a tiny file finds the same output (HEAD against the work tree's
model/, which equal it when nothing is uncommitted) and times both sides."""
from __future__ import annotations

import base64
import gzip
import json
import subprocess

import pytest

from bench import mail_extract
from sgm.model.mail import MailFeatures, MailOptions
from sgm.model.mail.features import MailExtraction
from sgm.model.mail.parse import WorkStats

RAW = [b"From: a@example.org\nSubject: hi\n\nsee http://example.net/x now",
       b"Content-Type: text/html\n\n<p>Buy <b>now</b> <a href=http://shop.example/>x</a></p>",
       b"\x00\xff garbage"]


def test_digest_tells_apart_values_order_flags_and_counters():
    base = MailExtraction({"a": 1, "b:x": 4.5}, ("nul_bytes",), WorkStats(parts=1))
    variants = [MailExtraction({"a": 1.0, "b:x": 4.5}, base.flags, base.stats),  # 1 and 1.0
                MailExtraction({"b:x": 4.5, "a": 1}, base.flags, base.stats),  # order
                MailExtraction(base.terms, (), base.stats),
                MailExtraction(base.terms, base.flags, WorkStats(parts=2))]
    assert len({mail_extract.digest(x) for x in [base, *variants]}) == 5
    assert mail_extract.digest(base) == mail_extract.digest(MailExtraction(dict(base.terms), base.flags,
                                                                           WorkStats(parts=1)))


def test_mutants_are_seeded_and_the_extractor_reads_them():
    first, again = mail_extract.mutants(RAW, 50), mail_extract.mutants(RAW, 50)
    assert first == again and len(first) == 50 and first != mail_extract.mutants(RAW, 50, seed=10)
    extract = MailFeatures(MailOptions()).extract
    for raw in first:
        extract(raw)


def test_a_run_against_head_on_a_tiny_file(tmp_path, capsys):
    dirty = subprocess.run(["git", "-C", str(mail_extract.REPO), "status", "--porcelain", "model"],
                           capture_output=True, text=True)
    if dirty.returncode != 0:
        pytest.skip("not a git work tree")
    data = tmp_path / "raw.jsonl.gz"
    with gzip.open(data, "wt") as handle:
        for raw in RAW:
            handle.write(json.dumps({"raw_b64": base64.b64encode(raw).decode()}) + "\n")
    status = mail_extract.main(["--data", str(data), "--ref", "HEAD", "--every", "1", "--rounds", "2",
                                "--mutants", "5"])
    out = capsys.readouterr().out
    assert "3 messages" in out and "branch / ref" in out
    if not dirty.stdout.strip():  # nothing uncommitted under model/: HEAD is the code that runs
        assert status == 0 and "identity: SAME" in out
