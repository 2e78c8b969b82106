"""bench/service_layers.py: its output check finds every kind of wrong output, its peer apps score as the
service does, it stops in one line without the optional peers, and (when quixstreams is installed) its
smallest form runs end to end with every layer's outputs correct."""
from __future__ import annotations

import importlib.util
import json
import os
import sys

import numpy as np
import pytest

from bench import service_layers
from bench.service_layers import check_outputs, missing_peers, parse_args
from bench.service_peer_apps import Scorer
from sgm.model import build_model
from sgm.stream.snapshot_store import SnapshotStore


def output(doc_id: str, top: str) -> tuple[bytes, bytes]:
    return doc_id.encode(), json.dumps({"id": doc_id, "top_k": [{"label": top, "p": 0.9}]}).encode()


EXPECTED = {"a": "spam", "b": "ham", "c": "spam"}


def test_correct_outputs_in_any_order_pass():
    check = check_outputs([output("c", "spam"), output("a", "spam"), output("b", "ham")], EXPECTED)
    assert check.ok and check.outputs == 3 and check.summary().startswith("ok")


@pytest.mark.parametrize("outputs, field, count", [
    ([output("a", "spam"), output("b", "ham")], "missing", 1),
    ([output("a", "spam"), output("b", "ham"), output("c", "spam"), output("a", "spam")], "duplicated", 1),
    ([output("a", "ham"), output("b", "ham"), output("c", "spam")], "wrong_top", 1),
    ([output("a", "spam"), output("b", "ham"), output("c", "spam"), output("z", "spam")], "unexpected", 1),
    ([(b"x", output("a", "spam")[1]), output("b", "ham"), output("c", "spam")], "bad_key", 1),
    ([(None, output("a", "spam")[1]), output("b", "ham"), output("c", "spam")], "bad_key", 1),
])
def test_each_kind_of_wrong_output_is_counted(outputs, field, count):
    check = check_outputs(outputs, EXPECTED)
    assert not check.ok
    assert getattr(check, field) == count
    assert check.summary().startswith("FAILED")
    others = {"missing", "duplicated", "wrong_top", "unexpected", "bad_key"} - {field}
    assert all(getattr(check, name) == 0 for name in others), check


def test_a_duplicate_with_another_label_is_a_duplicate_not_a_second_answer():
    check = check_outputs([output("a", "spam"), output("a", "ham"), output("b", "ham"), output("c", "spam")], EXPECTED)
    assert (check.duplicated, check.wrong_top, check.missing) == (1, 0, 0)


def test_arguments():
    args = parse_args([])
    assert args.layers == ["service", "quix", "faust"] and args.rounds == 1 and args.docs > 0
    assert parse_args(["--layers", "service", "--rounds", "3"]).layers == ["service"]
    with pytest.raises(SystemExit):
        parse_args(["--rounds", "0"])
    with pytest.raises(SystemExit):
        parse_args(["--layers", "flink"])


def test_missing_peers_stop_the_bench_in_one_line(monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(service_layers.importlib.util, "find_spec",
                        lambda name, *a: None if name in ("quixstreams", "faust") else real(name, *a))
    assert missing_peers(["service", "quix", "faust"]) == ["quixstreams", "faust-streaming"]
    assert missing_peers(["service"]) == []
    assert service_layers.main(["--layers", "service", "quix"]) == 2  # before any broker starts
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "quixstreams" in err and "service-peers" in err


def test_peers_are_looked_up_in_the_peer_python(monkeypatch):
    monkeypatch.setitem(service_layers.PEER_PACKAGES, "quix", ("no_such_module_sgm", "quixstreams"))
    monkeypatch.setitem(service_layers.PEER_PACKAGES, "faust", ("json", "faust-streaming"))  # importable anywhere
    assert missing_peers(["quix", "faust"], sys.executable) == ["quixstreams"]
    assert missing_peers(["faust"], sys.executable) == []


@pytest.fixture()
def state_dir(tmp_path):
    model = build_model({"model": "u_jm"})
    model.learn_many([{"cheap": 2, "pills": 1}, {"meeting": 1, "noon": 1}, {"cheap": 1, "offer": 2}],
                     [("spam",), ("ham",), ("spam",)], ids=["m1", "m2", "m3"])
    SnapshotStore(str(tmp_path)).save(model.to_bytes({"train_topic": "t", "train_offsets": {"0": 3}}))
    return str(tmp_path), model


def test_peer_scorer_writes_the_services_outputs_one_at_a_time_or_batched(state_dir):
    folder, model = state_dir
    values = [b'{"id": "q1", "text": "cheap pills"}', b'{"id": "q2", "text": "meeting at noon"}', b"not json",
              b'{"id": "q3", "terms": {"offer": 1}}']
    scorer = Scorer(folder)
    batched = scorer.score_batch(values, [None] * 4)
    single = [out for value in values for out in scorer.score_batch([value], [None])]
    assert scorer.invalid == 2  # the invalid record, dropped in each pass
    assert [key for key, _ in batched] == [b"q1", b"q2", b"q3"] == [key for key, _ in single]
    tops = [json.loads(value)["top_k"] for _, value in batched]
    assert [t[0]["label"] for t in tops] == ["spam", "ham", "spam"]
    assert [t[0]["label"] for t in tops] == [json.loads(v)["top_k"][0]["label"] for _, v in single]
    names, p, _ = model.rank_many(["cheap pills"], 3, None, None)
    assert [e["label"] for e in tops[0]] == list(names[0])
    assert np.allclose([e["p"] for e in tops[0]], p[0])
    first = json.loads(batched[0][1])
    assert first["model"]["version"] == 3 and first["model"]["documents"] == 3


#: The Python of an environment with the service-peers extra (bench/service_layers.py's INSTALL); default: this one.
PEER_PYTHON = os.environ.get("SGM_PEER_PYTHON", sys.executable)


@pytest.mark.kafka
@pytest.mark.slow
@pytest.mark.skipif(bool(missing_peers(["quix"], PEER_PYTHON)),
                    reason=f"quixstreams not installed for {PEER_PYTHON} (the service-peers extra, in an environment "
                           "of its own: set SGM_PEER_PYTHON to its python)")
def test_smallest_run_serves_every_record_once_with_the_expected_labels(tmp_path, capsys):
    out = tmp_path / "layers.json"
    code = service_layers.main(["--docs", "400", "--train", "300", "--layers", "service", "quix",
                                "--timeout", "90", "--json", str(out), "--peer-python", PEER_PYTHON])
    result = json.loads(out.read_text())["results"][0]
    assert [run["layer"] for run in result["runs"]] == ["service", "quix"]
    for run in result["runs"]:
        assert run["ok"], run["summary"]
        assert run["check"]["outputs"] == result["docs"] > 300
    assert code == 0
    assert "| relay" in capsys.readouterr().out
