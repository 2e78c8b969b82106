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
            producer.send(cfg.train_topic, dumps({"id": f"t{i}", "text": text, "labels": [label]}), key=b"k")
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
