"""sgm stats: what a model holds, read from a state directory's newest snapshot."""
from __future__ import annotations

import json

from sgm.consumers.cli import main
from sgm.model import MNB
from sgm.model.summary import model_summary
from sgm.stream.snapshot_store import SnapshotStore


def test_stats_text_and_json(tmp_path, capsys):
    model = MNB("uc_pd_jm_dp", half_life=3600.0)
    docs = [("cheap pills", "spam", 1000.0), ("buy now", "spam", 2000.0), ("meeting", "ham", 4600.0)]
    for i, (text, label, ts) in enumerate(docs):
        model.learn_one(text, label, ts=ts, id=f"d{i}")
    store = SnapshotStore(tmp_path / "state")
    store.save(model.to_bytes({"train_offsets": {"0": 7}, "train_topic": "sgm-train", "written_at": 0.0}))
    model.forget("d1")
    store.save(model.to_bytes({"train_offsets": {"0": 8}, "train_topic": "sgm-train"}))  # the newest one counts

    assert main(["stats", "--state-dir", str(tmp_path / "state")]) == 0
    text = capsys.readouterr().out
    assert "version     8 (training offsets of sgm-train: 0: 8)" in text
    assert "documents   2 live (3 learned in all; 0 pruned, 0 expired)" in text
    spam_line = next(line for line in text.splitlines() if line.strip().startswith("spam"))
    ham_line = next(line for line in text.splitlines() if line.strip().startswith("ham"))
    assert "1 documents" in spam_line and "decayed weight 0.5" in spam_line  # learned one half-life before ham
    assert "1 documents" in ham_line and "decayed weight 1" in ham_line
    assert f"checksum    {model.checksum()}" in text and "half-life 3600 s" in text

    assert main(["stats", "--state-dir", str(tmp_path / "state"), "--json", "--labels", "1"]) == 0
    report = json.loads(capsys.readouterr().out)
    expected = model_summary(model)
    assert report["labels"] == expected["labels"] and report["vocabulary"] == expected["vocabulary"] == 3
    assert report["snapshot"]["version"] == 8 and report["snapshot"]["checksum"] == model.checksum()
    assert main(["stats", "--state-dir", str(tmp_path / "state"), "--labels", "1"]) == 0
    assert "... and 1 more (--labels 0 lists all)" in capsys.readouterr().out


def test_learn_guards_in_stats_and_in_local_verdicts(tmp_path, capsys):
    model = MNB("u_jm")
    model.learn_many(["cheap pills", "buy pills now", "lunch at noon"], ["spam", "spam", "ham"], ids=["a", "b", "c"])
    SnapshotStore(tmp_path / "state").save(model.to_bytes({"train_offsets": {"0": 3}, "train_topic": "sgm-train"}))
    (tmp_path / "q.txt").write_text("cheap pills")
    state = ["--state-dir", str(tmp_path / "state")]

    assert main(["stats", *state, "--spam-threshold", "0.5", "--min-spam", "2", "--min-ham", "2"]) == 0
    assert "learn guards spam 2 of 2, others 1 of 2: not met" in capsys.readouterr().out
    assert main(["score", *state, "--json", "--spam-threshold", "0.5", "--min-ham", "2", str(tmp_path / "q.txt")]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["decision"]["verdict"] == "not_ready" and row["labels"] == ["ham"]  # no spam verdict yet
    assert row["decision"]["learned"] == {"spam": 2, "ham": 1} and row["top_k"][0]["label"] == "spam"
    assert main(["score", *state, "--spam-threshold", "0.5", "--min-ham", "1", str(tmp_path / "q.txt")]) == 0
    assert capsys.readouterr().out.split("\t")[1] == "spam"  # guards met: the verdict follows the threshold
    assert main(["score", *state, "--spam-threshold", "0.5", "--min-ham", "2", str(tmp_path / "q.txt")]) == 0
    assert "(not_ready: learn guards not met)" in capsys.readouterr().out
