"""One small Kafka client interface, three implementations.

The service talks to Kafka only through the abstract classes of this package:

* :class:`Producer` -- ``send`` records, ``flush`` (raises :class:`DeliveryError`
  if any delivery failed), ``close``.
* :class:`Consumer` -- group-managed :meth:`~Consumer.subscribe` *or* manual
  :meth:`~Consumer.assign`; ``seek``, ``poll``, explicit synchronous ``commit``
  (auto-commit is always off), ``committed``, ``assignment``, ``end_offsets``,
  ``partitions_for``, ``close``.
* :class:`Admin` -- ``create_topics``, ``list_topics``.
* :class:`Client` -- the factory for the three, from :func:`open_client`.

Implementations, chosen by ``kind``:

``"confluent"``
    confluent-kafka (librdkafka). The fast one; the default for the service.
``"kafka-python"``
    kafka-python, pure Python. Slower, no native dependency.
``"memory"``
    An in-process broker (:class:`MemoryBroker`) with topics, partitions,
    offsets, commits and consumer groups (range assignment, rebalance
    callbacks). For fast model and pipeline tests; Kafka behaviour itself is
    always also tested against a real broker (``tests/test_transport.py``).

Offsets follow Kafka's convention everywhere: a committed offset, a seek target
and an end offset are all *the next offset to read* (last processed + 1).

Configuration is one :class:`KafkaConfig`; ``config.py`` maps it to each
client's own keys (the table is in ``docs/KAFKA.md`` and in :class:`KafkaConfig`)
and is the only module that knows those keys.

One file per job:

==================  ================================================================
``values.py``       value types and errors (``TopicPartition``, ``Record``, ...)
``config.py``       ``KafkaConfig``, ``ConsumerSettings``, ``ProducerSettings``, each client's option names
``interfaces.py``   the abstract ``Producer``, ``Consumer``, ``Admin``, ``Client``
``base.py``         what every implementation shares: checks, failure collection
``tansu.py``        exact end offsets on Tansu (a fetch's high watermark)
``partitioner.py``  Kafka's murmur2 key partitioning
``confluent.py``    the confluent-kafka client
``kafka_python.py`` the kafka-python client
``memory.py``       the in-process broker and its client
``registry.py``     ``open_client``: kind -> client
==================  ================================================================

Examples
--------
>>> client = open_client("memory", KafkaConfig(bootstrap_servers="memory://doctest"))
>>> client.admin().create_topics([("events", 2, 1)])
>>> producer = client.producer()
>>> producer.send("events", b"hello", key=b"k1")
>>> producer.flush()
>>> consumer = client.consumer("readers", fetch_wait_ms=50)
>>> consumer.assign([TopicPartition("events", p) for p in consumer.partitions_for("events")])
>>> [r.value for r in consumer.poll(10, timeout=0.1)]
[b'hello']
"""
from __future__ import annotations

from .config import (
    CONFLUENT_CONSUMER_DEFAULTS,
    CONFLUENT_PRODUCER_DEFAULTS,
    KAFKA_PYTHON_CONSUMER_DEFAULTS,
    KAFKA_PYTHON_PRODUCER_DEFAULTS,
    ConsumerSettings,
    ProducerSettings,
    KafkaConfig,
    confluent_config,
    kafka_python_config,
    kafka_python_role_options,
)
from .interfaces import Admin, Client, Consumer, Producer, RebalanceCallback
from .memory import MemoryBroker, MemoryClient
from .partitioner import murmur2_partition
from .registry import ClientKind, broker_client_kinds, client_kinds, open_client, register_client
from .values import (
    DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_SESSION_TIMEOUT_MS,
    CommitFailedError,
    DeliveryError,
    DeliveryFailure,
    KafkaTransportError,
    NewTopic,
    Record,
    TopicPartition,
)

__all__ = [
    "CONFLUENT_CONSUMER_DEFAULTS",
    "CONFLUENT_PRODUCER_DEFAULTS",
    "DEFAULT_REQUEST_TIMEOUT",
    "DEFAULT_SESSION_TIMEOUT_MS",
    "KAFKA_PYTHON_CONSUMER_DEFAULTS",
    "KAFKA_PYTHON_PRODUCER_DEFAULTS",
    "Admin",
    "Client",
    "ClientKind",
    "CommitFailedError",
    "Consumer",
    "ConsumerSettings",
    "ProducerSettings",
    "DeliveryError",
    "DeliveryFailure",
    "KafkaConfig",
    "KafkaTransportError",
    "MemoryBroker",
    "MemoryClient",
    "NewTopic",
    "Producer",
    "Record",
    "RebalanceCallback",
    "TopicPartition",
    "broker_client_kinds",
    "client_kinds",
    "confluent_config",
    "kafka_python_config",
    "kafka_python_role_options",
    "murmur2_partition",
    "open_client",
    "register_client",
]
