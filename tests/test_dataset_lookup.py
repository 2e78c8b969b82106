"""Shared dataset names resolve in a fresh clone that sits beside the data, and otherwise the error
says exactly where it looked and what to pass."""
from __future__ import annotations

import gzip
import json

from sgm.consumers.cli import main
from sgm.stream.datasets import data_dirs, find_dataset, missing_dataset_message


def write_dataset(folder, name="tiny"):
    folder.mkdir(parents=True, exist_ok=True)
    docs = [{"id": str(i), "text": t, "labels": [l], "ts": None, "split": "train" if i < 6 else "test"}
            for i, (t, l) in enumerate([("cheap pills", "spam"), ("meeting notes", "ham")] * 4)]
    with gzip.open(folder / f"{name}.jsonl.gz", "wt") as out:
        out.write("\n".join(json.dumps(d) for d in docs) + "\n")


def test_a_clone_beside_shared_data_finds_names_from_its_root(tmp_path, monkeypatch):
    monkeypatch.delenv("SGM_DATA_DIR", raising=False)
    write_dataset(tmp_path / "shared" / "data")
    clone = tmp_path / "sgm-stream"
    clone.mkdir()
    monkeypatch.chdir(clone)
    assert data_dirs()[:2] == [clone / "shared" / "data", tmp_path / "shared" / "data"]
    assert find_dataset("tiny") == tmp_path / "shared" / "data" / "tiny.jsonl.gz"
    assert main(["eval", "--data", "tiny", "--model", "u_jm"]) == 0


def test_sgm_data_dir_wins_and_a_miss_says_what_to_pass(tmp_path, monkeypatch, capsys):
    write_dataset(tmp_path / "mine", "r8")
    monkeypatch.setenv("SGM_DATA_DIR", str(tmp_path / "mine"))
    assert data_dirs() == [tmp_path / "mine"] and find_dataset("r8") == tmp_path / "mine" / "r8.jsonl.gz"
    monkeypatch.setenv("SGM_DATA_DIR", str(tmp_path / "nowhere"))
    assert find_dataset("r8") is None
    message = missing_dataset_message("r8")
    assert str(tmp_path / "nowhere") in message and "--data path/to/r8.jsonl.gz" in message
    assert "SGM_DATA_DIR" in message
    assert main(["eval", "--data", "r8", "--model", "u_jm"]) == 2
    assert capsys.readouterr().err.startswith("sgm eval: no dataset file or shared dataset named 'r8'")
