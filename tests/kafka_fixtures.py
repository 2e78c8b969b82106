"""Kafka fixtures: one broker per test session, chosen by what the machine has.

Broker selection for :func:`kafka_broker` (session-scoped):

1. ``KAFKA_BOOTSTRAP_SERVERS`` set: use that cluster as is.
2. else a Docker engine answers: testcontainers' ``KafkaContainer``.
3. else: :class:`stream.broker.EmbeddedBroker` (Tansu, in-memory, a child process).

``SGM_KAFKA_BROKER=embedded`` skips the Docker probe and forces step 3.
Tests share the session broker, so each uses its own topic and group names
(:func:`unique_name`). Tests that hurt the broker (SIGSTOP, kill) take
:func:`private_embedded_broker` instead.
"""
from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from sgm.stream.broker import EmbeddedBroker
from sgm.stream.kafka import KafkaConfig


@dataclass(frozen=True)
class KafkaBroker:
    """The broker a test session talks to."""

    bootstrap_servers: str
    #: "env" (KAFKA_BOOTSTRAP_SERVERS), "testcontainers" or "tansu"
    source: str
    #: The process handle when ``source == "tansu"``, else None.
    embedded: EmbeddedBroker | None = None

    def config(self, **overrides: object) -> KafkaConfig:
        return KafkaConfig(bootstrap_servers=self.bootstrap_servers, client_id="sgm-tests", **overrides)  # type: ignore[arg-type]


def docker_available(timeout: float = 2.0) -> bool:
    """True if a Docker engine answers a ping (never raises)."""
    if os.environ.get("SGM_KAFKA_BROKER") == "embedded":
        return False
    try:
        import docker

        client = docker.from_env(timeout=timeout)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:  # noqa: BLE001 - no socket, no permission, no package: all mean "no"
        return False


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[KafkaBroker]:
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if bootstrap:
        yield KafkaBroker(bootstrap, "env")
        return
    if docker_available():
        from testcontainers.kafka import KafkaContainer

        with KafkaContainer() as container:
            yield KafkaBroker(container.get_bootstrap_server(), "testcontainers")
        return
    with EmbeddedBroker() as broker:
        yield KafkaBroker(broker.bootstrap_servers, "tansu", broker)


@pytest.fixture()
def private_embedded_broker() -> Iterator[EmbeddedBroker]:
    """A fresh Tansu broker for this test alone (for fault injection)."""
    with EmbeddedBroker() as broker:
        yield broker


@pytest.fixture()
def unique_name(request: pytest.FixtureRequest) -> str:
    """A topic/group name unique to this test run: ``<test name>-<8 hex>``."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name)[:80].strip("-")
    return f"{base}-{uuid.uuid4().hex[:8]}"
