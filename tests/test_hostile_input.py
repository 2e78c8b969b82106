"""Hostile input: whatever arrives on the topics, the service neither crashes nor learns from garbage.

Generated with hypothesis (and fuzzed with atheris where it is installed):
invalid UTF-8, invalid JSON (NaN, truncation, random bytes), non-objects,
wrong types in every field, NaN/negative/huge/garbled timestamps, empty and
oversized texts and records, thousands of labels, bad terms and counts,
unknown ops, forgets of unknown ids, unlearns under the wrong labels, mixed
with valid records over a small id pool so corrections really hit learnt
documents. For every stream:

* ``Service.step()`` never raises (zero crashes);
* every rejected record is in the DLQ at its source offset with exactly the
  reason an independent oracle gives: the validator's ``Reason``, or the
  ``ApplyReason`` (``unknown_id``, ``unlearn_mismatch``, ``model_rejected``) of
  a reference model replaying the valid records; nothing else is there;
* every valid scoring record has an output with probabilities in [0, 1];
* the model's checksum equals that of a model trained in-process on the
  valid records only.

The hypothesis part runs on the memory transport; one fixed hostile corpus
also goes through a real broker.

Run as a script to fuzz with atheris (``-atheris_runs=N``, libFuzzer flags):
``.venv/bin/python tests/test_hostile_input.py -atheris_runs=20000``.
"""
from __future__ import annotations

import json
import math
import random
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

if __name__ == "__main__":  # run as the atheris harness: make the project importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sgm.consumers.config import ServiceConfig
from sgm.consumers.service import Service
from sgm.model import LearnGuardError, build_model
from sgm.stream.records import (
    DEFAULT_LIMITS,
    ApplyReason,
    InvalidRecord,
    Op,
    parse_dead_letter,
    parse_output,
    parse_score,
    parse_train,
)
from sgm.stream.kafka import KafkaConfig, Record, TopicPartition, open_client
from tests.service_helpers import run_until_idle

LIMITS = DEFAULT_LIMITS
ID_POOL = [f"doc-{i}" for i in range(8)]
LABEL_POOL = ["spam", "ham", "news", "sport"]
WORDS = "cheap pills win cash now meeting noon report match goal election market the a of".split()
MODELS = {
    "mnb": {"model": "uc_pd_jm_dp", "param": {"beta": 0.3, "mu": 20.0, "delta": 0.5, "ups": 0.2},
            "half_life": 3600.0},
    "mnb-bounded": {"model": "uc_pd_jm_dp", "param": {}, "half_life": 60.0, "max_documents": 4, "prune_below": 0.05},
    "tdm": {"model": "tdm_uc_jm_dp_kpd_kdp", "param": {}, "half_life": 600.0},
}


# ------------------------------------------------------------------------------------ the oracle
def _weighs_nothing(model, ts: float) -> bool:
    """``2 ** -((T - ts) / H)`` below 1e-280, the floor under which the count state expires a document."""
    clock = model.state.clock
    return (clock.half_life is not None and clock.now is not None
            and (clock.now - ts) / clock.half_life > math.log2(1e280))



