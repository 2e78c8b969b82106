"""A rejected record with a huge key or huge headers still gets its dead letter, cut to fit, with the cut noted.

``fit_dead_letter`` cuts a key beyond 1,024 bytes and drops headers beyond
16 KiB so that the envelope always fits a producer's ``message.max.bytes``
(else its delivery fails for good). Driven through the service on the
memory transport, for a scoring and for a training record: each has exactly
one dead letter, at its offset, with its reason, its value whole, its key's
first 1,024 bytes, no headers, and a detail that says what was cut.
"""
from __future__ import annotations

import tempfile
import uuid

from sgm.consumers.service import Service
from sgm.consumers.service.dead_letters import DLQ_MAX_HEADER_BYTES, DLQ_MAX_KEY_BYTES
from sgm.stream.kafka import KafkaConfig, open_client
from sgm.stream.records import Reason, parse_dead_letter
from tests.test_hostile_input import dumps, read_topic, service_config
from tests.service_helpers import run_until_idle

KEY = bytes(range(256)) * 20  # 5,120 bytes, every byte value
HEADERS = [(f"h{i}", bytes([i]) * 8000) for i in range(3)]  # 24,000 bytes of values
assert len(KEY) > DLQ_MAX_KEY_BYTES and sum(len(v) for _, v in HEADERS) > DLQ_MAX_HEADER_BYTES


def test_huge_keys_and_headers_are_cut_and_the_cut_is_noted():
    name = f"dlq-fit-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as state:
        cfg = service_config(name, state, "mnb")
        client = open_client("memory", KafkaConfig(bootstrap_servers=cfg.bootstrap_servers))
        producer = client.producer()
        producer.send(cfg.train_topic, dumps({"id": "t1", "text": "cheap pills", "labels": ["spam"]}), key=b"k")
        producer.send(cfg.train_topic, b'{"id": "t2", "text": ', key=KEY, headers=HEADERS)  # truncated JSON
        producer.send(cfg.score_topic, dumps({"id": "s1", "text": "cheap"}), key=b"k")
        producer.send(cfg.score_topic, dumps({"id": 7, "text": "an id that is a number"}), key=KEY, headers=HEADERS)
        producer.flush()
        service = Service(cfg, client=client)
        service.start()
        try:
            run_until_idle(service)
        finally:
            service.close()
        letters = [parse_dead_letter(r.value) for r in read_topic(client, cfg.dlq_topic)]
        outputs = read_topic(client, cfg.output_topic)
    assert len(outputs) == 1  # s1
    assert sorted((d.topic, d.offset) for d in letters) == [(cfg.score_topic, 1), (cfg.train_topic, 1)]
    for letter in letters:
        assert letter.key == KEY[:DLQ_MAX_KEY_BYTES] and letter.headers == ()
        assert f"key cut to its first {DLQ_MAX_KEY_BYTES} of {len(KEY)} bytes" in letter.detail
        assert f"{len(HEADERS)} headers dropped" in letter.detail
    by_topic = {d.topic: d for d in letters}
    assert by_topic[cfg.train_topic].reason == Reason.INVALID_JSON
    assert by_topic[cfg.train_topic].value == b'{"id": "t2", "text": '
    assert by_topic[cfg.score_topic].reason == Reason.WRONG_TYPE
    assert by_topic[cfg.score_topic].value == dumps({"id": 7, "text": "an id that is a number"})
