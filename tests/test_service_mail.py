"""Whole emails through the service and a real Kafka-protocol broker, for both clients (issue 17).

Training and scoring records carry messages as ``raw_b64``; the service runs the ``spam`` preset
with small learn guards so that one short stream crosses them, and a lower threshold (six messages
under the preset's heavy smoothing give mild posteriors). Checked, in order of the stream:

* before the guards are met every output says ``not_ready`` (and counts what was learned), with no
  spam label; afterwards the verdict follows the threshold and the output labels follow the verdict;
* a message whose base64 does not decode is dead-lettered with ``bad_raw_b64`` (training and scoring);
* a message with malformed MIME is learned and scored from what can be read, its flags are in the
  output's ``mail`` object and in ``sgm_mail_flags_total``;
* the model equals one trained in-process on the same messages (bit for bit), and its snapshot
  keeps the preset's mail options.
"""
from __future__ import annotations

import base64
import json
import time

import pytest

from sgm.consumers.config import ServiceConfig
from sgm.consumers.presets import preset
from sgm.model import build_model
from sgm.model.mail import Message
from sgm.stream.kafka import open_client
from tests.service_helpers import dead_letters, outputs_by_id, read_topic, start_service
from tests.test_mail_features import HAM, SPAM

pytestmark = pytest.mark.kafka

SPAMS = [SPAM.replace(b"deals2002", f"deals{i}".encode()).replace(b"Viagra", w) for i, w in
         enumerate([b"Viagra", b"Cialis", b"Xanax", b"Valium"])]
HAMS = [HAM.replace(b"the build is broken", s) for s in
        [b"the build is broken", b"tests are green again", b"release notes draft", b"lunch on friday?"]]
#: Valid base64, malformed MIME: a multipart without its closing boundary holding broken base64.
BROKEN = (b"From: x@bulk.example\nSubject: cheap pills\nContent-Type: multipart/mixed; boundary=b\n\n--b\n"
          b"Content-Type: text/plain\nContent-Transfer-Encoding: base64\n\nY2hlYXAgcGlsbHM*\n")


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


#: Event times of the training messages (the model keeps them; the reference learns with the same).
TS = {"s0": 1.0e9, "s1": 1.0e9 + 60, "h0": 1.0e9 + 120, "broken-t": 1.0e9 + 180, "h1": 1.0e9 + 240, "h2": 1.0e9 + 300}


def train(doc_id: str, raw: bytes, label: str) -> bytes:
    return json.dumps({"id": doc_id, "raw_b64": b64(raw), "labels": [label], "ts": TS[doc_id]}).encode()


def score(doc_id: str, raw: bytes) -> bytes:
    return json.dumps({"id": doc_id, "raw_b64": b64(raw)}).encode()


def send(client, topic: str, values: list[bytes]) -> None:
    producer = client.producer()
    for value in values:
        producer.send(topic, value, key=json.loads(value)["id"].encode())
    producer.flush()
    producer.close()


