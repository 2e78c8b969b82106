"""Configuration: one client-neutral :class:`KafkaConfig`, and each client's option names.

This is the only module that knows the option names of the client libraries
(librdkafka's dotted keys, kafka-python's keyword arguments). The rest of the
package, and the service, say what they want in neutral terms --
:class:`KafkaConfig` for connection and security, :class:`ConsumerSettings` for
a consumer (group, where to start, session timeout, fetch wait) -- and
:class:`ConfluentOptions` / :class:`KafkaPythonOptions` turn that into the
dictionary the library's constructor takes. Precedence, lowest first: this
module's throughput defaults, the consumer settings, ``KafkaConfig.extra``,
per-call dialect ``overrides``.

Examples
--------
>>> config = KafkaConfig(bootstrap_servers="k1:9092,k2:9092", client_id="svc")
>>> confluent_config(config)["bootstrap.servers"], kafka_python_config(config)["bootstrap_servers"]
('k1:9092,k2:9092', ['k1:9092', 'k2:9092'])
>>> ConfluentOptions(config).consumer(ConsumerSettings("readers", fetch_wait_ms=50))["fetch.wait.max.ms"]
50
>>> KafkaPythonOptions(config).consumer(ConsumerSettings("readers"))["fetch_max_wait_ms"]
100
"""
from __future__ import annotations

import dataclasses
import logging
import os
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .values import DEFAULT_SESSION_TIMEOUT_MS, OffsetReset, SecurityProtocol

__all__ = [
    "CONFLUENT_CONSUMER_DEFAULTS",
    "CONFLUENT_PRODUCER_DEFAULTS",
    "KAFKA_PYTHON_CONSUMER_DEFAULTS",
    "KAFKA_PYTHON_PRODUCER_DEFAULTS",
    "ConfluentOptions",
    "ConsumerSettings",
    "KafkaConfig",
    "KafkaPythonOptions",
    "confluent_config",
    "kafka_python_config",
    "kafka_python_role_options",
]

log = logging.getLogger(__name__)

_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_NONE: Mapping[str, Any] = MappingProxyType({})


