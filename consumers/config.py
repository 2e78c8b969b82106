"""The service's configuration: one typed object, from CLI flags and environment variables.

Every setting is a field of :class:`ServiceConfig` with its default, its flag
(``--train-topic``) and its environment variable (``SGM_TRAIN_TOPIC``). A flag
beats the environment, which beats the default. ``docs/CONFIG.md`` is
generated from this file (``python -m sgm.consumers.config``), so the defaults are
documented in exactly one place.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Mapping

from sgm.stream.kafka import client_kinds

from .decision import SpamDecision
from .presets import PRESETS, preset

ROLES = ("all", "trainer", "classifier")
#: What the service does when the training topic was recreated or truncated (docs/RELIABILITY.md).
LOG_RESET_POLICIES = ("rebuild", "stop")
#: The registered Kafka client kinds (stream/kafka/registry.py): registering a client is enough.
CLIENTS = client_kinds()
PRESET_NAMES = tuple(sorted(PRESETS))


def _setting(default: Any, help: str, *, choices: tuple | None = None, secret: bool = False) -> Any:
    return field(default=default, metadata={"help": help, "choices": choices, "secret": secret})


@dataclass
class ServiceConfig:
    """Settings of one ``sgm serve`` process (see ``docs/CONFIG.md`` for the table)."""

    #: The settings a flag or an ``SGM_*`` variable set (:func:`from_args`): they win over the ``--config``
    #: file and the preset even when equal to the default (``--half-life none``, ``--model uc_pd_jm_dp``).
    explicit: ClassVar[frozenset[str]] = frozenset()

    # -- Kafka
    bootstrap_servers: str = _setting("localhost:9092", "Kafka bootstrap servers, HOST:PORT[,HOST:PORT]")
    client: str = _setting("confluent", "Kafka client library (confluent is 5-8x faster here; see README)", choices=CLIENTS)
    train_topic: str = _setting("sgm-train", "topic of labelled training records (learn/unlearn/forget)")
    score_topic: str = _setting("sgm-score", "topic of documents to score")
    output_topic: str = _setting("sgm-output", "topic the classifier writes labels and posteriors to")
    dlq_topic: str = _setting("sgm-dlq", "dead-letter topic for invalid records")
    group: str = _setting("sgm-classifier", "consumer group shared by classifier replicas on the scoring topic")
    create_topics: bool = _setting(True, "create missing topics at start")
    train_partitions: int = _setting(1, "partitions when creating the training topic (1 = a total order: replicas agree bit for bit)")
    score_partitions: int = _setting(4, "partitions when creating the scoring/output topics (the unit of classifier scale-out)")
    replication_factor: int = _setting(1, "replication factor when creating topics")
    security_protocol: str = _setting("PLAINTEXT", "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
                                      choices=("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"))
    sasl_mechanism: str | None = _setting(None, "SASL mechanism: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512")
    sasl_username: str | None = _setting(None, "SASL user name")
    sasl_password: str | None = _setting(None, "SASL password (prefer the environment variable)", secret=True)
    ssl_cafile: str | None = _setting(None, "CA bundle (PEM) to verify the brokers")
    ssl_certfile: str | None = _setting(None, "client certificate (PEM) for mutual TLS")
    ssl_keyfile: str | None = _setting(None, "client private key (PEM) for mutual TLS")
    ssl_check_hostname: bool = _setting(True, "verify that broker certificates match their host names")
    # -- process
    role: str = _setting("all", "what this process runs: trainer and classifier together, or one of them", choices=ROLES)
    state_dir: str = _setting("state", "directory for this process's model snapshots (one per process: a second one on it stops at start)")
    snapshot_every_records: int = _setting(20000, "write a snapshot after this many training records")
    snapshot_every_seconds: float = _setting(30.0, "... or after this many seconds with new training records")
    snapshot_keep: int = _setting(3, "snapshots kept on disk (older ones are deleted)")
    max_snapshot_bytes: int = _setting(4 * 1024**3, "refuse to load a snapshot larger than this")
    max_poll_records: int = _setting(1000, "records read per poll and scored per batch")
    poll_timeout: float = _setting(0.1, "seconds a poll waits for records")
    fetch_wait_ms: int = _setting(10, "longest time the broker holds a fetch for data (lower: less latency, more requests)")
    dead_letter_training: bool | None = _setting(None, "write invalid training records to the DLQ (default: trainer roles only)")
    metrics_address: str = _setting("127.0.0.1:9464", "HOST:PORT of the Prometheus metrics endpoint ('' disables it)")
    log_format: str = _setting("json", "log line format", choices=("json", "logfmt"))
    log_level: str = _setting("INFO", "log level", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    # -- safety (docs/RELIABILITY.md, "Field faults")
    connect_timeout: float | None = _setting(None, "seconds to keep retrying Kafka at start before exiting with status 2 "
                                             "(none: retry until it works)")
    wait_for_training: bool = _setting(True, "score only once the training topic is applied up to its end offsets as "
                                       "of the start (/ready answers 200 from then on)")
    max_event_skew: float | None = _setting(86400.0, "dead-letter learn records whose event time lies more than this "
                                            "many seconds ahead of this process's clock (none: no check)")
    on_training_log_reset: str = _setting("rebuild", "when the training topic was recreated or truncated: rebuild the "
                                          "model from the new log, or stop training (alert either way)",
                                          choices=LOG_RESET_POLICIES)
    poison_timeout: float = _setting(60.0, "seconds a partition may hold records behind its position without "
                                     "delivering one before that record is probed; one the client cannot fetch is "
                                     "dead-lettered and skipped")
    max_fetch_bytes: int = _setting(128 * 1024**2, "largest record the Kafka client fetches (librdkafka "
                                    "receive.message.max.bytes): larger ones stall their partition until skipped; "
                                    "records over 1 MiB are read and dead-lettered as too_large")
    # -- model
    preset: str | None = _setting(None, "a tuned default: 'spam' = whole emails (raw_b64) with the mail model, features, "
                                  "spam threshold and learn guards chosen on the SpamAssassin dev stream "
                                  "(docs/EVALUATION.md); --config, --model, --param and the spam flags override it",
                                  choices=PRESET_NAMES)
    model: str = _setting("uc_pd_jm_dp", "model spec (affix string, MODEL.md); 'tdm_...' selects TDM")
    param: dict = _setting(None, "model parameter NAME=VALUE, repeatable (beta, mu, delta, ups, phi, ups_idf, theta, ...)")
    config: str | None = _setting(None, "JSON model configuration file (as written by sgm tune, or by sgm ensemble: "
                                        "bases and a fixed pool); --param overrides a single model's")
    half_life: float | None = _setting(None, "decay half-life in seconds of event time (none: no decay); a record "
                                             "without ts takes its Kafka timestamp (docs/YOUR_DATA.md, 'Time and "
                                             "decay')")
    multilabel: str = _setting("per_label", "how several labels are counted: per_label = under each label, posteriors "
                                            "over single labels; powerset = each label set one class (the snapshot "
                                            "keeps it; docs/YOUR_DATA.md)", choices=("per_label", "powerset"))
    top_k: int = _setting(3, "labels with posteriors in each output record")
    label_threshold: float | None = _setting(None, "output every label with probability >= this: its posterior "
                                                   "(per-label mode) or its marginal (powerset mode; over the "
                                                   "configuration's label_threshold)")
    posterior_tolerance: float | None = _setting(None, "relative error the emitted posteriors may have, in (0, 1), "
                                                 "for a faster top-k with many labels; the labels stay exact "
                                                 "(none: exact to e^-40; docs/PERFORMANCE.md)")
    prune_below: float | None = _setting(None, "memory bound: unlearn documents whose decayed weight falls below this")
    max_documents: int | None = _setting(None, "memory bound: keep at most this many documents (oldest go first)")
    max_model_bytes: int | None = _setting(None, "memory bound: prune the least weighted documents while the model "
                                           "holds more than this many bytes")
    # -- spam decision (outputs carry a "decision" object when one is set; docs/SCHEMAS.md)
    spam_label: str = _setting("spam", "the spam label of the decision (the positive class of a two-label task)")
    spam_threshold: float | None = _setting(None, "spam verdict when the spam posterior is >= this (default: the "
                                            "preset's; none and no guard: no decision, labels are the top label)")
    spam_prior_weight: float | None = _setting(None, "weight of the class prior in the posterior the spam threshold "
                                               "applies to (default: the preset's; else the model's theta: its own "
                                               "posterior; 1: the plain Bayes posterior)")
    min_spam: int | None = _setting(None, "learn guard: no spam verdict before the model holds this many spams "
                                    "(SpamAssassin's bayes_min_spam_num; default: the preset's, else 0)")
    min_ham: int | None = _setting(None, "learn guard: no spam verdict before the model holds this many hams "
                                   "(bayes_min_ham_num; default: the preset's, else 0)")

    def __post_init__(self) -> None:
        if self.param is None:
            self.param = {}
        if self.role not in ROLES:
            raise ValueError(f"--role must be one of {ROLES}, got {self.role!r}")
        if self.client not in CLIENTS:
            raise ValueError(f"--client must be one of {CLIENTS}, got {self.client!r}")
        if self.train_partitions < 1 or self.score_partitions < 1:
            raise ValueError("--train-partitions and --score-partitions must be at least 1, got "
                             f"{self.train_partitions!r} and {self.score_partitions!r}")
        if self.top_k < 1:
            raise ValueError(f"--top-k must be at least 1, got {self.top_k!r}")
        if self.label_threshold is not None and not 0 < self.label_threshold <= 1:  # a typo would output all/none
            raise ValueError(f"--label-threshold must lie in (0, 1] (or be none), got {self.label_threshold!r}")
        if self.posterior_tolerance is not None and not 0 < self.posterior_tolerance < 1:
            raise ValueError(f"--posterior-tolerance must lie in (0, 1) (or be none), got {self.posterior_tolerance!r}")
        if self.on_training_log_reset not in LOG_RESET_POLICIES:
            raise ValueError(f"--on-training-log-reset must be one of {LOG_RESET_POLICIES}, got {self.on_training_log_reset!r}")
        if self.half_life is not None and not 0 < self.half_life < float("inf"):  # the model's check names no flag
            raise ValueError(f"--half-life must be positive and finite (or none), got {self.half_life!r}")
        for name in ("connect_timeout", "max_event_skew", "max_model_bytes", "max_documents", "prune_below"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"{flag(name)} must be positive (or none), got {value!r}")
        if self.max_fetch_bytes < 2 * 1024**2:
            raise ValueError(f"--max-fetch-bytes must be at least 2 MiB (2097152), got {self.max_fetch_bytes!r}")
        if not self.poison_timeout > 0:
            raise ValueError(f"--poison-timeout must be positive, got {self.poison_timeout!r}")
        for name in ("snapshot_every_records", "snapshot_every_seconds", "snapshot_keep", "max_snapshot_bytes",
                     "max_poll_records"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{flag(name)} must be positive, got {getattr(self, name)!r}")
        if self.preset is not None and self.preset not in PRESET_NAMES:
            raise ValueError(f"--preset must be one of {PRESET_NAMES}, got {self.preset!r}")
        check_topics({name: getattr(self, name) for name in TOPIC_SETTINGS})
        if self.client != "memory":  # the memory client's address is a name (memory://NAME)
            check_bootstrap_servers(self.bootstrap_servers)
        self.decision()  # the spam settings are checked now

    # ---------------------------------------------------------------- derived
    @property
    def trains(self) -> bool:
        return self.role in ("all", "trainer")

    @property
    def classifies(self) -> bool:
        return self.role in ("all", "classifier")

    @property
    def writes_training_dlq(self) -> bool:
        return self.trains if self.dead_letter_training is None else self.dead_letter_training

    def model_config(self) -> dict[str, Any]:
        """The model configuration dict (the preset's, the ``--config`` file over it, then flags on top)."""
        base: dict[str, Any] = preset(self.preset).model_config() if self.preset else {}
        if self.config:
            base.update(read_configuration(f"--config {self.config}", self.config))
        # every key of the file: build_model keeps the options it knows (kernel_sum, node_pruning, an ensemble's
        # bases ...) and refuses a misspelt one, instead of this method dropping what it does not list
        out = {**base, "model": base.get("model", self.model), "params": dict(base.get("params") or {})}
        if base and self._given("model"):
            out["model"] = self.model  # an explicit --model wins over the file and the preset
        out["params"].update(self.param)
        for key, attr in (("half_life", "half_life"), ("multilabel", "multilabel"), ("prune_below", "prune_below"),
                          ("max_documents", "max_documents"), ("max_bytes", "max_model_bytes")):
            if self._given(attr):  # a flag or variable wins over the file and the preset, also to say "none"
                if getattr(self, attr) is None:
                    out.pop(key, None)
                else:
                    out[key] = getattr(self, attr)
            elif base.get(key) is not None:
                out[key] = base[key]
        if out.get("multilabel") is None:
            out["multilabel"] = self.multilabel
        return out

    def _given(self, name: str) -> bool:
        """Whether setting ``name`` was set: a flag or variable (:func:`from_args`), or a value other than its default."""
        return name in self.explicit or getattr(self, name) != _default(name)

    def decision(self) -> SpamDecision | None:
        """The spam decision outputs carry: the preset's, the flags on top; ``None`` when neither sets one."""
        base = preset(self.preset).decision if self.preset else None
        given = {"threshold": self.spam_threshold, "min_spam": self.min_spam, "min_ham": self.min_ham,
                 "prior_weight": self.spam_prior_weight}
        if base is None and all(value is None for value in given.values()):
            return None
        settings = {**(base or SpamDecision()).to_dict(), "label": self.spam_label}
        settings.update({k: v for k, v in given.items() if v is not None})
        return SpamDecision.from_dict(settings)

    def kafka(self):
        from sgm.stream.kafka import KafkaConfig

        return KafkaConfig(
            bootstrap_servers=self.bootstrap_servers,
            client_id=f"sgm-{self.role}",
            security_protocol=self.security_protocol,
            sasl_mechanism=self.sasl_mechanism,
            sasl_username=self.sasl_username,
            sasl_password=self.sasl_password,
            ssl_cafile=self.ssl_cafile,
            ssl_certfile=self.ssl_certfile,
            ssl_keyfile=self.ssl_keyfile,
            ssl_check_hostname=self.ssl_check_hostname,
        )

    def redacted(self) -> dict[str, Any]:
        """The settings as a dict with secrets masked (for logs)."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = "***" if f.metadata.get("secret") and value else value
        return out


def read_configuration(name: str, path: str | os.PathLike) -> dict[str, Any]:
    """A model configuration file (``sgm tune``/``sgm ensemble --out``): a JSON object whose ``params``, if any,
    is one too. Anything else is a one-line ``ValueError`` starting with ``name`` (how the user gave the file);
    a missing or unreadable file is the ``OSError`` the commands report."""
    try:
        loaded = json.loads(Path(path).read_text(encoding="utf-8"))
    except ValueError as exc:  # bad JSON or not UTF-8: the parser's message alone does not name the file
        raise ValueError(f"{name}: not a JSON configuration ({exc})") from None
    if not isinstance(loaded, dict):
        raise ValueError(f"{name}: a model configuration is a JSON object, got {type(loaded).__name__}")
    if not isinstance(loaded.get("params") or {}, dict):  # (dict() of a list raised a TypeError)
        raise ValueError(f"{name}: params must be an object of names and values, got "
                         f"{type(loaded['params']).__name__}")
    return loaded


def _default(name: str) -> Any:
    f = {f.name: f for f in dataclasses.fields(ServiceConfig)}[name]
    return f.default


#: The four topics, in the order the messages name them.
TOPIC_SETTINGS = ("train_topic", "score_topic", "output_topic", "dlq_topic")
_LEGAL_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")


def check_topics(topics: dict[str, str]) -> None:
    """Refuse topic names Kafka refuses, and one topic given for two jobs (``ValueError`` naming the flags).

    Apache Kafka refuses other names at creation (Tansu takes them); the same topic for two jobs loops:
    dead letters or outputs written to the training topic are read back as training records, and so on.

    >>> check_topics({"train_topic": "sgm-train", "dlq_topic": "sgm-train"})
    Traceback (most recent call last):
    ...
    ValueError: --train-topic and --dlq-topic are both 'sgm-train': each job needs its own topic
    >>> check_topics({"train_topic": "sgm train"})
    Traceback (most recent call last):
    ...
    ValueError: --train-topic 'sgm train' is not a Kafka topic name (1-249 of the characters A-Z a-z 0-9 . _ -, not '.' or '..')
    """
    seen: dict[str, str] = {}
    for name, topic in topics.items():
        if not isinstance(topic, str) or not _LEGAL_TOPIC.fullmatch(topic) or topic in (".", ".."):
            raise ValueError(f"{flag(name)} {topic!r} is not a Kafka topic name "
                             "(1-249 of the characters A-Z a-z 0-9 . _ -, not '.' or '..')")
        if topic in seen:
            raise ValueError(f"{flag(seen[topic])} and {flag(name)} are both {topic!r}: each job needs its own topic")
        seen[topic] = name


_BROKER_ADDRESS = re.compile(r"(?:(?:plaintext|ssl|sasl_plaintext|sasl_ssl)://)?(?:\[[0-9A-Fa-f:.]+\]|[^\s:/\[\]]+)"
                             r"(?::(\d{1,5}))?", re.IGNORECASE)


def check_bootstrap_servers(servers: str) -> None:
    """Refuse a broker list no client can ever connect to (``ValueError``), instead of retrying it for ever.

    >>> check_bootstrap_servers("kafka-1:9092,kafka-2:9092"); check_bootstrap_servers("SSL://[::1]:9093")
    >>> check_bootstrap_servers("http://localhost:9092")
    Traceback (most recent call last):
    ...
    ValueError: --bootstrap-servers 'http://localhost:9092': 'http://localhost:9092' is not HOST:PORT
    """
    entries = [entry.strip() for entry in str(servers).split(",") if entry.strip()]
    if not entries:
        raise ValueError(f"--bootstrap-servers {servers!r} names no broker (HOST:PORT[,HOST:PORT])")
    for entry in entries:
        match = _BROKER_ADDRESS.fullmatch(entry)
        if match is None or (match.group(1) is not None and not 0 < int(match.group(1)) < 65536):
            raise ValueError(f"--bootstrap-servers {servers!r}: {entry!r} is not HOST:PORT")


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def env_var(name: str) -> str:
    return "SGM_" + name.upper()


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"not a boolean: {text!r}")


def _optional(kind):
    def parse(text: str):
        if text.strip().lower() in ("", "none", "null"):
            return None
        return kind(text)

    return parse


def _field_type(f: dataclasses.Field):
    annotation = str(f.type)
    if "bool" in annotation:
        return _optional(_bool) if "None" in annotation else _bool
    if "float" in annotation:
        return _optional(float) if "None" in annotation else float
    if "int" in annotation:
        return _optional(int) if "None" in annotation else int
    return _optional(str) if "None" in annotation else str


def parse_param(text: str) -> tuple[str, Any]:
    """``NAME=VALUE`` -> (name, number or string)."""
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"--param expects NAME=VALUE, got {text!r}")
    name, value = text.split("=", 1)
    try:
        return name.strip(), float(value)
    except ValueError:
        return name.strip(), value.strip()


def add_arguments(parser: argparse.ArgumentParser, *, exclude: tuple[str, ...] = ()) -> None:
    """One flag per field; an absent flag leaves no attribute (so an explicit "none" still wins over the env)."""
    for f in dataclasses.fields(ServiceConfig):
        if f.name in exclude:
            continue
        help_text = f"{f.metadata['help']} [env {env_var(f.name)}; default {f.default!r}]"
        if f.name == "param":
            parser.add_argument("--param", action="append", type=parse_param, default=argparse.SUPPRESS,
                                metavar="NAME=VALUE", help=help_text)
            continue
        parser.add_argument(flag(f.name), dest=f.name, default=argparse.SUPPRESS, type=_field_type(f),
                            choices=f.metadata.get("choices"), help=help_text)


def from_args(args: argparse.Namespace, environ: Mapping[str, str] | None = None, **overrides: Any) -> ServiceConfig:
    """Flags, then ``SGM_*`` environment variables, then defaults."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    given_flags = vars(args)
    for f in dataclasses.fields(ServiceConfig):
        if f.name == "param":
            params = {}
            env = environ.get(env_var("param"))
            if env:  # SGM_PARAM="beta=0.3,mu=10"
                try:
                    params.update(parse_param(p) for p in env.split(",") if p.strip())
                except argparse.ArgumentTypeError as exc:  # (argparse turns it into a usage error only for flags)
                    raise ValueError(f"{env_var('param')}={env!r}: {exc}") from None
            params.update(given_flags.get("param") or [])
            values["param"] = params
            continue
        if f.name in given_flags:
            values[f.name] = given_flags[f.name]
        elif env_var(f.name) in environ:
            text = environ[env_var(f.name)]
            try:
                values[f.name] = _field_type(f)(text)
            except ValueError as exc:  # name the variable: the value alone does not say where it came from
                raise ValueError(f"{env_var(f.name)}={text!r}: {exc}") from None
            choices = f.metadata.get("choices")
            if choices and values[f.name] is not None and values[f.name] not in choices:  # as argparse does for flags
                raise ValueError(f"{env_var(f.name)}={text!r}: choose from {', '.join(map(str, choices))}")
    values.update(overrides)
    config = ServiceConfig(**values)
    config.explicit = frozenset(values) - {"param"}
    return config


#: ``SGM_*`` variables that are not settings of the service: the dataset folder of ``sgm eval`` and the tests'.
OTHER_VARIABLES = {"SGM_DATA_DIR", "SGM_LONG_TESTS", "SGM_E2E_FULL", "SGM_KAFKA_BROKER"}


def unknown_variables(environ: Mapping[str, str] | None = None) -> list[str]:
    """``SGM_*`` variables that no setting reads (a typo such as ``SGM_MODLE``), each with the nearest name.

    >>> unknown_variables({"SGM_MODLE": "u_jm", "SGM_MODEL": "u_jm", "HOME": "/"})
    ['SGM_MODLE (did you mean SGM_MODEL?)']
    """
    import difflib

    environ = os.environ if environ is None else environ
    known = {env_var(f.name) for f in dataclasses.fields(ServiceConfig)}
    out = []
    for name in sorted(environ):
        if name.startswith("SGM_") and name not in known and name not in OTHER_VARIABLES:
            near = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.8)
            out.append(f"{name} (did you mean {near[0]}?)" if near else name)
    return out


def markdown_table() -> str:
    rows = ["| flag | environment | default | meaning |", "|---|---|---|---|"]
    for f in dataclasses.fields(ServiceConfig):
        default = "{}" if f.name == "param" else repr(f.default)
        rows.append(f"| `{flag(f.name)}` | `{env_var(f.name)}` | `{default}` | {f.metadata['help']} |")
    return "\n".join(rows)


if __name__ == "__main__":
    sys.stdout.write("# sgm serve configuration\n\nGenerated from `consumers/config.py` by `python -m sgm.consumers.config`."
                     " Flags beat environment variables, which beat defaults. An `SGM_*` variable that no setting"
                     " reads (a typo) is ignored with a warning in `sgm serve`'s log at start.\n\n" + markdown_table() + "\n")
