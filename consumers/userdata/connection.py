"""How ``sgm learn``, ``sgm forget`` and ``sgm score`` reach the service's topics (and which of its settings
``sgm score`` and ``sgm stats`` read: the spam decision).

They take the service's own Kafka settings (the same flags and ``SGM_*``
variables as ``sgm serve``, :mod:`sgm.consumers.config`), so pointing them at
a deployment needs nothing new. :func:`connect` opens the client and makes
sure the topics exist, creating them as ``sgm serve`` would (one training
partition) unless ``--create-topics false``; a broker that does not answer
within ``timeout`` seconds is a :class:`Unreachable` with a one-line message
that says what to do.
"""
from __future__ import annotations

import argparse
import dataclasses
import time

from sgm.stream.kafka import Client, KafkaTransportError, open_client

from .. import config as service_config

__all__ = ["COMMAND_CONNECT_TIMEOUT", "DECISION_SETTINGS", "KAFKA_SETTINGS", "Unreachable", "add_decision_arguments", "add_kafka_arguments",
           "connect"]

#: The service settings these commands read: where the topics are and how to connect.
KAFKA_SETTINGS = {
    "bootstrap_servers", "client", "train_topic", "score_topic", "output_topic", "dlq_topic", "create_topics",
    "train_partitions", "score_partitions", "replication_factor", "security_protocol", "sasl_mechanism",
    "sasl_username", "sasl_password", "ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_check_hostname",
    "fetch_wait_ms",
}  # fmt: skip

#: How long these one-shot commands wait for a broker when neither ``--connect-timeout`` nor
#: ``SGM_CONNECT_TIMEOUT`` says (``sgm serve`` retries until it works by default; a command should not).
COMMAND_CONNECT_TIMEOUT = 15.0


#: The service settings of a spam decision (consumers/decision.py): ``sgm score --state-dir`` applies it as the
#: service does, ``sgm stats`` shows the state of its learn guards.
DECISION_SETTINGS = {"preset", "spam_label", "spam_threshold", "spam_prior_weight", "min_spam", "min_ham"}


class Unreachable(RuntimeError):
    """No broker answered, or the topics could not be made ready."""


def add_kafka_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("Kafka (the same settings as sgm serve; SGM_* variables work too)")
    exclude = tuple(f.name for f in dataclasses.fields(service_config.ServiceConfig) if f.name not in KAFKA_SETTINGS)
    service_config.add_arguments(group, exclude=exclude)
    # the service's setting (so SGM_CONNECT_TIMEOUT works), with this command's own default in its help
    group.add_argument("--connect-timeout", dest="connect_timeout", type=float, default=argparse.SUPPRESS,
                       metavar="SECONDS", help="give up when the broker does not answer within this time "
                       f"[env {service_config.env_var('connect_timeout')}; default {COMMAND_CONNECT_TIMEOUT:g}]")


def add_decision_arguments(parser: argparse.ArgumentParser, title: str) -> None:
    """The spam decision flags of ``sgm serve`` (``--preset``, ``--spam-threshold``, ``--spam-prior-weight``...)."""
    group = parser.add_argument_group(title)
    exclude = tuple(f.name for f in dataclasses.fields(service_config.ServiceConfig) if f.name not in DECISION_SETTINGS)
    service_config.add_arguments(group, exclude=exclude)


def connect(config: service_config.ServiceConfig) -> Client:
    """A client of ``config``'s cluster whose four topics exist (created when ``config.create_topics``), within
    ``config.connect_timeout`` seconds (:data:`COMMAND_CONNECT_TIMEOUT` when it is not set)."""
    timeout = COMMAND_CONNECT_TIMEOUT if config.connect_timeout is None else config.connect_timeout
    client = open_client(config.client, config.kafka())
    deadline = time.monotonic() + timeout
    while True:
        try:
            with client.admin(timeout=max(deadline - time.monotonic(), 1.0)) as admin:
                if config.create_topics:
                    admin.create_topics([
                        (config.train_topic, config.train_partitions, config.replication_factor),
                        (config.score_topic, config.score_partitions, config.replication_factor),
                        (config.output_topic, config.score_partitions, config.replication_factor),
                        (config.dlq_topic, 1, config.replication_factor),
                    ], timeout=max(deadline - time.monotonic(), 1.0))
                    return client
                missing = {config.train_topic, config.score_topic, config.output_topic} - set(
                    admin.list_topics(timeout=max(deadline - time.monotonic(), 1.0)))
            if not missing:
                return client
            error = f"topics {sorted(missing)} do not exist (start sgm serve, or pass --create-topics true)"
        except KafkaTransportError as exc:
            error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if time.monotonic() >= deadline:
            raise Unreachable(f"no Kafka broker answered at {config.bootstrap_servers} within {timeout:g} s "
                              f"({error}); start one with `sgm broker` or pass --bootstrap-servers HOST:PORT"
                              if "do not exist" not in error else error)
        time.sleep(0.5)