@dataclass
class KafkaConfig:
    """Connection and security settings shared by every client of a service.

    ============================  ================================  ==========================
    KafkaConfig                   confluent-kafka (librdkafka)      kafka-python
    ============================  ================================  ==========================
    ``bootstrap_servers``         ``bootstrap.servers``             ``bootstrap_servers``
    ``client_id``                 ``client.id``                     ``client_id``
    ``security_protocol``         ``security.protocol``             ``security_protocol``
    ``sasl_mechanism``            ``sasl.mechanism``                ``sasl_mechanism``
    ``sasl_username``             ``sasl.username``                 ``sasl_plain_username``
    ``sasl_password``             ``sasl.password``                 ``sasl_plain_password``
    ``ssl_cafile``                ``ssl.ca.location``               ``ssl_cafile``
    ``ssl_certfile``              ``ssl.certificate.location``      ``ssl_certfile``
    ``ssl_keyfile``               ``ssl.key.location``              ``ssl_keyfile``
    ``ssl_check_hostname``        ``ssl.endpoint.identification``   ``ssl_check_hostname``
                                  ``.algorithm`` = https / none
    ``extra``                     merged last, verbatim             merged last, keys not
                                                                    valid for the role dropped
    ============================  ================================  ==========================

    Settings left at ``None`` are not passed, so each client keeps its default.

    Parameters
    ----------
    bootstrap_servers : str
        ``host:port[,host:port...]``; for ``kind="memory"`` any name, e.g.
        ``"memory://tests"`` (clients with the same name share one broker).
    client_id : str
        Reported to the broker; shows up in its logs and quotas.
    security_protocol : {"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}
    sasl_mechanism : str, optional
        ``PLAIN``, ``SCRAM-SHA-256``, ``SCRAM-SHA-512`` (both clients), ...
        Required with the ``SASL_*`` protocols.
    sasl_username, sasl_password : str, optional
    ssl_cafile, ssl_certfile, ssl_keyfile : str, optional
        PEM files: CA bundle to verify the broker, client certificate and key
        for mutual TLS.
    ssl_check_hostname : bool
        Verify the broker's certificate matches its host name.
    extra : dict
        Client-specific settings in *that client's dialect* (dotted librdkafka
        keys for ``confluent``, snake_case for ``kafka-python``), applied last
        so they override this package's throughput defaults.
    probe_end_offsets : bool
        Make :meth:`Consumer.end_offsets` exact on brokers whose ListOffsets
        under-reports the log end (Tansu: it returns the last *batch's* base
        offset + 1) by reading the high watermark of a fetch of the last
        batch (``stream/kafka/tansu.py``). Costs one extra fetch; safe to turn
        off on Apache Kafka.

    Examples
    --------
    >>> KafkaConfig.from_env(environ={"KAFKA_BOOTSTRAP_SERVERS": "k:9092", "KAFKA_SSL_CHECK_HOSTNAME": "no"})
    KafkaConfig(bootstrap_servers='k:9092', client_id='sgm-stream', security_protocol='PLAINTEXT', sasl_mechanism=None, sasl_username=None, ssl_cafile=None, ssl_certfile=None, ssl_keyfile=None, ssl_check_hostname=False, extra={}, probe_end_offsets=True)
    """

    bootstrap_servers: str = "localhost:9092"
    client_id: str = "sgm-stream"
    security_protocol: SecurityProtocol = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_check_hostname: bool = True
    extra: dict[str, Any] = field(default_factory=dict)
    probe_end_offsets: bool = True

    def __post_init__(self) -> None:
        if self.security_protocol not in _SECURITY_PROTOCOLS:
            raise ValueError(f"security_protocol must be one of {_SECURITY_PROTOCOLS}, got {self.security_protocol!r}")
        if self.security_protocol.startswith("SASL") and not self.sasl_mechanism:
            raise ValueError(f"security_protocol={self.security_protocol} needs sasl_mechanism")

    @classmethod
    def from_env(cls, prefix: str = "KAFKA_", environ: Mapping[str, str] | None = None, **overrides: Any) -> "KafkaConfig":
        """Build a config from ``{prefix}BOOTSTRAP_SERVERS``, ``{prefix}SASL_PASSWORD``, ...

        Every field except ``extra`` has a variable named after it in upper case;
        booleans accept ``1/0/true/false/yes/no``. ``overrides`` win over the environment.
        """
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name == "extra":
                continue
            raw = env.get(prefix + f.name.upper())
            if raw is None:
                continue
            if f.type in ("bool", bool):
                values[f.name] = raw.strip().lower() in ("1", "true", "yes", "on")
            else:
                values[f.name] = raw
        values.update(overrides)
        return cls(**values)