def wait_for(condition, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert condition(), "timed out"


@pytest.mark.parametrize("client_kind", ["confluent", "kafka-python"])
def test_whole_messages_end_to_end_with_guards_threshold_and_malformed_mail(kafka_broker, unique_name, tmp_path,
                                                                             client_kind):
    cfg = ServiceConfig(bootstrap_servers=kafka_broker.bootstrap_servers, client=client_kind,
                        train_topic=f"{unique_name}-train", score_topic=f"{unique_name}-score",
                        output_topic=f"{unique_name}-out", dlq_topic=f"{unique_name}-dlq", group=f"{unique_name}-g",
                        state_dir=str(tmp_path / "state"), metrics_address="", score_partitions=1, preset="spam",
                        min_spam=2, min_ham=3, spam_threshold=0.75, snapshot_every_records=5)
    decision = cfg.decision()
    assert (decision.threshold, decision.min_spam, decision.min_ham) == (0.75, 2, 3)
    assert cfg.model_config() == {**preset("spam").model_config(), "multilabel": "per_label"}
    client = open_client(client_kind, kafka_broker.config())
    running = start_service(cfg, client)
    service = running.service
    outputs: dict = {}

    def scored(ids: list[str], values: list[bytes]) -> None:
        send(client, cfg.score_topic, values)
        wait_for(lambda: set(ids) <= set(outputs.update(outputs_by_id(read_topic(client, cfg.output_topic,
                                                                                   lambda r: False, 0.3))) or outputs))

    try:
        # 1. before the guards are met: 2 spams, 1 ham learned
        first = [train("s0", SPAMS[0], "spam"), train("s1", SPAMS[1], "spam"), train("h0", HAMS[0], "ham")]
        send(client, cfg.train_topic, first)
        wait_for(lambda: service.train_offsets.get(0, 0) >= 3)
        scored(["q-early"], [score("q-early", SPAMS[2])])
        # 2. malformed input: bad base64 on both topics, bad MIME learned and scored; then the guards are met
        send(client, cfg.train_topic, [json.dumps({"id": "bad-t", "raw_b64": "not base64!", "labels": ["spam"]}).encode(),
                                       train("broken-t", BROKEN, "spam"), train("h1", HAMS[1], "ham"),
                                       train("h2", HAMS[2], "ham")])
        wait_for(lambda: service.train_offsets.get(0, 0) >= 7)
        scored(["q-spam", "q-ham", "q-broken"], [score("q-spam", SPAMS[3]), score("q-ham", HAMS[3]),
                                                 score("q-broken", BROKEN.replace(b"cheap pills", b"cheap meds")),
                                                 json.dumps({"id": "bad-s", "raw_b64": "U3Vi\namVjdA=="}).encode()])
        letters = dead_letters(read_topic(client, cfg.dlq_topic, lambda r: len(r) >= 2, 30))
    finally:
        running.halt()
    # read once stopped: a scoring batch's mail flags and verdicts are counted after its outputs and dead letters
    # are acknowledged and committed, so they can be read before they are counted
    flags_metric = service.metrics.mail_flags
    flagged = {(s.labels["flag"], s.labels["source"]): s.value for m in flags_metric.collect() for s in m.samples
               if s.name.endswith("_total")}
    decisions = {(s.labels["verdict"]): s.value for m in service.metrics.decisions.collect() for s in m.samples
                 if s.name.endswith("_total")}

    early = outputs["q-early"][0]
    assert early.decision["verdict"] == "not_ready" and early.decision["learned"] == {"spam": 2, "ham": 1}
    assert early.decision["min"] == {"spam": 2, "ham": 3} and early.labels == ("ham",)
    assert early.top_k[0][0] == "spam"  # the model ranks it spam; the guard withholds the verdict
    spam, ham = outputs["q-spam"][0], outputs["q-ham"][0]
    for out in (spam, ham):
        assert out.decision["learned"] == {"spam": 3, "ham": 3} and out.decision["threshold"] == decision.threshold
        assert out.mail == {"flags": []} and out.model["spec"] == "mnb_uc_jm_dp_ps"
        p_spam = dict(out.top_k)["spam"]
        # 3 spams, 3 hams: the preset's prior weight moves both classes alike, so p is top_k's (an unbalanced
        # model: tests/test_decision.py; service and snapshot agreeing on it: tests/test_your_own_data.py)
        assert out.decision["p"] == pytest.approx(p_spam)
        assert out.decision["prior_weight"] == preset("spam").decision.prior_weight
        assert out.decision["verdict"] == ("spam" if p_spam >= decision.threshold else "ham")
        assert out.labels == (("spam",) if out.decision["verdict"] == "spam" else ("ham",))
    assert spam.decision["verdict"] == "spam" and ham.decision["verdict"] == "ham"
    broken = outputs["q-broken"][0]
    assert broken.mail["flags"] == ["bad_base64", "unterminated_multipart"] and broken.decision["verdict"] in ("spam", "ham")
    assert set(outputs) == {"q-early", "q-spam", "q-ham", "q-broken"}  # bad-s went to the DLQ, not the output
    assert sorted((d.reason.value, d.topic) for d in letters) == [("bad_raw_b64", cfg.score_topic),
                                                                  ("bad_raw_b64", cfg.train_topic)]
    assert flagged[("bad_base64", "train")] == 1 and flagged[("bad_base64", "score")] == 1
    assert decisions["not_ready"] == 1 and sum(decisions.values()) == 4 and decisions["spam"] >= 1
    # the model: the valid training messages learned in order, as in-process (malformed MIME included)
    reference = build_model(cfg.model_config())
    for doc_id, raw, label in [("s0", SPAMS[0], "spam"), ("s1", SPAMS[1], "spam"), ("h0", HAMS[0], "ham"),
                               ("broken-t", BROKEN, "spam"), ("h1", HAMS[1], "ham"), ("h2", HAMS[2], "ham")]:
        reference.learn_one(Message(raw), label, id=doc_id, ts=TS[doc_id])
    assert service.model.checksum() == reference.checksum()
    assert "broken-t" in service.model and service.model.mail == reference.mail is not None
