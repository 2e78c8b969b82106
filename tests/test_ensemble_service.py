"""Serving an ensemble (model/ensemble.py): snapshots, and the service training and scoring with one.

* a snapshot round trip restores an ensemble whose posteriors are identical (bit for bit) and which keeps
  learning as the original does; a damaged one is refused;
* the service (in-process memory transport) trains an ensemble from the configuration ``sgm ensemble``
  writes, learning, unlearning and forgetting in log order: every output's posteriors equal
  ``Ensemble.predict_proba_many`` of an ensemble trained in-process on the same records, and a restart
  from the service's snapshot scores the same;
* the same through a real Kafka-protocol broker (the session broker of tests/kafka_fixtures.py).
"""
from __future__ import annotations

import io
import json
import random
import time
import uuid
import zipfile

import numpy as np
import pytest

from sgm.consumers.cli import main as sgm
from sgm.consumers.config import ServiceConfig
from sgm.consumers.service import Service
from sgm.model import MNB, TDM, Ensemble, SpecError, Tokenizer, build_model, model_config
from sgm.model.persistence import SnapshotError, load, loads
from sgm.stream.kafka import KafkaConfig, TopicPartition, open_client
from sgm.stream.records import encode_score, parse_output, ScoreRecord
from sgm.stream.synthetic import SyntheticConfig, SyntheticStream
from tests.service_helpers import feed, outputs_by_id, read_topic, reference_model, run_until_idle, start_service

TOPICS = {"sport": "goal match team score league", "money": "bank rate stock market price",
          "food": "recipe cook dinner taste bread"}
NOISE = "the a of and to in report news today new"


def ensemble(meta: bool = True) -> Ensemble:
    """Three bases (MNB, TDM, an MNB of binary bigrams) with decay, meta-feature weights and a class bias."""
    bases = [MNB("uc_pd_jm_dp", half_life=3600.0, beta=0.3, mu=20.0, delta=0.5, ups=0.2),
             TDM("tdm_uc_jm_dp_kpd_kdp", half_life=3600.0),
             MNB("u_jm_ps", half_life=3600.0, tokenizer=Tokenizer(ngrams=2, binary=True), beta=0.4)]
    width = 3 + 2 * len(bases) if meta else 1
    weights = np.random.default_rng(3).uniform(-0.3, 1.2, (len(bases), width))
    return Ensemble(bases, weights, {"sport": 0.25, "food": -0.5}, meta=meta)


