"""A fault of the model while scoring is isolated per document: dead-lettered ``scoring_failed``, never a crash loop.

Before session 12 any exception from ``rank_many`` other than a Kafka error ended the service (a bug stops the
process), and a document that makes the model raise every time it is scored (the ZeroDivisionError of extreme
decay that session fixed was one) would fail its batch at every restart: the partition stalled for good. Now the
batch is scored again one document at a time, after the model's derived state (which the failed pass may have
left half written) is marked stale; only the documents that raise alone are dead-lettered, with the error, and
counted (alert ``SgmScoringFailed``).
"""
from __future__ import annotations

import json
import tempfile
import uuid

import numpy as np

from sgm.consumers.service import Service
from sgm.model import MNB, TDM
from sgm.stream.kafka import KafkaConfig, TopicPartition, open_client
from sgm.stream.records import parse_dead_letter, parse_output
from tests.service_helpers import run_until_idle
from tests.test_hostile_input import dumps, read_topic, service_config

TRAIN = [("cheap pills now", "spam"), ("lunch at noon", "ham"), ("cheap lunch deal", "spam"), ("noon meeting", "ham")]
QUERIES = ["cheap pills", "the poison word here", "lunch meeting", "noon pills"]


def serve(fault: bool):
    """Outputs and dead letters of a service that learned TRAIN and scored QUERIES in one batch; with ``fault``
    the model raises whenever a document it scores holds the word "poison" (as a model bug would)."""
    name = f"faults-{uuid.uuid4().hex[:10]}"
    with tempfile.TemporaryDirectory() as state:
        cfg = service_config(name, state, "mnb", max_poll_records=50)
        client = open_client("memory", KafkaConfig(bootstrap_servers=cfg.bootstrap_servers))
        producer = client.producer()
        for i, (text, label) in enumerate(TRAIN):
            producer.send(cfg.train_topic, dumps({"id": f"t{i}", "text": text, "labels": [label],
                                                  "ts": 1_700_000_000.0 + i}), key=b"k")  # not the send time: decay
        for i, text in enumerate(QUERIES):
            producer.send(cfg.score_topic, dumps({"id": f"q{i}", "text": text}), key=b"k")
        producer.flush()
        service = Service(cfg, client=client)
        service.start()
        try:
            model = service.state.model
            if fault:
                real = model.rank_many

                def faulty(docs, *args, **kwargs):
                    if any("poison" in doc for doc in docs):
                        raise ZeroDivisionError("float division by zero")
                    return real(docs, *args, **kwargs)

                model.rank_many = faulty
            invalidations = []
            real_invalidate = model.invalidate_derived
            model.invalidate_derived = lambda: (invalidations.append(1), real_invalidate())[1]
            run_until_idle(service)
            outputs = [parse_output(r.value) for r in read_topic(client, cfg.output_topic)]
            letters = [parse_dead_letter(r.value) for r in read_topic(client, cfg.dlq_topic)]
            rejected = service.metrics.registry.get_sample_value(
                "sgm_records_rejected_total", {"reason": "scoring_failed", "source": "score"})
            with client.consumer(cfg.group) as consumer:
                committed = consumer.committed([TopicPartition(cfg.score_topic, 0)])[TopicPartition(cfg.score_topic, 0)]
            return outputs, letters, rejected, committed, len(invalidations)
        finally:
            service.close()


def test_a_document_the_model_fails_on_is_dead_lettered_and_the_rest_of_its_batch_is_scored():
    outputs, letters, rejected, committed, invalidated = serve(fault=True)
    clean_outputs, clean_letters, _, _, _ = serve(fault=False)
    assert clean_letters == [] and [o.id for o in clean_outputs] == ["q0", "q1", "q2", "q3"]
    assert [o.id for o in outputs] == ["q0", "q2", "q3"]
    expected = {o.id: o.top_k for o in clean_outputs}
    assert all(o.top_k == expected[o.id] for o in outputs)  # the same ranking as without the fault
    assert [(d.reason.value, d.offset) for d in letters] == [("scoring_failed", 1)]
    assert "ZeroDivisionError: float division by zero" in letters[0].detail
    assert json.loads(letters[0].value)["id"] == "q1"
    assert rejected == 1
    assert committed == len(QUERIES)  # the batch is committed: no rescoring at the next start
    assert invalidated == 2  # the derived state marked stale before the documents were scored again, and after q1