def oracle(train_records, score_records, model_config: dict):
    """What the service must do: (reference model, {train offset: reason}, {score offset: reason}, valid scoring ids).

    Independent of the service code: the validator, then a fresh model applying
    the valid training records in log order (ts falls back to the Kafka
    timestamp, as documented in docs/SCHEMAS.md); a learn whose event time lies
    more than the default ``--max-event-skew`` ahead of now is refused.
    """
    model = build_model(model_config)
    train_reasons: dict[int, str] = {}
    for record in train_records:
        try:
            parsed = parse_train(record.value)
        except InvalidRecord as exc:
            train_reasons[record.offset] = exc.reason.value
            continue
        ts = parsed.ts if parsed.ts is not None else record.timestamp_ms / 1000.0
        doc = parsed.text if parsed.text is not None else parsed.terms
        if parsed.op is Op.LEARN and ts > time.time() + ServiceConfig.max_event_skew:
            # a learn from the future never moves the model's clock (docs/RELIABILITY.md)
            train_reasons[record.offset] = ApplyReason.FUTURE_TIMESTAMP.value
        elif parsed.op is Op.LEARN and parsed.id not in model and _weighs_nothing(model, ts):
            # with decay, a new document so far behind model time that its weight underflows is refused
            try:
                model.check_labels(parsed.labels)
            except ValueError:
                train_reasons[record.offset] = ApplyReason.MODEL_REJECTED.value
            else:
                train_reasons[record.offset] = ApplyReason.PAST_TIMESTAMP.value
        elif parsed.op is Op.LEARN:
            try:
                model.learn_one(doc, parsed.labels, ts=ts, id=parsed.id)
            except ValueError:
                train_reasons[record.offset] = ApplyReason.MODEL_REJECTED.value
        elif parsed.op is Op.FORGET:
            if not model.forget(parsed.id):
                train_reasons[record.offset] = ApplyReason.UNKNOWN_ID.value
        else:
            try:
                if not model.unlearn_one(doc, parsed.labels, ts=ts, id=parsed.id):
                    train_reasons[record.offset] = ApplyReason.UNKNOWN_ID.value
            except LearnGuardError:
                train_reasons[record.offset] = ApplyReason.UNLEARN_MISMATCH.value
            except ValueError:
                train_reasons[record.offset] = ApplyReason.MODEL_REJECTED.value
    score_reasons: dict[int, str] = {}
    valid_ids: set[str] = set()
    for record in score_records:
        try:
            valid_ids.add(parse_score(record.value).id)
        except InvalidRecord as exc:
            score_reasons[record.offset] = exc.reason.value
    return model, train_reasons, score_reasons, valid_ids


def service_config(name: str, state_dir: str, model: str = "mnb", **overrides) -> ServiceConfig:
    values = dict(bootstrap_servers=f"memory://{name}", client="memory", train_topic=f"{name}-train",
                  score_topic=f"{name}-score", output_topic=f"{name}-out", dlq_topic=f"{name}-dlq",
                  group=f"{name}-group", state_dir=state_dir, metrics_address="", score_partitions=1,
                  max_poll_records=7, poll_timeout=0.0, snapshot_every_records=10**9, snapshot_every_seconds=10**9)
    values.update(MODELS[model])
    values.update(overrides)
    return ServiceConfig(**values)


def read_topic(client, topic: str, timeout: float = 0.0) -> list[Record]:
    consumer = client.consumer(None)
    consumer.assign([TopicPartition(topic, p) for p in consumer.partitions_for(topic)])
    out: list[Record] = []
    deadline = time.monotonic() + timeout
    while True:
        batch = consumer.poll(100_000, 0.05 if timeout else 0.0)
        out.extend(batch)
        if not batch and time.monotonic() >= deadline:
            break
    consumer.close()
    return out


def check_service_against_oracle(service: Service, client, cfg: ServiceConfig, *, settle: float = 0.0) -> dict:
    """Assert the service's outputs, dead letters and model equal the oracle's; returns the reason counts."""
    train = read_topic(client, cfg.train_topic, settle)
    score = read_topic(client, cfg.score_topic, settle)
    reference, train_reasons, score_reasons, valid_ids = oracle(train, score, cfg.model_config())
    letters = [parse_dead_letter(r.value) for r in read_topic(client, cfg.dlq_topic, settle)]
    got_train = {d.offset: _code(d.reason) for d in letters if d.topic == cfg.train_topic}
    got_score = {d.offset: _code(d.reason) for d in letters if d.topic == cfg.score_topic}
    assert got_train == train_reasons
    assert got_score == score_reasons
    for letter in letters:  # the original bytes are kept, whatever they were (huge ones cut, and the cut noted)
        original = (train if letter.topic == cfg.train_topic else score)[letter.offset].value
        assert letter.value == original or (original.startswith(letter.value) and "cut to its first" in letter.detail)
    outputs = [parse_output(r.value) for r in read_topic(client, cfg.output_topic, settle)]
    assert {o.id for o in outputs} == valid_ids
    for out in outputs:
        assert all(0.0 <= p <= 1.0 and math.isfinite(p) for _, p in out.top_k)
    assert service.model.checksum() == reference.checksum()
    return Counter(list(train_reasons.values()) + list(score_reasons.values()))


