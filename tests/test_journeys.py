"""Two users' journeys, walked by hand (session 7), and what broke on the way.

* The news desk routes stories to several labels: it scores from the service's snapshot with the service's own
  flag (``sgm score --label-threshold``), corrects a story's labels by learning its id again with the right
  ones, and restarts the service (a restart with other settings must say which setting differs).
* The ML engineer watches corrections on the dashboard: a relabel (a learn of a known id with other labels,
  the correction the README and docs/YOUR_DATA.md teach) unlearns the old labels, so it is counted in
  ``sgm_documents_unlearned_total{op="relabel"}``, on the real broker; and a powerset model's refused
  unlearn names the labels, not the internal label-set key.
"""
from __future__ import annotations

import json
import time

import pytest

from sgm.consumers.cli import main
from sgm.consumers.service import ConfigMismatch
from sgm.consumers.service.checkpoint import restore
from sgm.model import MNB, LearnGuardError
from sgm.stream.kafka import open_client
from sgm.stream.snapshot_store import SnapshotStore
from tests.service_helpers import start_service
from tests.test_metrics_endpoint import make_config, scrape, wait_until

STORIES = [
    ("s1", "wheat harvest record grain exports china", ["grain", "wheat"]),
    ("s2", "crude oil prices opec output barrels", ["crude"]),
    ("s3", "gas pipeline natural gas crude oil field", ["crude", "nat-gas"]),
    ("s4", "corn grain exports soviet union tonnes", ["grain", "corn"]),
    ("s5", "bank rate cut interest money market", ["interest", "money-fx"]),
]


@pytest.mark.kafka
def test_a_relabel_is_counted_as_a_correction_real_broker(kafka_broker, unique_name, tmp_path):
    config = make_config(unique_name, tmp_path, client="confluent", bootstrap_servers=kafka_broker.bootstrap_servers,
                         half_life=None)
    client = open_client("confluent", kafka_broker.config())
    running = start_service(config, client)
    values = [{"id": i, "text": t, "labels": labels} for i, t, labels in STORIES]
    values += [
        {"id": "s2", "text": STORIES[1][1], "labels": ["ship"]},  # relabel: crude -> ship
        {"id": "s3", "text": STORIES[2][1], "labels": ["nat-gas", "crude"]},  # the same labels again: a no-op
        {"id": "s6", "text": "sugar beet crop", "labels": ["sugr"]},  # a typo ...
        {"id": "s6", "text": "sugar beet crop", "labels": ["sugar"]},  # ... corrected at once (same batch or not)
        {"id": "s5", "text": STORIES[4][1], "labels": ["money-fx", "interest"], "op": "unlearn"},
        {"id": "s4", "op": "forget"},
    ]
    try:
        producer = client.producer()
        for value in values:
            producer.send(config.train_topic, json.dumps(value).encode(), key=value["id"].encode())
        producer.flush()
        producer.close()
        address = running.service.metrics_address
        wait_until(lambda: scrape(address).value("sgm_training_records_total") == len(values), 60,
                   "every training record applied", interval=0.2)
        found = scrape(address)
        model = running.service.model
        assert model.document("s2").labels == ["ship"] and model.document("s6").labels == ["sugar"]
        assert "s5" not in model and "s4" not in model
    finally:
        running.halt()
    assert found.value("sgm_documents_learned_total") == 9  # every valid learn, the no-op relearn too
    assert found.by("sgm_documents_unlearned_total", "op") == {"relabel": 2, "unlearn": 1, "forget": 1}


def test_a_powerset_unlearn_mismatch_names_the_labels():
    model = MNB("u_jm", multilabel="powerset")
    model.learn_one("wheat harvest", ["wheat", "grain"], id="s1")
    with pytest.raises(LearnGuardError) as refused:
        model.unlearn_one(None, ["grain"], id="s1")
    assert "was learned with ['grain', 'wheat']" in str(refused.value)
    assert "\x1f" not in str(refused.value)


def _saved_model(tmp_path, multilabel: str = "per_label") -> MNB:
    model = MNB("uc_pd_jm_dp", multilabel=multilabel)
    for doc_id, text, labels in STORIES:
        model.learn_one(text, labels, id=doc_id)
    SnapshotStore(tmp_path / "state").save(model.to_bytes({"train_offsets": {"0": 5}, "train_topic": "sgm-train"}))
    return model


def test_score_from_a_snapshot_takes_the_services_label_threshold_flag(tmp_path, capsys):
    model = _saved_model(tmp_path)
    story = tmp_path / "story.txt"
    story.write_text("grain exports of wheat and corn")
    threshold = 0.15
    expected = model.rank_many(["grain exports of wheat and corn"], 3, threshold).labels[0]
    assert len(expected) > 1  # the threshold matters here: several labels reach it
    assert main(["score", "--state-dir", str(tmp_path / "state"), "--label-threshold", str(threshold), "--json",
                 str(story)]) == 0
    assert json.loads(capsys.readouterr().out)["labels"] == list(expected)