@dataclass(frozen=True, slots=True)
class ProducerSettings:
    """What a producer is asked for, in neutral terms (:meth:`Client.producer`'s arguments).

    Parameters
    ----------
    idempotent : bool
        Each record lands once and in order even when the client retries.
    delivery_timeout_ms : int or None
        How long the client keeps retrying a record before it reports the
        delivery failed. ``None``: the library's default.
    max_request_bytes : int or None
        Largest record the producer may send (librdkafka: ``message.max.bytes``;
        kafka-python: ``max_request_size``). ``None``: the library's default, 1 MB.

    Examples
    --------
    >>> settings = ProducerSettings(idempotent=True, max_request_bytes=2 << 20)
    >>> mapped = ConfluentOptions(KafkaConfig()).producer(settings)
    >>> mapped["enable.idempotence"], mapped["message.max.bytes"]
    (True, 2097152)
    >>> KafkaPythonOptions(KafkaConfig()).producer(settings)["max_request_size"]
    2097152
    """

    idempotent: bool = False
    delivery_timeout_ms: int | None = None
    max_request_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class ConsumerSettings:
    """What a consumer is asked for, in neutral terms (:meth:`Client.consumer`'s arguments).

    Parameters
    ----------
    group_id : str or None
        ``None`` makes a group-less (manual-only) consumer that cannot commit.
    auto_offset_reset : {"earliest", "latest"}
        Where a partition without a committed offset starts.
    session_timeout_ms : int
        How long a dead member keeps its partitions; on Tansu a group join also
        takes about half of it.
    fetch_wait_ms : int or None
        Longest time the broker holds a fetch waiting for data: bounds the
        latency of a record arriving at an idle consumer. ``None``: 100 ms.
    max_response_bytes : int or None
        Largest fetch response the client accepts, so the largest record it
        can ever read (librdkafka: ``receive.message.max.bytes``, a hard limit
        it retries at for ever; kafka-python has none and reads any record).
        ``None``: librdkafka's 100 MB.

    Examples
    --------
    >>> settings = ConsumerSettings("readers", auto_offset_reset="latest", session_timeout_ms=10_000)
    >>> mapped = ConfluentOptions(KafkaConfig()).consumer(settings)
    >>> mapped["group.id"], mapped["auto.offset.reset"], mapped["session.timeout.ms"]
    ('readers', 'latest', 10000)
    """

    group_id: str | None = None
    auto_offset_reset: OffsetReset = "earliest"
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS
    fetch_wait_ms: int | None = None
    max_response_bytes: int | None = None

    @property
    def heartbeat_interval_ms(self) -> int:
        # A sixth of the session timeout: members notice a rebalance within ~1 s at
        # the 6 s default, which is what bounds rebalance latency on Tansu.
        return max(100, self.session_timeout_ms // 6)


#: KafkaConfig field -> its key in librdkafka and in kafka-python (the table in KafkaConfig's docstring).
CONNECTION_KEYS: dict[str, tuple[str, str]] = {
    "bootstrap_servers": ("bootstrap.servers", "bootstrap_servers"),
    "client_id": ("client.id", "client_id"),
    "security_protocol": ("security.protocol", "security_protocol"),
    "sasl_mechanism": ("sasl.mechanism", "sasl_mechanism"),
    "sasl_username": ("sasl.username", "sasl_plain_username"),
    "sasl_password": ("sasl.password", "sasl_plain_password"),
    "ssl_cafile": ("ssl.ca.location", "ssl_cafile"),
    "ssl_certfile": ("ssl.certificate.location", "ssl_certfile"),
    "ssl_keyfile": ("ssl.key.location", "ssl_keyfile"),
}


def _present(config: KafkaConfig, column: int) -> dict[str, Any]:
    """``{client key: value}`` (``CONNECTION_KEYS[field][column]``) for the config fields that are set."""
    return {keys[column]: getattr(config, attr) for attr, keys in CONNECTION_KEYS.items()
            if getattr(config, attr) is not None}


# ------------------------------------------------------------------ confluent-kafka (librdkafka)

#: librdkafka producer: batch up to 10k records / 1 MB, wait up to 5 ms to fill a
#: batch, Java-compatible key hashing (librdkafka's own default is CRC32-based).
CONFLUENT_PRODUCER_DEFAULTS: dict[str, Any] = {
    "acks": "all",
    "linger.ms": 5,
    "batch.num.messages": 10000,
    "batch.size": 1_000_000,
    "queue.buffering.max.messages": 200_000,
    "queue.buffering.max.kbytes": 512 * 1024,
    "partitioner": "murmur2_random",
}
#: librdkafka consumer: auto-commit off, offsets stored only by explicit commit,
#: range assignment (same as kafka-python and the memory broker), a short
#: fetch wait so an idle poll returns promptly.
CONFLUENT_CONSUMER_DEFAULTS: dict[str, Any] = {
    "isolation.level": "read_committed",  # never learn or score what a transactional producer aborted
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "partition.assignment.strategy": "range",
    "fetch.wait.max.ms": 100,
    "allow.auto.create.topics": False,
}


def confluent_config(config: KafkaConfig) -> dict[str, Any]:
    """Map ``config`` to librdkafka keys (connection and security only, plus ``extra``)."""
    out = _present(config, 0)
    if config.security_protocol in ("SSL", "SASL_SSL"):
        out["ssl.endpoint.identification.algorithm"] = "https" if config.ssl_check_hostname else "none"
    out.update(config.extra)
    return out


class ConfluentOptions:
    """librdkafka configuration dictionaries for each role of one :class:`KafkaConfig`.

    Parameters
    ----------
    config : KafkaConfig
    logger : logging.Logger, optional
        Where librdkafka's own log lines go.
    on_error : callable, optional
        librdkafka's ``error_cb`` (connection-level trouble).
    """

    def __init__(self, config: KafkaConfig, logger: logging.Logger | None = None,
                 on_error: Callable[[Any], None] | None = None) -> None:
        self.config = config
        self.logger, self.on_error = logger, on_error

    @property
    def base(self) -> dict[str, Any]:
        """Connection and security keys of the config as it is now, plus the log and error callbacks."""
        out = confluent_config(dataclasses.replace(self.config, extra={}))
        if self.logger is not None:
            out["logger"] = self.logger
        if self.on_error is not None:
            out["error_cb"] = self.on_error
        return out

    def producer(self, settings: ProducerSettings = ProducerSettings(),
                 overrides: Mapping[str, Any] = _NONE) -> dict[str, Any]:
        conf = {**self.base, **CONFLUENT_PRODUCER_DEFAULTS, **self.config.extra}
        if settings.idempotent:
            conf["enable.idempotence"] = True
        if settings.delivery_timeout_ms is not None:
            conf["message.timeout.ms"] = settings.delivery_timeout_ms
        if settings.max_request_bytes is not None:
            conf["message.max.bytes"] = settings.max_request_bytes
        return {**conf, **overrides}

    def consumer(self, settings: ConsumerSettings, overrides: Mapping[str, Any] = _NONE) -> dict[str, Any]:
        conf = {
            **self.base,
            **CONFLUENT_CONSUMER_DEFAULTS,
            "auto.offset.reset": settings.auto_offset_reset,
            "session.timeout.ms": settings.session_timeout_ms,
            "heartbeat.interval.ms": settings.heartbeat_interval_ms,
            **self.config.extra,
        }
        if settings.fetch_wait_ms is not None:
            conf["fetch.wait.max.ms"] = settings.fetch_wait_ms
        if settings.max_response_bytes is not None:
            # librdkafka wants receive.message.max.bytes >= fetch.max.bytes + 512 (its default fetch.max.bytes: 50 MiB)
            conf["receive.message.max.bytes"] = settings.max_response_bytes
            conf["fetch.max.bytes"] = min(int(conf.get("fetch.max.bytes", 52_428_800)), settings.max_response_bytes - 512)
        conf.update(overrides)
        # librdkafka insists on a group.id even for manual assignment; a
        # group-less consumer gets a private one and never commits to it.
        conf["group.id"] = settings.group_id or f"{conf.get('client.id', 'sgm')}.nogroup.{uuid.uuid4().hex}"
        return conf

    def admin(self) -> dict[str, Any]:
        return {**self.base, **self.config.extra}

    @staticmethod
    def end_probe(consumer: Mapping[str, Any]) -> dict[str, Any]:
        """The end-offset probe (``tansu.py``): a consumer's settings, a private group, prompt fetches."""
        return {
            **{k: v for k, v in consumer.items() if k != "group.id"},
            "group.id": f"sgm.endprobe.{uuid.uuid4().hex}",
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 10,
            "queued.min.messages": 1,
            # librdkafka otherwise waits up to 1 s before fetching a freshly
            # assigned partition, and this runs inside the service loop
            "fetch.queue.backoff.ms": 0,
            "fetch.error.backoff.ms": 10,
        }

    @staticmethod
    def delivery_timeout_s(producer: Mapping[str, Any]) -> float:
        """How long librdkafka keeps trying to deliver a record (``message.timeout.ms``), seconds."""
        return float(producer.get("message.timeout.ms", 300_000)) / 1000.0


# ----------------------------------------------------------------------------------- kafka-python

#: kafka-python producer: 256 KB batches (default 16 KB), 5 ms linger.
#: (kafka-python 3 has no buffer_memory setting any more.)
KAFKA_PYTHON_PRODUCER_DEFAULTS: dict[str, Any] = {
    "acks": "all",
    "linger_ms": 5,
    "batch_size": 256 * 1024,
}
KAFKA_PYTHON_CONSUMER_DEFAULTS: dict[str, Any] = {
    "isolation_level": "read_committed",  # its default is read_uncommitted
    "enable_auto_commit": False,
    "fetch_max_wait_ms": 100,
    "allow_auto_create_topics": False,
}


def kafka_python_config(config: KafkaConfig) -> dict[str, Any]:
    """Map ``config`` to kafka-python keyword arguments (connection and security, plus ``extra``)."""
    out = _present(config, 1)
    out["bootstrap_servers"] = config.bootstrap_servers.split(",")
    if config.security_protocol in ("SSL", "SASL_SSL"):
        out["ssl_check_hostname"] = config.ssl_check_hostname
    out.update(config.extra)
    return out


def kafka_python_role_options(role_defaults: Mapping[str, Any], options: Mapping[str, Any]) -> dict[str, Any]:
    """The ``options`` a kafka-python role (its class's ``DEFAULT_CONFIG``) knows.

    kafka-python rejects keys a role does not know; shared extras (e.g. a
    consumer-only key in ``KafkaConfig.extra``) are dropped for the other roles.
    """
    known = {k: v for k, v in options.items() if k in role_defaults}
    dropped = set(options) - set(known)
    if dropped:
        log.debug("kafka-python: ignoring settings not valid for this role: %s", sorted(dropped))
    return known


class KafkaPythonOptions:
    """kafka-python keyword arguments for each role of one :class:`KafkaConfig`.

    Each role takes the library class's ``DEFAULT_CONFIG`` (``known``) to drop
    ``KafkaConfig.extra`` keys the role would reject; empty means keep them all.
    """

    def __init__(self, config: KafkaConfig) -> None:
        self.config = config

    @property
    def base(self) -> dict[str, Any]:
        """Connection and security keywords of the config as it is now."""
        return kafka_python_config(dataclasses.replace(self.config, extra={}))

    def _extra(self, known: Mapping[str, Any]) -> dict[str, Any]:
        return kafka_python_role_options(known, self.config.extra) if known else dict(self.config.extra)

    def producer(self, settings: ProducerSettings = ProducerSettings(), known: Mapping[str, Any] = _NONE,
                 overrides: Mapping[str, Any] = _NONE) -> dict[str, Any]:
        conf = {**self.base, **KAFKA_PYTHON_PRODUCER_DEFAULTS, **self._extra(known)}
        if settings.idempotent:
            conf["enable_idempotence"] = True
        if settings.delivery_timeout_ms is not None:
            conf["delivery_timeout_ms"] = settings.delivery_timeout_ms
        if settings.max_request_bytes is not None:
            conf["max_request_size"] = settings.max_request_bytes
        return {**conf, **overrides}

    def consumer(self, settings: ConsumerSettings, known: Mapping[str, Any] = _NONE,
                 overrides: Mapping[str, Any] = _NONE, assignor: Any = None) -> dict[str, Any]:
        """``assignor``: the library's range assignor class (the same assignment as the other clients)."""
        conf = {
            **self.base,
            **KAFKA_PYTHON_CONSUMER_DEFAULTS,
            "group_id": settings.group_id,
            "auto_offset_reset": settings.auto_offset_reset,
            "session_timeout_ms": settings.session_timeout_ms,
            "heartbeat_interval_ms": settings.heartbeat_interval_ms,
        }
        if assignor is not None:
            conf["partition_assignment_strategy"] = (assignor,)
        conf.update(self._extra(known))
        if settings.fetch_wait_ms is not None:
            conf["fetch_max_wait_ms"] = settings.fetch_wait_ms
        conf.update(overrides)
        return conf

    def admin(self, known: Mapping[str, Any] = _NONE) -> dict[str, Any]:
        return {**self.base, **self._extra(known)}

    @staticmethod
    def end_probe(consumer: Mapping[str, Any]) -> dict[str, Any]:
        """The end-offset probe (``tansu.py``): a consumer's settings outside any group, prompt fetches."""
        kept = {k: v for k, v in consumer.items() if k not in ("group_id", "partition_assignment_strategy")}
        return {**kept, "group_id": None, "fetch_max_wait_ms": 10}