def _code(reason) -> str:
    return reason.value if hasattr(reason, "value") else str(reason)


def run_memory_service(records: list[tuple[str, bytes]], model: str = "mnb") -> dict:
    """Feed ``(kind, value)`` records to a fresh service on the memory transport, step until idle, check."""
    name = f"hostile-{uuid.uuid4().hex[:10]}"
    with tempfile.TemporaryDirectory() as state:
        cfg = service_config(name, state, model)
        client = open_client("memory", KafkaConfig(bootstrap_servers=cfg.bootstrap_servers))
        service = Service(cfg, client=client)
        service.start()
        try:
            producer = client.producer()
            for kind, value in records:
                producer.send(cfg.train_topic if kind == "train" else cfg.score_topic, value, key=b"k")
            producer.flush()
            n_train = sum(kind == "train" for kind, _ in records)
            run_until_idle(service)  # step() must never raise, whatever the records hold
            assert service.train_offsets.get(0, 0) == n_train
            return check_service_against_oracle(service, client, cfg)
        finally:
            service.close()


# ------------------------------------------------------------------------------------ hostile values


def dumps(obj, *, allow_nan: bool = True) -> bytes:
    return json.dumps(obj, allow_nan=allow_nan).encode("utf-8", "surrogatepass")


def fixed_corpus(seed: int = 0, n_valid: int = 120) -> list[tuple[str, bytes]]:
    """A deterministic hostile stream: every category at least once, among valid records."""
    rng = random.Random(seed)
    big = LIMITS.max_text_chars + 1
    out: list[tuple[str, bytes]] = []
    ts = 1_700_000_000.0
    for i in range(n_valid):
        ts += rng.uniform(0.5, 2.0)
        doc_id = rng.choice(ID_POOL + [f"fresh-{i}"])
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 12)))
        out.append(("train", dumps({"id": doc_id, "labels": rng.sample(LABEL_POOL, rng.randint(1, 2)), "text": text,
                                    "ts": ts})))
        out.append(("score", dumps({"id": f"q-{i}", "text": text, "ts": ts})))
    hostile_train = [
        b"\xff\xfe\x00garbage", b'{"id": "a", "text": "caf\xc3", "labels": ["x"]}',  # invalid UTF-8
        b'{"id": "a", "text": "\\ud800", "labels": ["x"]}',  # lone surrogate escape
        b"", b"{", b'{"id": "a",}', b"null", b"[1, 2, 3]", b'"just a string"', b"42",  # not JSON / not an object
        b'{"id": "a", "text": "x", "labels": ["x"], "ts": NaN}', b'{"id": "a", "text": "x", "labels": ["x"], "ts": Infinity}',
        dumps({"id": "a", "text": "x", "labels": ["x"], "ts": -1}), dumps({"id": "a", "text": "x", "labels": ["x"], "ts": 1e300}),
        dumps({"id": "a", "text": "x", "labels": ["x"], "ts": 10**400}), dumps({"id": "a", "text": "x", "labels": ["x"], "ts": 1.7e12}),
        dumps({"id": "a", "text": "x", "labels": ["x"], "ts": "yesterday"}), dumps({"id": "a", "text": "x", "labels": ["x"], "ts": True}),
        b'{"id": "a", "text": "x", "labels": ["x"], "ts": 1' + b"0" * 5000 + b"}",  # an integer too long to parse
        dumps({"id": 7, "text": "x", "labels": ["x"]}), dumps({"id": "a", "text": 7, "labels": ["x"]}),
        dumps({"id": "a", "text": "x", "labels": "spam"}), dumps({"id": "a", "text": "x", "labels": [1, None]}),
        dumps({"id": "a", "text": "x", "labels": ["x"], "op": 3}), dumps({"id": "a", "terms": "a b", "labels": ["x"]}),
        dumps({"id": "a", "text": "x" * big, "labels": ["x"]}),  # oversized text
        dumps({"id": "a", "text": "x", "labels": ["x"], "pad": "y" * (LIMITS.max_record_bytes + 1)}),  # oversized record
        dumps({"id": "a", "text": "x", "labels": [f"label-{i}" for i in range(5000)]}),  # thousands of labels
        dumps({"id": "a", "text": "x", "labels": ["ok", ""]}), dumps({"id": "a", "text": "x", "labels": ["two\nlines"]}),
        dumps({"id": "a", "text": "x", "labels": ["\x1f"]}), dumps({"id": "a", "text": "x", "labels": ["x" * 500]}),
        dumps({"id": "a", "terms": {"ok": 1, "bad": float("nan")}, "labels": ["x"]}),
        dumps({"id": "a", "terms": {"ok": 1, "bad": -1}, "labels": ["x"]}), dumps({"id": "a", "terms": {"": 1}, "labels": ["x"]}),
        dumps({"id": "a", "terms": {f"t{i}": 1 for i in range(LIMITS.max_terms + 1)}, "labels": ["x"]}),
        dumps({"id": "a", "text": "x", "terms": {"x": 1}, "labels": ["x"]}), dumps({"id": "a", "labels": ["x"]}),
        dumps({"text": "x", "labels": ["x"]}), dumps({"id": "", "text": "x", "labels": ["x"]}),
        dumps({"id": "tab\there", "text": "x", "labels": ["x"]}), dumps({"id": "a", "text": "x", "labels": []}),
        dumps({"id": "a", "op": "relearn", "text": "x", "labels": ["x"]}), dumps({"id": "a", "op": "LEARN", "text": "x", "labels": ["x"]}),
        dumps({"id": "never-seen", "op": "forget"}), dumps({"id": "never-seen-either", "op": "forget", "ts": 5}),
        dumps({"id": "a", "op": "unlearn", "text": "x", "labels": ["x"]}),  # unlearn of an unknown id
    ]
    # unlearns of known ids under labels they were not learned with, forgets of known ids (valid), repeated forgets
    hostile_train += [dumps({"id": doc_id, "op": "unlearn", "text": "cash", "labels": ["not-this-one"]})
                      for doc_id in ID_POOL]
    hostile_train += [dumps({"id": ID_POOL[0], "op": "forget"}), dumps({"id": ID_POOL[0], "op": "forget"})]
    hostile_score = [b"\xc3\x28", b"{]", b"[]", dumps({"id": "q", "text": None}), dumps({"id": "q"}),
                     dumps({"id": "q", "text": "x" * big}), dumps({"id": "q", "text": "x", "ts": float("nan")}),
                     dumps({"id": ["q"], "text": "x"}), dumps({"id": "q", "terms": {"a": True}}),
                     dumps({"id": "q-empty", "text": ""}), dumps({"id": "q-terms", "terms": {"cash": 2.5}})]
    for value in hostile_train:
        out.insert(rng.randrange(len(out) + 1), ("train", value))
    for value in hostile_score:
        out.insert(rng.randrange(len(out) + 1), ("score", value))
    return out


