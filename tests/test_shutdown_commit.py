"""At shutdown the service commits what a failed scoring commit left behind, and a failure there never stops it.

A scoring batch's outputs are acknowledged before its offsets are committed;
a commit that fails for a Kafka error is kept and merged into the next
(docs/PROTOCOL.md). When the process stops right after such a failure,
``Checkpoint.final_commit`` is the last chance: with it the group's offsets
cover every answered record, so a restart does not answer them again. When
that commit fails too (a Kafka error, or anything else from a broken client),
the shutdown still completes: consumers and producer closed, exit status 0,
the Kafka error counted (the records are then answered again after a
restart: at least once).
"""
from __future__ import annotations

import json
import uuid

import pytest

from sgm.consumers.service import Service
from sgm.stream.kafka import KafkaConfig, KafkaTransportError, TopicPartition, open_client
from tests.test_chaos import FlakyClient, FlakyConsumer, memory_config


class ScriptedPlan:
    """Fails the scoring group's commits as scripted: ``commits`` is a list of exceptions (None: succeed)."""

    enabled = True

    def __init__(self, commits: list) -> None:
        self.commits, self.attempts = list(commits), 0
        self.closed: list[str] = []

    def fail(self, operation: str) -> bool:
        return False  # nothing else fails


class CommitScriptedConsumer(FlakyConsumer):
    def commit(self, offsets) -> None:  # noqa: ANN001
        self.plan.attempts += 1
        error = self.plan.commits.pop(0) if self.plan.commits else None
        if error is not None:
            raise error
        self.inner.commit(offsets)

    def close(self) -> None:
        self.plan.closed.append("score_consumer")
        self.inner.close()


class CommitScriptedClient(FlakyClient):
    def consumer(self, group_id=None, **kwargs):  # noqa: ANN001
        inner = self.inner.consumer(group_id, **kwargs)
        return CommitScriptedConsumer(inner, self.plan) if group_id is not None else FlakyConsumer(inner, self.plan)


def stop_right_after_a_failed_commit(tmp_path, commits: list):
    """A service scores 5 records, its batch commit fails, and it is closed before any retry."""
    name = f"final-commit-{uuid.uuid4().hex[:8]}"
    cfg = memory_config(name, str(tmp_path), score_partitions=1, max_poll_records=100)
    plain = open_client("memory", KafkaConfig(bootstrap_servers=cfg.bootstrap_servers))
    producer = plain.producer()
    producer.send(cfg.train_topic, json.dumps({"id": "t", "text": "cheap pills", "labels": ["spam"]}).encode())
    for i in range(5):
        producer.send(cfg.score_topic, json.dumps({"id": f"s{i}", "text": "cheap"}).encode())
    producer.flush()
    plan = ScriptedPlan(commits)
    service = Service(cfg, client=CommitScriptedClient(plain, plan))
    service.start()
    try:
        for _ in range(200):
            service.step()
            if service.checkpoint.uncommitted:
                break
        assert service.checkpoint.uncommitted, "the batch's commit did not fail as scripted"
        assert plan.attempts == 1
    finally:
        service.close()
    group = plain.consumer(cfg.group)
    committed = group.committed([TopicPartition(cfg.score_topic, 0)])[TopicPartition(cfg.score_topic, 0)]
    group.close()
    errors = service.metrics.registry.get_sample_value("sgm_transport_errors_total", {"stage": "score_commit"})
    return service, plan, committed, errors


def test_a_commit_that_failed_is_made_at_shutdown(tmp_path):
    service, plan, committed, errors = stop_right_after_a_failed_commit(tmp_path, [KafkaTransportError("injected")])
    assert plan.attempts == 2 and committed == 5  # a restart does not answer s0..s4 again
    assert errors == 1 and service.exit_status == 0


@pytest.mark.parametrize("error", [KafkaTransportError("injected at shutdown"), RuntimeError("client broken")])
def test_a_final_commit_that_fails_does_not_stop_the_shutdown(tmp_path, error):
    service, plan, committed, errors = stop_right_after_a_failed_commit(
        tmp_path, [KafkaTransportError("injected"), error])
    assert plan.attempts == 2 and committed is None  # answered again after a restart: at least once
    assert service.exit_status == 0
    assert errors == (2 if isinstance(error, KafkaTransportError) else 1)
    assert plan.closed == ["score_consumer"] and not plan.enabled  # left the group; the producer closed (FlakyProducer)
