"""The training topic at start: sgm serve names the topics it had to create (the one trace of a misspelt topic name,
which is otherwise created empty and served without an error), and a stop while it waits for a missing one ends
the wait at once."""
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


def test_a_stop_while_waiting_for_a_missing_training_topic_ends_the_start_at_once(caplog):
    """With --create-topics false and no training topic, a start attempt waits up to 15 s for it; a stop (SIGTERM,
    Ctrl-C) during that wait ends it then, without another 'kafka error; retrying' line."""
    import threading
    import time

    from sgm.consumers.service import Service
    from sgm.consumers.service.loop import ATTEMPT_TIMEOUT

    config = ServiceConfig(bootstrap_servers="memory://notice-stop", client="memory", role="trainer",
                           metrics_address="", create_topics=False, train_topic="no-such-topic")
    service = Service(config, client=open_client("memory", KafkaConfig(config.bootstrap_servers)))
    stop = threading.Event()
    thread = threading.Thread(target=service.run, args=(stop,), daemon=True)
    with caplog.at_level(logging.INFO, logger="sgm.service"):
        thread.start()
        time.sleep(1.0)  # inside the first attempt's wait for the topic
        stopped_at = time.monotonic()
        stop.set()
        thread.join(ATTEMPT_TIMEOUT)
        took = time.monotonic() - stopped_at
    assert not thread.is_alive()
    assert took < ATTEMPT_TIMEOUT / 3, f"the stop waited for the attempt's timeout ({took:.1f} s)"
    assert not [r for r in caplog.records if "retrying" in r.getMessage()]
