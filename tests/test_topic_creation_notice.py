"""sgm serve names the topics it had to create: the one trace of a misspelt topic name, which is otherwise created
empty and served without an error."""
from __future__ import annotations

import logging

from sgm.consumers.config import ServiceConfig
from sgm.consumers.service.connections import Connections
from sgm.stream.kafka import KafkaConfig, open_client

NOTICE = "created topics that did not exist"


def connect(broker: str, caplog, **topics) -> list[str]:
    config = ServiceConfig(bootstrap_servers=f"memory://{broker}", client="memory", role="trainer",
                           metrics_address="", **topics)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="sgm.service"):
        Connections(open_client("memory", KafkaConfig(config.bootstrap_servers)), config).connect({0: 0})
    return [r.getMessage() for r in caplog.records if NOTICE in r.getMessage()]


def test_created_topics_are_named_once_and_a_misspelt_one_stands_out(caplog):
    first = connect("notice-1", caplog)
    assert len(first) == 1 and all(f"'sgm-{t}'" in first[0] for t in ("train", "score", "output", "dlq"))
    assert connect("notice-1", caplog) == []  # a restart on the same topics says nothing
    typo = connect("notice-1", caplog, train_topic="sgm-trian")
    assert typo == ["created topics that did not exist: 'sgm-trian' (training)"]
