"""The README's "Your own data" section, done as a user does it, with the installed ``sgm`` command.

``sgm broker`` and ``sgm serve`` run in the background; ``sgm learn`` sends
the first 3,000 messages of the SpamAssassin stream from ../shared/data, the
spam as one input and the ham as another; ``sgm score`` scores the next 500
through the service and locally from the service's snapshot. (The default run
uses the first 1,200 and the next 300, to stay well under a minute; the issue's
sizes run with ``SGM_E2E_FULL=1``.) Checked: both ways
give the same labels and posteriors, accuracy is above 0.95, learning the same
inputs again leaves the model's checksum unchanged, and ``sgm forget`` of one
id changes the model exactly as the model's own ``forget`` does.

Two forms of the same messages: whole mail (``spamassassin-raw``: the spam as a
maildir, the ham as an mbox, the held-out messages as maildirs per label) and
text (``spamassassin``: the spam as a folder of text files, the ham as a gzip
JSON Lines file, the held-out documents as JSON Lines). Skipped, saying so,
when the shared data is absent.
"""
from __future__ import annotations

import base64
import gzip
import os
import hashlib
import json
import re
import signal
import time
from pathlib import Path

import pytest

from sgm.consumers.userdata.snapshots import load_saved_model
from sgm.stream.datasets import find_dataset
from sgm.model.persistence import read_meta
from sgm.stream.broker import free_port
from sgm.stream.records import model_version
from tests.cli_helpers import Background, sgm
from tests.test_metrics_endpoint import scrape, wait_until

#: The issue's sizes (first 3,000 messages learned, next 500 scored) and the reduced ones of the default run.
FULL, REDUCED = (3000, 500), (1200, 300)
pytestmark = pytest.mark.kafka


def first_documents(name: str, count: int) -> list[dict]:
    path = find_dataset(name)
    if path is None:
        pytest.skip(f"../shared/data/{name}.jsonl.gz is absent (set SGM_DATA_DIR to the shared data folder)")
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for _, line in zip(range(count), handle)]


def mail_inputs(root: Path, docs, train: int) -> tuple[list[list[str]], list[str], dict[str, str], int]:
    """Spam as a maildir, ham as an mbox (mboxrd), held-out messages as one maildir per label; also the number
    of distinct training messages."""
    junk, held_out = root / "Junk", root / "held-out"
    for folder in (junk / "cur", junk / "new", junk / "tmp", held_out / "spam" / "cur", held_out / "ham" / "cur"):
        folder.mkdir(parents=True)
    truth, learned = {}, set()
    with open(root / "archive.mbox", "wb") as mbox:
        for i, doc in enumerate(docs):
            raw = base64.b64decode(doc["raw_b64"])
            # the corpus files start with an mbox 'From ' line: the separator, not part of the message
            separator, message = raw.split(b"\n", 1) if raw.startswith(b"From ") else (b"From corpus", raw)
            name = f"{1_000_000_000 + i}.M{i}P1.host:2,S"
            label = doc["labels"][0]
            if i >= train:
                (held_out / label / "cur" / name).write_bytes(raw)
                truth[hashlib.blake2b(message, digest_size=16).hexdigest()] = label
                continue
            learned.add((label, message))
            if label == "spam":
                (junk / "cur" / name).write_bytes(raw)
            else:
                mbox.write(separator + b"\n")
                for line in message.splitlines(keepends=True):
                    mbox.write(b">" + line if line.lstrip(b">").startswith(b"From ") else line)
                mbox.write(b"\n" if message.endswith(b"\n") else b"\n\n")
    return ([["--label", "spam", str(junk)], ["--label", "ham", str(root / "archive.mbox")]],
            ["--label-from-folder", str(held_out)], {f"mail:{digest}": label for digest, label in truth.items()},
            len(learned))


