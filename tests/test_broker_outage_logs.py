"""A broker that is gone must not flood the log: librdkafka's lines are held back when they repeat.

Session 6, by hand: ``sgm serve`` behind a proxy that refused connections for a minute wrote ~5,000
librdkafka lines (``Connect to ... failed: Connection refused``, one per attempt of each client,
70 per second), which buried the service's own ``kafka error; retrying`` lines. Here three real
librdkafka consumers poll an address where nothing listens for 4 s (589 lines without the filter).
"""
from __future__ import annotations

import io
import json
import logging
import time

from sgm.consumers.logs import setup_logging
from sgm.stream.broker import free_port
from sgm.stream.kafka import KafkaConfig, open_client


def test_repeated_librdkafka_lines_of_an_unreachable_broker_are_held_back():
    buffer = io.StringIO()
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    setup_logging("json", "INFO", stream=buffer)
    try:
        client = open_client("confluent", KafkaConfig(bootstrap_servers=f"127.0.0.1:{free_port()}"))
        consumers = [client.consumer(f"outage-{i}") for i in range(3)]
        try:
            for consumer in consumers:
                consumer.subscribe(["outage"])
            end = time.monotonic() + 4.0
            while time.monotonic() < end:
                for consumer in consumers:
                    consumer.poll(0.1)
        finally:
            for consumer in consumers:
                consumer.close()
        lines = [json.loads(line) for line in buffer.getvalue().splitlines()]
        from_librdkafka = [line for line in lines if line["logger"] == "sgm.stream.kafka.librdkafka"]
        assert 1 <= len(from_librdkafka) <= 6, len(from_librdkafka)  # one per kind of line, not one per attempt
        assert any("Connection refused" in line["msg"] for line in from_librdkafka)
        logging.getLogger("sgm.service").error("kafka error; retrying")  # the service's own lines pass
        logging.getLogger("sgm.service").error("kafka error; retrying")
        assert buffer.getvalue().count('"kafka error; retrying"') == 2
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