def test_invalidate_derived_repairs_half_written_caches():
    """What a scoring pass that raised midway could leave: posting weights marked fresh but wrong. After
    ``invalidate_derived`` the model scores as a restored copy does (every cache rebuilt from the counts)."""
    for model in (MNB("uc_pd_jm_dp", beta=0.3, mu=5.0, delta=0.5), TDM("tdm_uc_jm_dp_kpd_kdp")):
        for i, (text, label) in enumerate(TRAIN):
            model.learn_one(text, label, id=str(i))
        fresh = type(model).from_bytes(model.to_bytes())
        _, expected = fresh.predict_log_proba_many(QUERIES)
        model.predict_log_proba_many(QUERIES)  # caches filled and marked fresh
        model.labels.postings.weight[:] *= 0.5  # half written: fresh marks, wrong values
        if isinstance(model, TDM):
            model.nodes.cache_weight[:] *= 0.5
        assert not np.array_equal(model.predict_log_proba_many(QUERIES)[1], expected)
        model.invalidate_derived()
        assert np.array_equal(model.predict_log_proba_many(QUERIES)[1], expected)


# ------------------------------------------------------------------ training

def train_values(poison_at: int, invalid_at: int, n: int = 10) -> list[bytes]:
    out = []
    for i in range(n):
        if i == invalid_at:
            out.append(b"not json")
            continue
        word = "poison" if i == poison_at else f"word{i % 4}"
        out.append(dumps({"id": f"t{i}", "text": f"{word} common text{i}", "labels": [f"L{i % 3}"],
                          "ts": 1_700_000_000.0 + i}))
    return out


def learn_with_a_fault(snapshot_every: int, poison_at: int = 5, invalid_at: int = 2):
    """A service learning ``train_values`` (batches of 3) whose model raises while learning a batch that holds the
    word "poison", after learning the documents before it (a half-applied batch, as a real fault can leave)."""
    import pytest
    from sgm.model.base import GenerativeTextModel

    name = f"learnfault-{uuid.uuid4().hex[:10]}"
    real = GenerativeTextModel.learn_many

    def faulty(self, docs, *args, **kwargs):
        docs = list(docs)
        if any("poison" in doc for doc in docs if isinstance(doc, str)):
            cut = next(i for i, doc in enumerate(docs) if "poison" in doc)
            real(self, docs[:cut], *[list(a)[:cut] for a in args], **kwargs)
            raise ZeroDivisionError("float division by zero")
        return real(self, docs, *args, **kwargs)

    with tempfile.TemporaryDirectory() as state, pytest.MonkeyPatch.context() as patch:
        patch.setattr(GenerativeTextModel, "learn_many", faulty)
        cfg = service_config(name, state, "mnb", max_poll_records=3, snapshot_every_records=snapshot_every)
        client = open_client("memory", KafkaConfig(bootstrap_servers=cfg.bootstrap_servers))
        producer = client.producer()
        for value in train_values(poison_at, invalid_at):
            producer.send(cfg.train_topic, value, key=b"k")
        producer.flush()
        service = Service(cfg, client=client)
        service.start()
        try:
            run_until_idle(service)
            letters = [parse_dead_letter(r.value) for r in read_topic(client, cfg.dlq_topic)]
            sample = service.metrics.registry.get_sample_value
            counted = {reason: sample("sgm_records_rejected_total", {"reason": reason, "source": "train"})
                       for reason in ("learn_failed", "invalid_json")}
            return service.state.model, dict(service.state.train_offsets), letters, counted
        finally:
            service.close()


def test_a_record_the_model_fails_to_learn_is_dead_lettered_and_the_model_reloaded():
    """The model after the fault equals one that learned every other record, bit for bit: the half-applied
    batch was undone by the reload, the batch learned again one record at a time, the culprit skipped. The
    invalid record before it is dead-lettered once, though the log is read again (no snapshot: from 0)."""
    from sgm.model import build_model
    from sgm.stream.records import parse_train

    for snapshot_every in (10**9, 4):
        model, offsets, letters, counted = learn_with_a_fault(snapshot_every)
        assert offsets == {0: 10}
        assert [(d.reason.value, d.offset) for d in letters] == [("invalid_json", 2), ("learn_failed", 5)]
        assert "ZeroDivisionError: float division by zero" in letters[1].detail
        assert counted == {"learn_failed": 1, "invalid_json": 1}
        reference = build_model({"model": "uc_pd_jm_dp", "params": {"beta": 0.3, "mu": 20.0, "delta": 0.5, "ups": 0.2},
                                 "half_life": 3600.0})
        good = [parse_train(v) for i, v in enumerate(train_values(5, 2)) if i not in (2, 5)]
        for record in good:
            reference.learn_one(record.text, record.labels, ts=record.ts, id=record.id)
        assert model.checksum() == reference.checksum(), snapshot_every