def test_the_fixed_hostile_corpus_on_the_memory_transport():
    reasons = run_memory_service(fixed_corpus(0))
    # the corpus really covers the categories of the issue
    for code in ("invalid_utf8", "invalid_json", "not_an_object", "wrong_type", "bad_timestamp", "too_large",
                 "too_many_labels", "too_many_terms", "unknown_op", "bad_label", "bad_term", "bad_count", "bad_id",
                 "missing_field", "conflicting_fields", "unknown_id", "unlearn_mismatch"):
        assert reasons[code] >= 1, code


@pytest.mark.parametrize("model", ["mnb-bounded", "tdm"])
def test_the_fixed_hostile_corpus_with_a_memory_bound_and_with_tdm(model):
    run_memory_service(fixed_corpus(1), model)


# ------------------------------------------------------------------------------------ hypothesis

try:
    from hypothesis import HealthCheck, given, settings, strategies as st
except ModuleNotFoundError:  # pragma: no cover - hypothesis is a dev dependency
    st = None

if st is not None:
    json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), st.text(max_size=12))
    json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=3)
                               | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=8)
    ids = st.one_of(st.sampled_from(ID_POOL), st.sampled_from(ID_POOL), st.text(max_size=10),
                    st.text(alphabet="\x00\x1f\n\t\x7f\u0085\ud800a", max_size=4), json_values)
    labels = st.one_of(st.lists(st.sampled_from(LABEL_POOL), min_size=1, max_size=3),
                       st.lists(st.sampled_from(LABEL_POOL), min_size=1, max_size=3),
                       st.lists(st.text(max_size=6), max_size=4),
                       st.integers(LIMITS.max_labels - 1, 3000).map(lambda n: [f"l{i}" for i in range(n)]),
                       json_values)
    texts = st.one_of(st.lists(st.sampled_from(WORDS), max_size=15).map(" ".join), st.text(max_size=40), st.just(""),
                      st.integers(LIMITS.max_text_chars - 1, LIMITS.max_text_chars + 2).map(lambda n: "w " * (n // 2) + "x" * (n % 2)),
                      json_values)
    terms = st.one_of(st.dictionaries(st.sampled_from(WORDS) | st.text(max_size=5),
                                      st.integers(-2, 4) | st.floats() | st.booleans(), max_size=5), json_values)
    timestamps = st.one_of(st.none(), st.floats(1.6e9, 1.8e9), st.floats(1.6e9, 1.8e9), st.floats(),
                           st.integers(-(10**20), 10**20), st.just(10**400), st.text(max_size=25),
                           st.sampled_from(["2024-01-01", "2024-01-01T10:00:00+02:00", "2024-13-45", "1e9"]),
                           st.booleans())
    ops = st.one_of(st.none(), st.sampled_from(["learn", "unlearn", "forget"]), st.sampled_from(["learn", "unlearn", "forget"]),
                    st.text(max_size=8), json_values)

    @st.composite
    def record_objects(draw, kind: str):
        obj = {}
        if draw(st.integers(0, 9)):
            obj["id"] = draw(ids)
        if kind == "train":
            if draw(st.booleans()):
                obj["op"] = draw(ops)
            if draw(st.integers(0, 9)):
                obj["labels"] = draw(labels)
        content = draw(st.sampled_from(["text", "text", "terms", "both", "none"]))
        if content in ("text", "both"):
            obj["text"] = draw(texts)
        if content in ("terms", "both"):
            obj["terms"] = draw(terms)
        if draw(st.integers(0, 4)):
            obj["ts"] = draw(timestamps)
        if not draw(st.integers(0, 5)):
            obj[draw(st.text(max_size=6))] = draw(json_values)  # unknown fields are ignored
        return obj

    @st.composite
    def valid_values(draw, kind: str):
        """Valid records over the small id pool: learns, and corrections that may or may not match."""
        obj = {"id": draw(st.sampled_from(ID_POOL[:3])) if kind == "train" else f"q-{draw(st.integers(0, 99))}"}
        op = draw(st.sampled_from(["learn"] * 4 + ["unlearn", "forget"])) if kind == "train" else None
        if op is not None and (op != "learn" or draw(st.booleans())):
            obj["op"] = op
        if op != "forget":
            if kind == "train":
                obj["labels"] = draw(st.lists(st.sampled_from(LABEL_POOL), min_size=1, max_size=2, unique=True))
            if draw(st.integers(0, 3)):
                obj["text"] = " ".join(draw(st.lists(st.sampled_from(WORDS), max_size=12)))
            else:
                obj["terms"] = draw(st.dictionaries(st.sampled_from(WORDS), st.integers(1, 5) | st.floats(0.1, 9.0),
                                                    max_size=5))
        if draw(st.integers(0, 5)):
            obj["ts"] = draw(st.floats(1.7e9, 1.7e9 + 1e5) | st.sampled_from(["2023-11-14T22:13:20Z", "2023-11-15"]))
        return dumps(obj, allow_nan=False)

    @st.composite
    def values(draw, kind: str):
        if draw(st.booleans()):
            return draw(valid_values(kind))
        how = draw(st.sampled_from(["json"] * 6 + ["nan", "utf8", "truncate", "bytes", "not_object", "deep"]))
        if how == "bytes":
            return draw(st.binary(max_size=40))
        if how == "not_object":
            return dumps(draw(st.one_of(json_scalars, st.lists(json_scalars, max_size=3))))
        if how == "deep":
            depth = draw(st.integers(1, 5000))
            return b'{"id": "d", "text": ' + b"[" * depth + b"]" * depth + b"}"
        raw = dumps(draw(record_objects(kind)))
        if how == "nan":
            return raw.replace(b"}", b', "ts": NaN}', 1) if raw.endswith(b"}") else raw
        if how == "utf8":
            at = draw(st.integers(0, len(raw)))
            return raw[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80"])) + raw[at:]
        if how == "truncate":
            return raw[: draw(st.integers(0, max(len(raw) - 1, 0)))]
        return raw

    streams = st.lists(st.sampled_from(["train", "train", "score"]).flatmap(
        lambda kind: st.tuples(st.just(kind), values(kind))), min_size=1, max_size=40)

    @settings(max_examples=200, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example])
    @given(records=streams)
    def test_generated_hostile_streams_never_crash_and_train_only_on_valid_records(records):
        run_memory_service(records)

    @settings(max_examples=40, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example])
    @given(records=streams, model=st.sampled_from(["mnb-bounded", "tdm"]))
    def test_generated_hostile_streams_with_a_memory_bound_and_with_tdm(records, model):
        run_memory_service(records, model)


# ------------------------------------------------------------------------------------ a real broker


@pytest.mark.kafka
def test_the_fixed_hostile_corpus_through_a_real_broker(kafka_broker, unique_name, tmp_path):
    from tests.service_helpers import start_service

    cfg = service_config(unique_name, str(tmp_path / "state"), bootstrap_servers=kafka_broker.bootstrap_servers,
                         client="confluent", max_poll_records=50, poll_timeout=0.05)
    corpus = fixed_corpus(2)
    # The feeder may write records over 1 MB; the service keeps librdkafka's default message.max.bytes
    # (1,000,000), so its dead letters of huge records must be cut to fit (consumers/service/dead_letters.py: fit_dead_letter).
    feeder = open_client("confluent", kafka_broker.config(extra={"message.max.bytes": 4 << 20}))
    client = open_client("confluent", kafka_broker.config())
    running = start_service(cfg, client)
    try:
        producer = feeder.producer()
        for kind, value in corpus:
            producer.send(cfg.train_topic if kind == "train" else cfg.score_topic, value, key=b"k")
        producer.flush()
        n_train = sum(kind == "train" for kind, _ in corpus)
        deadline = time.monotonic() + 60
        while running.service.train_offsets.get(0, 0) < n_train and time.monotonic() < deadline:
            time.sleep(0.1)
        n_score = sum(kind == "score" for kind, _ in corpus)
        outputs_and_letters = lambda: len(read_topic(client, cfg.output_topic, 0.5)) + sum(  # noqa: E731
            1 for r in read_topic(client, cfg.dlq_topic, 0.5) if parse_dead_letter(r.value).topic == cfg.score_topic)
        while outputs_and_letters() < n_score and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        running.halt()
    assert running.service.train_offsets.get(0, 0) == n_train
    reasons = check_service_against_oracle(running.service, client, cfg, settle=1.0)
    assert reasons["too_large"] >= 2 and reasons["unlearn_mismatch"] >= 1 and reasons["unknown_id"] >= 1


# ------------------------------------------------------------------------------------ atheris

FUZZ_SECONDS = 15


@pytest.mark.slow
def test_atheris_fuzz_of_the_parsers_and_the_service_loop():
    pytest.importorskip("atheris")
    import subprocess

    result = subprocess.run([sys.executable, __file__, f"-max_total_time={FUZZ_SECONDS}", "-atheris_runs=200000"],
                            capture_output=True, text=True, timeout=FUZZ_SECONDS + 120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Done" in result.stderr or "fuzz runs" in result.stdout + result.stderr


def _fuzz_main() -> None:  # pragma: no cover - runs in a subprocess under atheris
    import logging

    import atheris

    import sgm.consumers.service.dead_letters
    import sgm.consumers.service.scoring
    import sgm.consumers.service.training
    import sgm.stream.records

    logging.disable(logging.WARNING)  # one warning per rejected record otherwise
    for module in (sgm.stream.records, sgm.consumers.service.training, sgm.consumers.service.scoring,
                   sgm.consumers.service.dead_letters):  # coverage feedback from the parsers and the loop
        for value in list(vars(module).values()):
            if callable(value) and getattr(value, "__module__", None) == module.__name__:
                if isinstance(value, type):
                    for attr, member in list(vars(value).items()):
                        if callable(member) and hasattr(member, "__code__"):
                            setattr(value, attr, atheris.instrument_func(member))
                elif hasattr(value, "__code__"):
                    setattr(module, value.__name__, atheris.instrument_func(value))
    name = f"fuzz-{uuid.uuid4().hex[:8]}"
    state = tempfile.mkdtemp()
    cfg = service_config(name, state, "mnb")
    client = open_client("memory", KafkaConfig(bootstrap_servers=cfg.bootstrap_servers))
    service = Service(cfg, client=client)
    service.start()
    offsets = {"train": 0, "score": 0}
    runs = {"n": 0}

    def one_input(data: bytes) -> None:
        fdp = atheris.FuzzedDataProvider(data)
        kind = "train" if fdp.ConsumeBool() else "score"
        if fdp.ConsumeBool():  # structured: a JSON object with fuzzed fields
            obj = {"id": fdp.PickValueInList(ID_POOL + [fdp.ConsumeUnicode(6)])}
            if kind == "train":
                obj["op"] = fdp.PickValueInList(["learn", "unlearn", "forget", fdp.ConsumeUnicode(5)])
                obj["labels"] = [fdp.PickValueInList(LABEL_POOL + [fdp.ConsumeUnicode(4)])
                                 for _ in range(fdp.ConsumeIntInRange(0, 3))]
            obj["text"] = fdp.ConsumeUnicode(fdp.ConsumeIntInRange(0, 60))
            obj["ts"] = fdp.PickValueInList([fdp.ConsumeFloat(), fdp.ConsumeInt(8), fdp.ConsumeUnicode(12), None])
            value = json.dumps(obj, allow_nan=True).encode("utf-8", "surrogatepass")
        else:
            value = fdp.ConsumeBytes(fdp.remaining_bytes())
        topic = cfg.train_topic if kind == "train" else cfg.score_topic
        record = Record(topic, 0, offsets[kind], b"k", value, int(time.time() * 1000), ())
        offsets[kind] += 1
        # The service's own entry points: anything escaping them is a crash.
        if kind == "train":
            service.apply_training([record])
        else:
            service.score_batch([record])
        runs["n"] += 1

    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    _fuzz_main()
