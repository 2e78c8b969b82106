"""``sgm feed``: produce the generated stream to the training and scoring topics (a load generator).

Sends the project's synthetic stream (stream/synthetic.py: news and spam
documents with drift, new labels, corrections, forgets and a few malformed
records) to Kafka at a steady rate, test-then-train: each document goes to
the scoring topic first and its labels to the training topic about 50
documents later, so a classifier's prequential accuracy
(``sgm_prequential_accuracy``) is meaningful. Used by ``deploy/`` as the
compose file's load generator.

Ids are ``<id-prefix>-<7 digits>``; the default prefix includes the start
time, so a restarted feeder never reuses the ids of an earlier run (a learn of
an id already in the model would be ambiguous). Event times start now and
advance with the send rate. Stops after ``--docs`` documents, or on SIGTERM /
SIGINT after flushing what it sent.
"""
from __future__ import annotations

import argparse
import dataclasses
import logging
import signal
import sys
import threading
import time

from .. import config as service_config
from ..logs import setup_logging

log = logging.getLogger("sgm.feed")

#: Service settings that concern the feeder: where to send, how to connect, how to log.
KAFKA_SETTINGS = {
    "bootstrap_servers", "client", "train_topic", "score_topic", "output_topic", "dlq_topic", "create_topics",
    "train_partitions", "score_partitions", "replication_factor", "security_protocol", "sasl_mechanism",
    "sasl_username", "sasl_password", "ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_check_hostname",
    "log_format", "log_level", "connect_timeout",
}  # fmt: skip
#: Seconds between flushes (and progress checks) while sending.
FLUSH_INTERVAL = 0.25
#: Seconds between progress log lines.
PROGRESS_INTERVAL = 10.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    exclude = tuple(f.name for f in dataclasses.fields(service_config.ServiceConfig) if f.name not in KAFKA_SETTINGS)
    service_config.add_arguments(parser, exclude=exclude)
    parser.add_argument("--docs", type=int, default=0, help="documents to generate (default 0: endless)")
    parser.add_argument("--rate", type=float, default=100.0,
                        help="records per second (a document makes about two: its scoring record and, later, its "
                             "label; 0 = as fast as possible; default 100)")
    parser.add_argument("--seed", type=int, default=7, help="stream seed (default 7)")
    parser.add_argument("--profiles", default="news,spam", help="comma-separated stream profiles: news, spam")
    parser.add_argument("--malformed-rate", type=float, default=0.005,
                        help="probability of a malformed record after each valid one (default 0.005)")
    parser.add_argument("--id-prefix", default=None, help="document id prefix (default: feed-<seed>-<start time>)")


def run(args: argparse.Namespace) -> int:
    """Exit status 0, or 2 with one line on stderr when the configuration is wrong or Kafka stays
    unreachable past ``--connect-timeout``."""
    from sgm.stream.synthetic import SyntheticConfig, SyntheticStream
    from sgm.stream.kafka import DeliveryError, KafkaTransportError, open_client

    try:
        cfg = service_config.from_args(args)
    except (ValueError, OSError) as exc:
        print(f"sgm feed: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    setup_logging(cfg.log_format, cfg.log_level)
    stop = threading.Event()

    def on_signal(signum, _frame) -> None:
        log.info("stopping", extra={"signal": signal.Signals(signum).name})
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    started = time.time()
    prefix = args.id_prefix or f"feed-{args.seed}-{int(started)}"
    docs_per_second = args.rate / 2 if args.rate > 0 else 50.0
    stream = SyntheticStream(SyntheticConfig(
        seed=args.seed, n_docs=args.docs or None, profiles=tuple(p.strip() for p in args.profiles.split(",") if p.strip()),
        malformed_rate=args.malformed_rate, start_ts=started, docs_per_second=docs_per_second, id_prefix=prefix,
    ))
    client = open_client(cfg.client, cfg.kafka())
    try:
        _create_topics(client, cfg, stop, KafkaTransportError)
    except KafkaTransportError as exc:
        log.error("cannot start", extra={"error": str(exc)})
        print(f"sgm feed: could not reach Kafka at {cfg.bootstrap_servers} within --connect-timeout "
              f"{cfg.connect_timeout:g} s: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    if stop.is_set():
        return 0
    producer = client.producer()
    sent = {"train": 0, "score": 0}
    malformed = 0
    clock = time.monotonic()
    last_flush = last_progress = clock
    log.info("feeding", extra={"bootstrap_servers": cfg.bootstrap_servers, "train_topic": cfg.train_topic,
                               "score_topic": cfg.score_topic, "rate": args.rate, "docs": args.docs, "id_prefix": prefix})
    try:
        for n, event in enumerate(stream.events()):
            if stop.is_set():
                break
            if args.rate > 0:
                # Pace against the start, not the previous record: a slow flush does not lower the rate.
                delay = clock + n / args.rate - time.monotonic()
                if delay > 0:
                    stop.wait(delay)
            producer.send(cfg.train_topic if event.kind == "train" else cfg.score_topic, event.value, key=event.key)
            sent[event.kind] += 1
            malformed += not event.valid
            now = time.monotonic()
            if now - last_flush >= FLUSH_INTERVAL:
                _flush(producer, DeliveryError)
                last_flush = now
            if now - last_progress >= PROGRESS_INTERVAL:
                last_progress = now
                log.info("progress", extra={"sent": dict(sent), "malformed": malformed,
                                            "records_per_second": round((n + 1) / (now - clock), 1)})
    finally:
        try:
            producer.close()
        except DeliveryError as exc:
            log.error("records not delivered at the end", extra={"error": str(exc)})
    log.info("done", extra={"sent": sent, "malformed": malformed, "seconds": round(time.monotonic() - clock, 1)})
    return 0


def _create_topics(client, cfg, stop: threading.Event, transport_error: type[Exception]) -> None:
    """Reach Kafka and create the service's topics (as ``sgm serve`` would), retrying with a backoff
    (one log line per attempt) until it works, ``stop`` is set, or ``--connect-timeout`` passes (raises)."""
    started, backoff = time.monotonic(), 0.1
    while not stop.is_set():
        try:
            with client.admin(timeout=2.0) as admin:  # an unreachable broker fails fast (kafka-python: its bootstrap)
                admin.list_topics(timeout=2.0)
                if cfg.create_topics:
                    admin.create_topics([
                        (cfg.train_topic, cfg.train_partitions, cfg.replication_factor),
                        (cfg.score_topic, cfg.score_partitions, cfg.replication_factor),
                        (cfg.output_topic, cfg.score_partitions, cfg.replication_factor),
                        (cfg.dlq_topic, 1, cfg.replication_factor),
                    ], timeout=15.0)
            return
        except transport_error as exc:
            if cfg.connect_timeout is not None and time.monotonic() - started + backoff > cfg.connect_timeout:
                raise
            log.warning("broker not ready; retrying", extra={"error": str(exc), "retry_in": backoff})
            stop.wait(backoff)
            backoff = min(backoff * 2, 5.0)


def _flush(producer, delivery_error: type[Exception]) -> None:
    """A load generator keeps going when deliveries fail (broker down): it says how many were lost."""
    try:
        producer.flush()
    except delivery_error as exc:
        log.error("records not delivered; going on", extra={"error": str(exc)})
