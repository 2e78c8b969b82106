"""A service refuses to start on a snapshot it must not resume from, with a message naming the file.

The snapshot is read before any Kafka call (``Service.prepare``): a snapshot
of another training topic or model configuration is a :class:`ConfigMismatch`,
one whose offsets header is not a mapping of non-negative integers a
:class:`SnapshotError`, and ``sgm serve`` turns either into one line on stderr
and exit status 2. The matching snapshot is the baseline: it is resumed.
(Corrupt, oversized and pickled snapshots: tests/test_safety.py.)
"""
from __future__ import annotations

import dataclasses
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from sgm.consumers.service import ConfigMismatch, Service
from sgm.model import build_model
from sgm.model.persistence import SnapshotError
from sgm.stream.snapshot_store import SnapshotStore
from tests.test_hostile_input import service_config

ROOT = Path(__file__).resolve().parents[1]


def saved_snapshot(state_dir: Path, cfg, extra: dict) -> Path:
    """A snapshot of the configuration's model (two documents) with ``extra`` as its header; its path."""
    model = build_model(cfg.model_config())
    model.learn_many(["cheap pills now", "meeting at noon"], [["spam"], ["ham"]], ids=["a", "b"])
    return SnapshotStore(state_dir).save(model.to_bytes(extra)).path


def prepared(cfg) -> Service:
    service = Service(cfg)
    try:
        service.prepare()
    finally:
        service.metrics.close()
    return service


def config(tmp_path: Path, **overrides):
    return service_config(f"restore-{uuid.uuid4().hex[:8]}", str(tmp_path), "mnb", **overrides)


def test_a_matching_snapshot_is_resumed(tmp_path):
    cfg = config(tmp_path)
    saved_snapshot(tmp_path, cfg, {"train_topic": cfg.train_topic, "train_offsets": {"0": 2}})
    service = prepared(cfg)
    assert len(service.model) == 2 and service.train_offsets == {0: 2}


def test_a_snapshot_of_another_training_topic_is_refused(tmp_path):
    cfg = config(tmp_path)
    path = saved_snapshot(tmp_path, cfg, {"train_topic": "someone-elses-topic", "train_offsets": {"0": 2}})
    with pytest.raises(ConfigMismatch, match="someone-elses-topic") as raised:
        prepared(cfg)
    assert str(path) in str(raised.value) and cfg.train_topic in str(raised.value)


def test_a_snapshot_of_another_model_configuration_is_refused(tmp_path):
    cfg = config(tmp_path)
    path = saved_snapshot(tmp_path, cfg, {"train_topic": cfg.train_topic, "train_offsets": {"0": 2}})
    other = dataclasses.replace(cfg, param=dict(cfg.param, beta=0.9))
    with pytest.raises(ConfigMismatch, match="--state-dir") as raised:
        prepared(other)
    assert str(path) in str(raised.value) and "0.9" in str(raised.value)


@pytest.mark.parametrize("offsets, says", [
    ([0, 2], "not a mapping"),
    ("0:2", "not a mapping"),
    ({"0": -1}, "negative"),
    ({"-1": 3}, "negative"),
    ({"zero": 2}, "invalid literal"),
    ({"0": "2.5"}, "invalid literal"),
    ({"0": None}, "int()"),
])
def test_a_snapshot_with_a_broken_offsets_header_is_refused(tmp_path, offsets, says):
    cfg = config(tmp_path)
    path = saved_snapshot(tmp_path, cfg, {"train_topic": cfg.train_topic, "train_offsets": offsets})
    with pytest.raises(SnapshotError, match="refusing to start") as raised:
        prepared(cfg)
    assert str(path) in str(raised.value) and says in str(raised.value)


def test_sgm_serve_says_why_in_one_line_and_exits_2(tmp_path):
    cfg = config(tmp_path, train_topic="sgm-train")
    saved_snapshot(tmp_path, cfg, {"train_topic": "sgm-train", "train_offsets": {"0": 2}})
    # another beta than the snapshot's; an unreachable broker: the refusal comes before any Kafka call
    args = [sys.executable, "-m", "sgm.consumers.cli", "serve", "--bootstrap-servers", "127.0.0.1:1",
            "--state-dir", str(tmp_path), "--metrics-address", "", "--log-format", "logfmt",
            "--train-topic", "sgm-train", "--model", cfg.model,
            *[a for k, v in dict(cfg.param, beta=0.9).items() for a in ("--param", f"{k}={v}")]]
    result = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    said = [line for line in result.stderr.splitlines() if line.startswith("sgm serve:")]
    assert len(said) == 1 and "model configuration" in said[0] and "--state-dir" in said[0], result.stderr[-2000:]
    assert "Traceback" not in result.stderr