def text_inputs(root: Path, docs, train: int) -> tuple[list[list[str]], list[str], dict[str, str], int]:
    """Spam as a folder of text files, ham as a gzip JSON Lines file without labels; held-out as JSON Lines.
    Also the number of distinct training documents (a repeated text is one document)."""
    spam = root / "spam"
    spam.mkdir()
    with gzip.open(root / "ham.jsonl.gz", "wt", encoding="utf-8") as ham:
        for i, doc in enumerate(docs[:train]):
            if doc["labels"] == ["spam"]:
                (spam / f"{i:05d}.txt").write_text(doc["text"], encoding="utf-8")
            else:
                ham.write(json.dumps({"text": doc["text"], "ts": doc["ts"]}) + "\n")
    held_out = root / "held-out.jsonl"
    held_out.write_text("".join(json.dumps({"id": d["id"], "text": d["text"], "labels": d["labels"]}) + "\n"
                                for d in docs[train:]), encoding="utf-8")
    truth = {d["id"]: d["labels"][0] for d in docs[train:]}
    distinct = len({(d["labels"][0], d["text"]) for d in docs[:train]})
    return ([["--label", "spam", str(spam)], ["--label", "ham", str(root / "ham.jsonl.gz")]], [str(held_out)], truth,
            distinct)


def wait_for_snapshot(state: Path, version: int, timeout: float = 90) -> dict:
    """The header of the service's newest snapshot once it includes the training log up to ``version``
    (read without building the model: the snapshot of 3,000 whole messages is large)."""
    deadline, seen = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        files = sorted(state.glob("snapshot-*.sgm"))
        if files:
            try:
                meta = read_meta(files[-1].read_bytes())
            except FileNotFoundError:  # replaced while being read
                continue
            seen = model_version({int(p): o for p, o in meta["extra"]["train_offsets"].items()})
            if seen >= version:
                return meta
        time.sleep(0.2)
    raise AssertionError(f"no snapshot at version {version} within {timeout} s (last: {seen})")


def learn(bootstrap: str, learn_args: list[list[str]]) -> tuple[int, list[str]]:
    """Run every ``sgm learn``; the training log's end after them, and their summaries."""
    end, summaries = 0, []
    for args in learn_args:
        done = sgm("learn", "--bootstrap-servers", bootstrap, *args)
        summaries.append(done.stdout)
        end = int(re.search(r"the training log ends at ([\d,]+)", done.stdout).group(1).replace(",", ""))
    return end, summaries


def errors(rows: dict[str, dict], truth: dict[str, str], labels) -> tuple[int, int]:
    """False positives (ham answered spam) and false negatives (spam not answered spam) of ``labels(row)``."""
    fp = sum(labels(row) == ["spam"] and truth[i] == "ham" for i, row in rows.items())
    fn = sum(labels(row) != ["spam"] and truth[i] == "spam" for i, row in rows.items())
    return fp, fn


def answers(output: str) -> dict[str, dict]:
    return {row["id"]: row for row in map(json.loads, output.splitlines())}


@pytest.mark.parametrize("form, size", [
    ("mail", REDUCED), ("text", REDUCED),
    # The --preset spam decision (p(spam) >= 0.989 with the class prior counted 1.1 times, not theta = 2;
    # chosen on the first 25% of the stream for 9 x FP + FN) at the size: docs/YOUR_DATA.md.
    pytest.param("mail", FULL, id="mail-full", marks=pytest.mark.slow),
    pytest.param("text", FULL, marks=pytest.mark.slow, id="text-full")])
