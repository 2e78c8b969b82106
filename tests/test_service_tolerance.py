"""The service's ``posterior_tolerance`` reaches the scoring kernel: the emitted posteriors are the pruned
top-k's with that tolerance (labels exact), and without it they are the exact ones (memory transport)."""
from __future__ import annotations

import dataclasses
import math
import tempfile
import uuid

import pytest

import sgm.model.mnb as mnb_module
import sgm.model.pruned_topk as pruned_module
from sgm.consumers.service import Service
from sgm.model import build_model
from sgm.stream.kafka import KafkaConfig, open_client
from sgm.stream.records import parse_output
from tests.test_hostile_input import dumps, read_topic, service_config
from tests.service_helpers import run_until_idle

N_LABELS = 50
TRAIN = [({"w": 6.0, "x": 1.0}, "c0")] + [({"w": 1.0, f"o{i}": 6.0}, f"c{i}") for i in range(1, N_LABELS)]


def serve(tolerance, query):
    """The one output of a fresh service (u_jm, 50 labels, the pruned path forced) scoring ``query``."""
    name = f"tolerance-{uuid.uuid4().hex[:10]}"
    with tempfile.TemporaryDirectory() as state, pytest.MonkeyPatch.context() as patch:
        patch.setattr(mnb_module, "PRUNED_TOPK_MIN_CLASSES", 1)
        patch.setattr(mnb_module, "PRUNED_TOPK_CLASSES_PER_K", 1)
        patch.setattr(pruned_module, "BUDGET_DIVISOR", 1)  # every label meets "w": no dense fallback
        cfg = service_config(name, state, "mnb")
        cfg = dataclasses.replace(cfg, model="u_jm", param={"beta": 0.5}, half_life=None, top_k=1,
                                  posterior_tolerance=tolerance)
        client = open_client("memory", KafkaConfig(bootstrap_servers=cfg.bootstrap_servers))
        producer = client.producer()  # all written before the start: every learn is applied before the score
        for i, (terms, label) in enumerate(TRAIN):
            producer.send(cfg.train_topic, dumps({"id": f"d{i}", "terms": terms, "labels": [label]}), key=b"k")
        producer.send(cfg.score_topic, dumps({"id": "q", "terms": query}), key=b"k")
        producer.flush()
        service = Service(cfg, client=client)
        service.start()
        try:
            run_until_idle(service)
            outputs = [parse_output(r.value) for r in read_topic(client, cfg.output_topic)]
        finally:
            service.close()
    assert len(outputs) == 1
    return list(outputs[0].top_k)


def test_posterior_tolerance_reaches_the_kernel():
    model = build_model({"model": "u_jm", "params": {"beta": 0.5}})
    model.learn_many([terms for terms, _ in TRAIN], [label for _, label in TRAIN])
    unit = model.predict_log_proba_many([{"w": 1.0}])[1][0]
    gap_per_w = unit[0] - unit[1]
    tau = 0.1
    # c1..c49 sit past log N + log(1 + 1/tau) behind c0 (left out under tau) but well inside log N + 40
    query = {"w": float(math.ceil((math.log(N_LABELS) + math.log1p(1 / tau) + 0.5) / gap_per_w))}
    exact = model.predict_topk_many([query], 1)[0]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mnb_module, "PRUNED_TOPK_MIN_CLASSES", 1)
        patch.setattr(mnb_module, "PRUNED_TOPK_CLASSES_PER_K", 1)
        patch.setattr(pruned_module, "BUDGET_DIVISOR", 1)
        loose = model.predict_topk_many([query], 1, tau)[0]
    assert [c for c, _ in loose] == [c for c, _ in exact]
    assert exact[0][1] * (1 + 1e-3) < loose[0][1] <= exact[0][1] * (1 + tau)  # the tolerance was used, within tau
    for got, want in ((serve(tau, query), loose), (serve(None, query), exact)):
        assert [c for c, _ in got] == [c for c, _ in want]
        for (_, p), (_, q) in zip(got, want):
            assert p == pytest.approx(q, rel=1e-12)