def test_score_through_the_service_refuses_a_threshold_it_cannot_apply(tmp_path, capsys):
    story = tmp_path / "story.txt"
    story.write_text("grain exports")
    name = f"journeys-{time.monotonic_ns()}"
    status = main(["score", "--client", "memory", "--bootstrap-servers", f"memory://{name}", "--label-threshold",
                   "0.3", str(story)])
    assert status == 2
    assert "--label-threshold applies when scoring from a snapshot (--state-dir DIR)" in capsys.readouterr().err


def test_a_restart_with_other_settings_names_the_setting(tmp_path):
    _saved_model(tmp_path)
    config = make_config("journeys", tmp_path, model="uc_pd_jm_dp", param={}, half_life=None, multilabel="powerset",
                         train_topic="sgm-train")
    with pytest.raises(ConfigMismatch) as refused:
        restore(config, SnapshotStore(tmp_path / "state"), None)
    message = str(refused.value)
    assert "another model configuration than requested: multilabel 'per_label' (requested: 'powerset');" in message
    assert "--state-dir" in message


@pytest.mark.kafka
def test_a_record_without_ts_after_a_historical_corpus_is_reported_real_broker(kafka_broker, unique_name, tmp_path,
                                                                             caplog):
    """With decay, a story learned without ``ts`` (the Kafka timestamp: now) after Reuters-style 1987 stories
    moves the model's time 39 years ahead, and every 1987 story expires: decay working as specified, but a
    newcomer's model emptied in silence. The service now says so in one warning naming the batch."""
    config = make_config(unique_name, tmp_path, client="confluent", bootstrap_servers=kafka_broker.bootstrap_servers,
                         half_life=604800.0)
    client = open_client("confluent", kafka_broker.config())
    running = start_service(config, client)
    old = [{"id": i, "text": t, "labels": labels, "ts": f"1987-03-0{n + 1}T10:00:00"}
           for n, (i, t, labels) in enumerate(STORIES)]
    try:
        producer = client.producer()
        for value in old:
            producer.send(config.train_topic, json.dumps(value).encode(), key=value["id"].encode())
        producer.flush()
        wait_until(lambda: len(running.service.model) == len(old), 60, "the 1987 stories learned", interval=0.1)
        with caplog.at_level("WARNING", logger="sgm.service"):
            producer.send(config.train_topic, json.dumps({"id": "new", "text": "oil output", "labels": ["crude"]})
                          .encode(), key=b"new")
            producer.flush()
            producer.close()
            wait_until(lambda: "new" in running.service.model, 60, "the story without ts learned", interval=0.1)
            wait_until(lambda: any("time jumped" in r.getMessage() for r in caplog.records), 10, "the warning")
    finally:
        running.halt()
    assert len(running.service.model) == 1  # decay as specified: the 1987 stories expired
    [warning] = [r for r in caplog.records if "time jumped" in r.getMessage()]
    assert warning.expired == len(old) and warning.documents == 1 and warning.half_lives > 2000
    assert warning.last_offset == len(old)  # the batch that did it: the record at offset 5


def test_learn_names_a_label_the_model_does_not_know(tmp_path, capsys):
    """A correction with a misspelt label (``grian``) is learned as given (labels are an open set); with the
    service's --state-dir, ``sgm learn`` names it and the known label it is closest to."""
    _saved_model(tmp_path)
    corrections = tmp_path / "corrections.jsonl"
    corrections.write_text(json.dumps({"id": "s1", "text": STORIES[0][1], "labels": ["grian"]}) + "\n"
                           + json.dumps({"id": "s2", "text": STORIES[1][1], "labels": ["crude"]}) + "\n")
    assert main(["learn", "--dry-run", "--state-dir", str(tmp_path / "state"), str(corrections)]) == 0
    err = capsys.readouterr().err
    assert "labels new to the model (version 5, " in err and ": grian (close to grain);" in err
    assert "crude" not in err
    assert main(["learn", "--dry-run", "--state-dir", str(tmp_path / "nowhere"), str(corrections)]) == 2
    assert "no state directory" in capsys.readouterr().err


def test_relabels_are_counted_by_label_set_in_both_modes():
    """The same labels in another order are no relabel; another set is one, in per-label and powerset mode,
    whether the earlier learn is in the model or still pending in the same batch."""
    from sgm.consumers.service.training import TrainingEvents, apply_in_log_order
    from sgm.stream.kafka import Record

    class Counted(TrainingEvents):
        def __init__(self):
            self.ops = []

        def unlearned(self, op):
            self.ops.append(op)

    values = [{"id": "s1", "text": "wheat", "labels": ["grain", "wheat"]},
              {"id": "s1", "text": "wheat", "labels": ["wheat", "grain"]},  # the same set: no relabel
              {"id": "s1", "text": "wheat", "labels": ["grain"]},  # another set: a relabel
              {"id": "s2", "text": "oil", "labels": ["crude"]}]
    records = [Record("train", 0, n, None, json.dumps(v).encode()) for n, v in enumerate(values)]
    for multilabel in ("per_label", "powerset"):
        for batches in ([records], [records[:1], records[1:2], records[2:]]):  # pending, or already in the model
            model, events, offsets = MNB("u_jm", multilabel=multilabel), Counted(), {}
            for batch in batches:
                apply_in_log_order(model, batch, offsets, events)
            assert events.ops == ["relabel"], (multilabel, len(batches))
            assert model.document("s1").labels == ["grain"]