def test_your_own_data_end_to_end(form, size, tmp_path):
    train, test = size
    if size == FULL and not os.environ.get("SGM_E2E_FULL"):
        pytest.skip("the issue's full size (3,000 messages learned, 500 scored; ~70 s with whole messages) runs with "
                    "SGM_E2E_FULL=1; the default run checks the same flow on 1,200 + 300")
    if form == "mail":
        docs = first_documents("spamassassin-raw", train + test)
        learn_args, score_paths, truth, distinct = mail_inputs(tmp_path, docs, train)
        preset = ["--preset", "spam"]  # the tuned mail model, spam threshold and learn guards (README)
    else:
        learn_args, score_paths, truth, distinct = text_inputs(tmp_path, first_documents("spamassassin", train + test),
                                                               train)
        preset = []
    state = tmp_path / "state"
    broker = Background("broker", "--port", "0", log=tmp_path / "broker.log")
    serve = None
    try:
        bootstrap = broker.wait_for(r"broker \(Tansu\) at (\S+)", 30).group(1)
        assert "keeps everything in memory" in broker.output()
        # A snapshot once all of a learn's records are applied (and at shutdown), not on a timer mid-way.
        metrics_port = free_port()
        serve = Background("serve", *preset, "--bootstrap-servers", bootstrap, "--state-dir", str(state),
                           "--snapshot-every-records", str(distinct), "--snapshot-every-seconds", "300",
                           "--metrics-address", f"127.0.0.1:{metrics_port}", "--log-format", "logfmt",
                           log=tmp_path / "serve.log")
        serve.wait_for("service started", 60)

        # learn: everything read is sent or skipped (repeated documents only); the log end includes it all
        end, summaries = learn(bootstrap, learn_args)
        sent = sum(int(re.search(r"sent ([\d,]+)", s).group(1).replace(",", "")) for s in summaries)
        skipped = sum(int(re.search(r"skipped ([\d,]+)", s).group(1).replace(",", "")) for s in summaries)
        assert sent == distinct == end and sent + skipped == train, summaries
        assert all(re.search(r"skipped (0|[\d,]+: duplicate [\d,]+)$", s.splitlines()[0]) for s in summaries), summaries
        learned = wait_for_snapshot(state, end)

        # score through the service and from the snapshot: the same answers
        remote = sgm("score", "--bootstrap-servers", bootstrap, "--json", *score_paths, timeout=120)
        local = sgm("score", *preset, "--state-dir", str(state), "--json", *score_paths)
        through_service, from_snapshot = answers(remote.stdout), answers(local.stdout)
        assert set(through_service) == set(from_snapshot) == set(truth), (remote.stderr, local.stderr)
        for doc_id, row in through_service.items():
            other = from_snapshot[doc_id]
            assert row["labels"] == other["labels"], doc_id
            assert [t["label"] for t in row["top_k"]] == [t["label"] for t in other["top_k"]], doc_id
            assert [t["p"] for t in row["top_k"]] == pytest.approx([t["p"] for t in other["top_k"]], abs=1e-9)
            assert row["model"]["version"] == other["model"]["version"] == end
            assert row.get("decision") == other.get("decision") and row.get("mail") == other.get("mail")
            assert ("decision" in row) == bool(preset)  # the preset's spam verdict, in both
        accuracy = sum(row["labels"] == [truth[i]] for i, row in through_service.items()) / len(truth)
        top = sum(row["top_k"][0]["label"] == truth[i] for i, row in through_service.items()) / len(truth)
        fp, fn = errors(through_service, truth, lambda row: row["labels"])
        top_fp, top_fn = errors(through_service, truth, lambda row: [row["top_k"][0]["label"]])
        print(f"{form} {train}+{test}: answers' labels {accuracy:.4f} (FP {fp}, FN {fn}), top label {top:.4f} "
              f"(FP {top_fp}, FN {top_fn}) over {len(truth)} held-out documents")
        assert accuracy > 0.95, (accuracy, top)
        assert f"accuracy {accuracy:.4f} ({round(accuracy * len(truth))} of {len(truth)} labelled documents)" \
            in local.stderr

        # learning the same inputs again changes nothing
        again, _ = learn(bootstrap, learn_args)
        assert again == 2 * end
        relearned = wait_for_snapshot(state, again)
        assert relearned["state_checksum"] == learned["state_checksum"]

        # forget one id: the model changes exactly as the model's own forget changes it
        reference = load_saved_model(state).model
        assert len(reference) == distinct
        victim = sorted(reference.document_ids())[7]
        assert reference.forget(victim)
        sgm("forget", "--bootstrap-servers", bootstrap, "--id", victim)
        wait_until(lambda: scrape(("127.0.0.1", metrics_port)).value(
            "sgm_training_offset", partition="0") >= again + 1, 30, "the forget applied", interval=0.2)
        assert serve.stop(signal.SIGTERM) == 0  # a graceful stop writes the final snapshot
        forgotten = wait_for_snapshot(state, again + 1, timeout=5)
        assert forgotten["state_checksum"] == reference.checksum() != learned["state_checksum"]

        stats = json.loads(sgm("stats", *preset, "--state-dir", str(state), "--json").stdout)
        if preset:
            assert stats["decision"]["ready"] and stats["decision"]["learned"]["spam"] > 0
        assert stats["documents"] == distinct - 1 and stats["snapshot"]["version"] == again + 1
        assert {item["label"] for item in stats["labels"]} == {"spam", "ham"}
        assert stats["snapshot"]["checksum"] == reference.checksum()
    finally:
        codes = (serve.stop(signal.SIGTERM) if serve else 0, broker.stop(signal.SIGINT))
    assert codes == (0, 0), (serve.output()[-2000:] if serve else "", broker.output()[-2000:])
    assert broker.output().rstrip().endswith("sgm broker: stopped")