def texts(n: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        label = rng.choice(sorted(TOPICS))
        words = rng.choices(TOPICS[label].split(), k=3) + rng.choices(
            NOISE.split() + TOPICS[rng.choice(sorted(TOPICS))].split(), k=rng.randint(2, 9))
        out.append((label, " ".join(words)))
    return out


def same_ranking(a, b) -> bool:
    return a.names == b.names and a.labels == b.labels and np.array_equal(a.probabilities, b.probabilities)


def test_snapshot_round_trip_gives_identical_posteriors_and_learns_on_alike():
    model = ensemble()
    docs = texts(60, 1)
    model.learn_many([t for _, t in docs], [lab for lab, _ in docs], ts=[10.0 * i for i in range(60)],
                     ids=[f"d{i}" for i in range(60)])
    model.unlearn_one(docs[3][1], docs[3][0], id="d3")
    model.forget("d7")
    queries = [t for _, t in texts(25, 2)] + [{"goal": 2, "bank": 1}, "unseen words only"]
    handle = io.BytesIO()
    model.write_snapshot(handle, {"train_offsets": {"0": 63}})
    handle.seek(0)
    restored, extra = load(handle)  # what the service's restore reads
    assert isinstance(restored, Ensemble) and extra == {"train_offsets": {"0": 63}}
    assert model_config(restored) == model_config(model) and restored.checksum() == model.checksum()
    classes, log_post = model.predict_log_proba_many(queries)
    got_classes, got = restored.predict_log_proba_many(queries)
    assert got_classes == classes and np.array_equal(got, log_post)
    assert same_ranking(restored.rank_many(queries, 2), model.rank_many(queries, 2))
    # both keep learning alike: more documents, a relabel, a forget
    more = texts(20, 4)
    for m in (model, restored):
        m.learn_many([t for _, t in more], [lab for lab, _ in more], ts=[700.0 + i for i in range(20)],
                     ids=[f"e{i}" for i in range(20)], sequential=True)
        m.learn_one(docs[0][1], "money" if docs[0][0] != "money" else "food", ts=800.0, id="d0")
        m.forget("e5")
    assert np.array_equal(restored.predict_log_proba_many(queries)[1], model.predict_log_proba_many(queries)[1])
    assert restored.checksum() == model.checksum() and len(restored) == len(model) == 60 - 2 + 19
    # a damaged snapshot is refused, never half read
    data = model.to_bytes()
    with pytest.raises(SnapshotError):
        loads(data[: len(data) // 2])
    start = data.index(b"base-1.sgm")
    with pytest.raises(SnapshotError):
        loads(data[:start + 400] + bytes(8) + data[start + 408:])
    with zipfile.ZipFile(io.BytesIO(data)) as archive:  # a pool edited in the header
        members = {name: archive.read(name) for name in archive.namelist()}
    header = json.loads(members["meta.json"])
    header["config"]["weights"][0][0] += 0.5
    members["meta.json"] = json.dumps(header).encode()
    edited = io.BytesIO()
    with zipfile.ZipFile(edited, "w", zipfile.ZIP_STORED) as archive:
        for name, member in members.items():
            archive.writestr(name, member)
    with pytest.raises(SnapshotError, match="checksum"):
        loads(edited.getvalue())


def test_service_gauges_of_an_ensemble_add_up_its_bases():
    model = ensemble(meta=False)
    docs = texts(30, 5)
    model.learn_many([t for _, t in docs], [lab for lab, _ in docs], ids=[f"d{i}" for i in range(30)])
    stats = model.stats()
    assert stats["documents"] == 30 and stats["classes"] == len(model.classes_)
    assert stats["entries"] == sum(base.stats()["entries"] for base in model.bases) > 0
    assert model.memory_bytes() == sum(base.memory_bytes() for base in model.bases)
    assert model.resum_totals() == 0
    assert model.spec.name == "ensemble(mnb_uc_pd_jm_dp,tdm_uc_jm_dp_kdp_kpd,mnb_u_jm_ps)"


def memory_config(tmp_path, config_path, **overrides) -> ServiceConfig:
    name = f"ens-{uuid.uuid4().hex[:8]}"
    values = dict(bootstrap_servers=f"memory://{name}", client="memory", train_topic=f"{name}-train",
                  score_topic=f"{name}-score", output_topic=f"{name}-out", dlq_topic=f"{name}-dlq",
                  group=f"{name}-g", state_dir=str(tmp_path / "state"), metrics_address="", config=str(config_path),
                  top_k=3, poll_timeout=0.0, snapshot_every_records=10**9, snapshot_every_seconds=10**9)
    values.update(overrides)
    return ServiceConfig(**values)


def read_outputs(client, topic: str) -> dict:
    reader = client.consumer(None)
    reader.assign([TopicPartition(topic, p) for p in reader.partitions_for(topic)])
    records = reader.poll(10_000, 0.5)
    reader.close()
    return {parsed.id: parsed for parsed in (parse_output(r.value) for r in records)}


def training_log() -> tuple[list[bytes], Ensemble]:
    """Training records (learns, a relabel, an unlearn, a forget, a malformed one) and, from the same config,
    an ensemble that learned them in-process one by one."""
    docs = texts(80, 6)
    values, reference = [], build_model(ensemble().model_config())
    for i, (label, text) in enumerate(docs):
        values.append(json.dumps({"id": f"d{i}", "labels": [label], "text": text, "ts": 5.0 * i}).encode())
        reference.learn_one(text, [label], ts=5.0 * i, id=f"d{i}")
    values.append(b"not json")
    values.append(json.dumps({"id": "d4", "labels": ["food"], "text": docs[4][1], "ts": 500.0}).encode())
    reference.learn_one(docs[4][1], ["food"], ts=500.0, id="d4")
    values.append(json.dumps({"id": "d9", "op": "unlearn", "labels": [docs[9][0]], "text": docs[9][1]}).encode())
    reference.unlearn_one(docs[9][1], [docs[9][0]], id="d9")
    values.append(json.dumps({"id": "d12", "op": "forget"}).encode())
    reference.forget("d12")
    return values, reference


def test_service_trains_and_scores_an_ensemble_config_as_the_ensemble_does(tmp_path, capsys):
    config_path = tmp_path / "ensemble.json"  # what `sgm ensemble --out` writes: the ensemble's model_config
    config_path.write_text(json.dumps(ensemble().model_config(), indent=2, sort_keys=True) + "\n")
    cfg = memory_config(tmp_path, config_path)
    assert model_config(build_model(cfg.model_config())) == model_config(ensemble())
    values, reference = training_log()
    queries = {f"q{i}": text for i, (_, text) in enumerate(texts(30, 7))}
    queries["q-terms"] = {"goal": 2, "bank": 1, "never": 1}
    client = open_client("memory", KafkaConfig(bootstrap_servers=cfg.bootstrap_servers))
    service = Service(cfg, client=client)
    service.start()
    producer = client.producer()
    try:
        for value in values:
            producer.send(cfg.train_topic, value)
        producer.flush()
        run_until_idle(service)
        for doc_id, doc in queries.items():
            record = ScoreRecord(id=doc_id, text=doc) if isinstance(doc, str) else ScoreRecord(id=doc_id, terms=doc)
            producer.send(cfg.score_topic, encode_score(record), key=doc_id.encode())
        producer.flush()
        run_until_idle(service)
        assert isinstance(service.model, Ensemble) and service.train_offsets == {0: len(values)}
        assert service.model.checksum() == reference.checksum()
        for served, config in zip(service.model.bases, ensemble().model_config()["bases"]):  # each as if alone
            alone = build_model(config)
            for value in values[:-4]:
                record = json.loads(value)
                alone.learn_one(record["text"], record["labels"], ts=record["ts"], id=record["id"])
            learn = json.loads(values[-3])
            alone.learn_one(learn["text"], learn["labels"], ts=learn["ts"], id=learn["id"])
            unlearn = json.loads(values[-2])
            alone.unlearn_one(unlearn["text"], unlearn["labels"], id=unlearn["id"])
            alone.forget(json.loads(values[-1])["id"])
            assert served.checksum() == alone.checksum()
    finally:
        producer.close()
        service.close()  # the final snapshot
    outputs = read_outputs(client, cfg.output_topic)
    assert sorted(outputs) == sorted(queries)
    expected = dict(zip(queries, reference.predict_proba_many(list(queries.values()))))
    for doc_id, out in outputs.items():
        assert len(out.top_k) == 3 and out.model["kind"] == "ensemble"
        assert out.model["spec"] == reference.spec.name and out.model["documents"] == len(reference)
        assert {label: p for label, p in out.top_k} == expected[doc_id]  # bit for bit
        assert out.labels == (max(expected[doc_id], key=expected[doc_id].get),)

    # a restart restores the ensemble from the service's snapshot and scores the same
    assert list((tmp_path / "state").glob("snapshot-*.sgm"))  # written by close()
    restarted = Service(cfg, client=open_client("memory", KafkaConfig(bootstrap_servers=cfg.bootstrap_servers)))
    restarted.start()
    try:
        assert restarted.train_offsets == {0: len(values)} and restarted.model.checksum() == reference.checksum()
        assert same_ranking(restarted.model.rank_many(list(queries.values()), 3),
                            reference.rank_many(list(queries.values()), 3))
    finally:
        restarted.close()
    assert sgm(["stats", "--state-dir", cfg.state_dir, "--json"]) == 0  # sgm stats reads an ensemble's snapshot
    summary = json.loads(capsys.readouterr().out)
    assert summary["family"] == "ensemble" and summary["documents"] == len(reference) and len(summary["bases"]) == 3


def test_sgm_ensemble_writes_a_config_sgm_serve_accepts(tmp_path, capsys):
    data = tmp_path / "toy.jsonl"
    data.write_text("".join(json.dumps({"id": f"d{i}", "text": text, "labels": [label],
                                        "split": "test" if i % 4 == 0 else "train"}) + "\n"
                            for i, (label, text) in enumerate(texts(120, 8))), encoding="utf-8")
    bases = []
    for i, config in enumerate([{"model": "u_jm_ps", "params": {"beta": 0.4}},
                                {"model": "tdm_uc_jm_dp_kpd_kdp", "tokenizer": {"ngrams": 2, "binary": True}}]):
        (tmp_path / f"b{i}.json").write_text(json.dumps(config), encoding="utf-8")
        bases += ["--base", str(tmp_path / f"b{i}.json")]
    out = tmp_path / "ensemble.json"
    assert sgm(["ensemble", "--data", str(data), *bases, "--folds", "3", "--out", str(out)]) == 0
    written = json.loads(out.read_text())
    served = build_model(memory_config(tmp_path, out).model_config())  # what sgm serve --config builds
    assert model_config(served) == model_config(build_model(written))
    if written["model"] == "ensemble":  # the fit may also choose one base alone
        assert isinstance(served, Ensemble) and np.array_equal(served.weights, np.asarray(written["weights"]))


def test_service_refuses_an_ensemble_whose_bases_read_mail_differently(tmp_path):
    config = {"model": "ensemble", "bases": [{"model": "u_jm", "mail": {"ngrams": 1}}, {"model": "u_jm"}],
              "weights": [0.5, 0.5]}
    (tmp_path / "mail.json").write_text(json.dumps(config))
    service = Service(memory_config(tmp_path, tmp_path / "mail.json"))
    with pytest.raises(SpecError, match="mail options"):
        service.prepare()
    (tmp_path / "text.json").write_text(json.dumps({**config, "bases": [{"model": "u_jm"}, {"model": "u_jm"}]}))
    service = Service(memory_config(tmp_path, tmp_path / "text.json", spam_threshold=0.9, spam_prior_weight=1.0))
    with pytest.raises(SpecError, match="prior weight"):
        service.prepare()


@pytest.mark.kafka
def test_ensemble_served_through_a_real_broker(kafka_broker, tmp_path):
    name = f"ensk-{uuid.uuid4().hex[:8]}"
    config_path = tmp_path / "ensemble.json"
    config_path.write_text(json.dumps(ensemble().model_config()))
    cfg = ServiceConfig(bootstrap_servers=kafka_broker.bootstrap_servers, client="confluent",
                        train_topic=f"{name}-train", score_topic=f"{name}-score", output_topic=f"{name}-out",
                        dlq_topic=f"{name}-dlq", group=f"{name}-group", state_dir=str(tmp_path / "state"),
                        metrics_address="127.0.0.1:0", config=str(config_path), score_partitions=2)
    client = open_client("confluent", kafka_broker.config())
    events = list(SyntheticStream(SyntheticConfig(seed=5, n_docs=250, profiles=("news",), malformed_rate=0.03,
                                                  forget_rate=0.02)).events())
    scoring_ids = {e.id for e in events if e.kind == "score" and e.valid}
    train_end = sum(e.kind == "train" for e in events)
    running = start_service(cfg, client)
    try:
        feed(client, cfg, events)
        outputs = outputs_by_id(read_topic(client, cfg.output_topic, lambda r: len(r) >= len(scoring_ids)))
        deadline = time.monotonic() + 30
        while running.service.train_offsets.get(0, 0) < train_end and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        running.halt()
    assert set(outputs) == scoring_ids
    assert all(o[0].model["kind"] == "ensemble" and o[0].top_k for o in outputs.values())
    # the served ensemble equals one trained in-process on the valid records (every base bit for bit)
    assert running.service.model.checksum() == reference_model(cfg, events).checksum()


def test_a_text_over_the_term_cap_under_any_base_tokenizer_is_refused():
    """An ensemble caps a text's distinct terms under each base's tokenizer (the most terms count): a text
    within the cap as words but over it as words + bigrams is refused, for the ensemble as for its bigram base."""
    from sgm.consumers.service.training import too_many_text_terms
    from sgm.stream.schemas.limits import Limits

    words = MNB("u_jm")
    bigrams = MNB("u_jm", tokenizer=Tokenizer(ngrams=2))
    ensemble = Ensemble([words, bigrams], [0.5, 0.5])
    assert ensemble.tokenizers() == (words.tokenizer, bigrams.tokenizer)
    assert Ensemble([words, MNB("uc_pd_jm_dp")], [0.5, 0.5]).tokenizers() == (words.tokenizer,)
    text = " ".join(f"w{i}" for i in range(40))  # 40 distinct words, 79 distinct words + bigrams
    limits = Limits(max_terms=60)
    assert too_many_text_terms(words, text, limits) is None
    assert too_many_text_terms(bigrams, text, limits) == 79
    assert too_many_text_terms(ensemble, text, limits) == 79
