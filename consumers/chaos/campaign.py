"""The fault campaign behind ``sgm chaos``: kill processes, freeze the broker, then audit everything.

Set-up: a private embedded broker (Tansu), the four topics created up front
(training: 1 partition; scoring and output: ``score_partitions``; DLQ: 1),
``trainers`` processes ``sgm serve --role trainer`` and ``classifiers``
processes ``sgm serve --role classifier`` (one classifier group), each with
its own state directory and log file (``processes.py``). Every process keeps
its own model and applies the whole training log itself.

The stream (``topics.py``): the synthetic stream with malformed and hostile
records, fed at ``rate`` records/s; a tail reads the scoring, output and DLQ
topics as they grow.

Faults, at seeded random moments of the feed: ``kills`` SIGKILLs, each of a
random process (at least one trainer and one classifier), restarted at once on
the same state directory; and ``freezes`` SIGSTOPs of the broker for
``freeze_seconds`` each, then SIGCONT. A supervisor restarts any process that
exits on its own and counts it as a crash.

Field faults (issue #15; docs/RELIABILITY.md): the processes start while the
broker is down (``down_at_start`` seconds); with ``recreate_topic`` they learn
a prelude of training records, then the cluster is wiped (a new, empty broker
on the same port) and the topics created again, so every model must notice the
new training log and rebuild from it (``--on-training-log-reset rebuild``);
the stream carries learns from a clock-skewed producer (``skewed_every``) and,
with ``poison``, one record too large to fetch.

The end: once every valid scoring id has an output and every process has
applied the whole training log (its ``sgm_training_offset``), every process
gets SIGTERM (graceful: snapshot, commit, exit 0). Then the audit
(``audit.py``: lost, double counted, unanswered, duplicates within their
bound, dead letters, crashes).
"""
from __future__ import annotations

import os
import random
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from sgm.stream.broker import EmbeddedBroker, free_port
from sgm.stream.kafka import KafkaConfig, TopicPartition, open_client
from sgm.stream.records import InvalidRecord, TrainRecord, encode_train, parse_score

from ..config import ServiceConfig
from .audit import audit
from .processes import Supervised
from .topics import POISON_BYTES, TRAIN_KINDS, Feeder, Tail, build_stream


@dataclass
class CampaignConfig:
    """Knobs of one campaign (``sgm chaos --help`` lists them with their defaults).

    Examples
    --------
    >>> small = CampaignConfig(records=2000, kills=2)  # what tests/test_chaos.py's reduced campaign is made of
    >>> small.records, small.kills, small.classifiers, small.client
    (2000, 2, 2, 'confluent')
    """

    records: int = 50_000  # at least this many training and this many scoring records
    kills: int = 20
    freezes: int = 1
    freeze_seconds: float = 20.0
    trainers: int = 1
    classifiers: int = 2
    score_partitions: int = 4
    rate: float = 1000.0  # records per second fed (training + scoring)
    seed: int = 0
    malformed_rate: float = 0.003
    hostile_every: int = 500
    max_poll_records: int = 200
    snapshot_every_records: int = 10_000
    snapshot_every_seconds: float = 10.0
    client: str = "confluent"
    model: str = "uc_pd_jm_dp"
    params: dict = field(default_factory=lambda: {"beta": 0.3, "mu": 20.0, "delta": 0.5, "ups": 0.2})
    half_life: float | None = 3600.0
    timeout: float = 900.0  # seconds allowed after the feed for everything to be applied and answered
    work_dir: str | None = None  # state directories and logs (default: a temporary directory, kept)
    # -- field faults (issue #15)
    down_at_start: float = 10.0  # seconds the broker is down while the processes start (0: up first)
    recreate_topic: bool = True  # a prelude is learned, then the cluster is wiped and the topics recreated
    prelude_records: int = 300
    skewed_every: int = 2000  # a learn stamped ten years ahead every this many records (0: none)
    poison: bool = True  # one training record too large to fetch, in the middle of the stream
    poison_timeout: float = 8.0  # the processes' --poison-timeout
    max_event_skew: float = ServiceConfig.max_event_skew  # the processes' (default) --max-event-skew

    def model_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"model": self.model, "params": dict(self.params), "multilabel": "per_label"}
        if self.half_life is not None:
            config["half_life"] = self.half_life
        return config


def _serve_args(config: CampaignConfig, bootstrap: str, topics: dict[str, str], group: str, role: str,
                state_dir: Path) -> list[str]:
    args = [sys.executable, "-m", "sgm.consumers.cli", "serve", "--bootstrap-servers", bootstrap, "--client", config.client,
            "--role", role, "--train-topic", topics["train"], "--score-topic", topics["score"],
            "--output-topic", topics["output"], "--dlq-topic", topics["dlq"], "--group", group,
            "--state-dir", str(state_dir), "--create-topics", "false", "--model", config.model,
            "--max-poll-records", str(config.max_poll_records),
            "--snapshot-every-records", str(config.snapshot_every_records),
            "--snapshot-every-seconds", str(config.snapshot_every_seconds),
            "--metrics-address", "127.0.0.1:0", "--log-format", "json", "--log-level", "INFO",
            "--poison-timeout", str(config.poison_timeout), "--max-event-skew", str(config.max_event_skew)]
    if config.half_life is not None:
        args += ["--half-life", str(config.half_life)]
    for name, value in config.params.items():
        args += ["--param", f"{name}={value}"]
    return args


def _schedule(config: CampaignConfig, feed_seconds: float, rng: random.Random, names: dict[str, list[str]]):
    """Seeded fault times: kills spread over the feed, freezes in its middle part."""
    faults: list[tuple[float, str, str | None]] = []
    victims: list[str] = []
    if config.kills >= 2 and names["trainer"] and names["classifier"]:
        victims = [rng.choice(names["trainer"]), rng.choice(names["classifier"])]
    everyone = names["trainer"] + names["classifier"]
    while len(victims) < config.kills:
        victims.append(rng.choice(everyone))
    rng.shuffle(victims)
    times = sorted(rng.uniform(0.05, 0.95) * feed_seconds for _ in victims)
    faults += [(t, "kill", v) for t, v in zip(times, victims)]
    for _ in range(config.freezes):
        faults.append((rng.uniform(0.3, 0.7) * feed_seconds, "freeze", None))
    return sorted(faults, key=lambda f: f[0])


def _learn_prelude_then_wipe(config: CampaignConfig, client, broker: EmbeddedBroker, topics: dict[str, str],
                             partitions: dict[str, int], processes: list[Supervised], fault_log: list[dict[str, Any]],
                             say: Callable[..., None]) -> EmbeddedBroker:
    """Every process learns a prelude; then the cluster is wiped (a new, empty broker on the same port: the
    topics are created again, new ids, offsets from 0). Returns the new broker."""
    producer = client.producer(idempotent=True)
    for i in range(config.prelude_records):
        record = TrainRecord(id=f"chaos-prelude-{i}", labels=("prelude",), text=f"prelude words {i} of an old log")
        producer.send(topics["train"], encode_train(record), key=record.id.encode())
    producer.close(60.0)
    offsets: list[int | None] = []
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        offsets = [p.training_offset() for p in processes]
        if all(o is not None and o >= config.prelude_records for o in offsets):
            break
        time.sleep(0.5)
    else:
        raise RuntimeError(f"the processes did not learn the prelude: training offsets {offsets}")
    # The classifiers meet the new log at their next start; the trainer (no consumer group) while it runs.
    # A running classifier leaves its group to rebuild; on Tansu, leaving while its join to the new broker is
    # still pending left the group without members for good (unanswered 3,010 of 3,010; docs/RELIABILITY.md).
    # With a real DeleteTopics librdkafka consumers crash anyway and are restarted (the same start path).
    classifiers = [p for p in processes if p.role == "classifier"]
    codes = {p.name: p.stop_for_now() for p in classifiers}
    if any(code != 0 for code in codes.values()):
        raise RuntimeError(f"classifiers did not stop cleanly before the wipe: {codes}")
    port = broker.port
    broker.stop()
    fresh = EmbeddedBroker(port=port, log_path=broker.log_path)
    fresh.start()
    with client.admin() as admin:
        admin.create_topics([(name, count, 1) for name, count in partitions.items()])
    for proc in classifiers:
        proc.resume()
    fault_log.append({"fault": "topic_recreated", "prelude_records": config.prelude_records,
                      "how": "cluster wiped: a new empty broker on the same port, topics created again"})
    say(f"chaos: every process learned {config.prelude_records} prelude records; cluster wiped, topics recreated")
    return fresh


def _reported_reset(process: Supervised) -> bool:
    """Whether the process logged a training log reset (the wiped cluster noticed)."""
    return any(line.get("msg", "").startswith("training log reset") for line in process.log_lines())


def run_campaign(config: CampaignConfig, say: Callable[..., None] = print) -> dict[str, Any]:
    """Run one campaign and return its result (the dict ``sgm chaos`` prints as its last line)."""
    started = time.monotonic()
    work = Path(config.work_dir or tempfile.mkdtemp(prefix="sgm-chaos-"))
    work.mkdir(parents=True, exist_ok=True)
    rng = random.Random(config.seed)
    run_id = f"chaos-{config.seed}-{os.getpid()}-{int(time.time())}"
    topics = {"train": f"{run_id}-train", "score": f"{run_id}-score", "output": f"{run_id}-out", "dlq": f"{run_id}-dlq"}
    partitions = {topics["train"]: 1, topics["score"]: config.score_partitions,
                  topics["output"]: config.score_partitions, topics["dlq"]: 1}
    group = f"{run_id}-classifiers"
    say(f"chaos: building the stream (>= {config.records} training and scoring records) ...")
    stream = build_stream(config)
    kinds = Counter(kind for kind, _, _ in stream)
    train_records = sum(kinds[kind] for kind in TRAIN_KINDS)
    valid_ids = set()
    for kind, _, value in stream:
        if kind == "score":
            try:
                valid_ids.add(parse_score(value).id)
            except InvalidRecord:
                pass
    feed_seconds = len(stream) / config.rate
    say(f"chaos: {train_records} training + {kinds['score']} scoring records, fed at {config.rate:g}/s "
        f"(~{feed_seconds:.0f} s); work dir {work}")

    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    broker = EmbeddedBroker(port=port, log_path=work / "tansu.log")
    processes: list[Supervised] = []
    tail = feeder = None
    frozen = threading.Event()
    fault_log: list[dict[str, Any]] = []
    stop_supervisor = threading.Event()
    try:
        names: dict[str, list[str]] = {"trainer": [], "classifier": []}
        for role, count in (("trainer", config.trainers), ("classifier", config.classifiers)):
            for i in range(count):
                name = f"{role}-{i}"
                state = work / name
                state.mkdir(exist_ok=True)
                proc = Supervised(name, role, _serve_args(config, bootstrap, topics, group, role, state),
                                  state, work / f"{name}.log")
                proc.start()
                processes.append(proc)
                names[role].append(name)

        def supervise() -> None:
            while not stop_supervisor.wait(0.2):
                for proc in processes:
                    if proc.check():
                        say(f"chaos: {proc.name} exited on its own (crash #{len(proc.crashes)}); restarted")

        supervisor = threading.Thread(target=supervise, name="chaos-supervisor", daemon=True)
        supervisor.start()
        if config.down_at_start > 0:  # field fault: the processes start while the broker is down
            say(f"chaos: processes started, the broker stays down for {config.down_at_start:g} s and until every "
                "process has retried")
            down_since = time.monotonic()
            time.sleep(config.down_at_start)
            while time.monotonic() - down_since < config.down_at_start + 120 and not all(
                    any(line.get("msg") == "kafka error; retrying" for line in p.log_lines()) for p in processes):
                time.sleep(0.5)
            fault_log.append({"fault": "broker_down_at_start", "seconds": round(time.monotonic() - down_since, 1)})
        broker.start()
        client = open_client(config.client, KafkaConfig(bootstrap_servers=bootstrap, client_id="sgm-chaos"))
        with client.admin() as admin:
            admin.create_topics([(name, count, 1) for name, count in partitions.items()])
        if config.recreate_topic:  # field fault: the training log the models know is replaced by a new one
            broker = _learn_prelude_then_wipe(config, client, broker, topics, partitions, processes, fault_log, say)
        by_name = {p.name: p for p in processes}
        tail = Tail(client, {k: topics[k] for k in ("score", "output", "dlq")}, partitions)
        tail.start()
        probe = client.consumer(None)
        committed_reader = client.consumer(group)
        score_tps = [TopicPartition(topics["score"], p) for p in range(config.score_partitions)]
        out_tps = [TopicPartition(topics["output"], p) for p in range(config.score_partitions)]

        def in_flight(timeout: float = 30.0) -> int:
            """Outputs written for scoring records at or above the group's committed offsets."""
            deadline = time.monotonic() + timeout
            try:
                ends = probe.end_offsets(out_tps, timeout=10.0)
                while not tail.caught_up(ends) and time.monotonic() < deadline:
                    time.sleep(0.05)
                committed = committed_reader.committed(score_tps, timeout=10.0)
            except Exception as exc:  # noqa: BLE001 - measured as unknown, reported
                say(f"chaos: in-flight measurement failed: {exc!r}")
                return -1
            floor = {tp.partition: (off or 0) for tp, off in committed.items()}
            with tail.lock:
                return sum(1 for doc_id in tail.outputs if (pos := tail.score_position.get(doc_id))
                           and pos[1] >= floor.get(pos[0], 0))

        # Let every process start, catch up (/ready) and the classifiers join their group before the records
        # arrive: a classifier killed during a broker freeze while its first join is pending can leave Tansu's
        # group coordinator waiting for it for good (a fresh group id works; docs/RELIABILITY.md).
        # A fixed wait for the join (about half the 6 s session timeout on Tansu) was not enough on a busy
        # machine: the processes had not even noticed the wiped cluster yet, so their rebuild (which leaves
        # the group until caught up) met the freeze and the kills. Wait until every process has reported
        # the reset and is ready again, then (the 2-s gauges refreshed) until the classifiers hold every
        # scoring partition (their sgm_consumer_lag{source="score"} series).
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (
                (not config.recreate_topic or all(_reported_reset(p) for p in processes))
                and all(p.ready() for p in processes)):
            time.sleep(0.2)
        time.sleep(2.5)
        classifiers = [p for p in processes if p.role == "classifier"]
        while time.monotonic() < deadline and not (
                all(p.ready() for p in processes)
                and sum(p.scoring_partitions() for p in classifiers) >= config.score_partitions):
            time.sleep(0.2)
        feeder = Feeder(client, stream, topics, config.rate)
        feed_started = time.monotonic()
        feeder.start()
        if kinds["poison"]:
            fault_log.append({"fault": "poison_record", "bytes": POISON_BYTES})
        faults = _schedule(config, feed_seconds, rng, names)
        say(f"chaos: {sum(f[1] == 'kill' for f in faults)} kills and {config.freezes} freeze(s) of "
            f"{config.freeze_seconds:g} s scheduled")
        thaw_at: float | None = None
        freeze_entry: dict[str, Any] = {}
        pending = list(faults)
        last_report = 0.0
        while pending or thaw_at is not None:
            now = time.monotonic() - feed_started
            if thaw_at is not None and now >= thaw_at:
                os.kill(broker.pid, signal.SIGCONT)
                frozen.clear()
                thaw_at = None
                freeze_entry["resumed_at"] = round(now, 2)
                say(f"chaos: [{now:6.1f}s] broker resumed")
            if pending and now >= pending[0][0]:
                at, kind, victim = pending.pop(0)
                if kind == "freeze":
                    if thaw_at is not None:
                        continue
                    before = in_flight() if not frozen.is_set() else -1
                    os.kill(broker.pid, signal.SIGSTOP)
                    frozen.set()
                    thaw_at = time.monotonic() - feed_started + config.freeze_seconds
                    freeze_entry = {"fault": "freeze", "at": round(now, 2), "seconds": config.freeze_seconds,
                                    "in_flight": before}
                    fault_log.append(freeze_entry)
                    say(f"chaos: [{now:6.1f}s] broker frozen (SIGSTOP) for {config.freeze_seconds:g} s")
                else:
                    proc = by_name[victim]
                    proc.kill()
                    entry = {"fault": "kill", "at": round(now, 2), "process": victim, "role": proc.role}
                    if proc.role == "classifier":
                        entry["in_flight"] = -1 if frozen.is_set() else in_flight()
                    fault_log.append(entry)
                    say(f"chaos: [{now:6.1f}s] SIGKILL {victim}, restarted"
                        + (f" (in flight: {entry['in_flight']})" if "in_flight" in entry else ""))
                continue
            if now - last_report > 10:
                last_report = now
                with tail.lock:
                    answered = len(valid_ids & tail.outputs.keys())
                say(f"chaos: [{now:6.1f}s] fed {feeder.sent}/{len(stream)}, answered {answered}/{len(valid_ids)}")
            time.sleep(0.05)
        # Classifier kills during the freeze: measure once the broker is back (an over-estimate).
        for entry in fault_log:
            if entry.get("in_flight") == -1:
                entry["in_flight"] = in_flight()
        feeder.done.wait()
        if feeder.error is not None:
            raise RuntimeError(f"feeder failed: {feeder.error!r}")
        say(f"chaos: [{time.monotonic() - feed_started:6.1f}s] stream fed; waiting for every process to catch up")
        train_end = train_records
        deadline = time.monotonic() + config.timeout
        offsets: dict[str, int | None] = {}
        answered = 0
        while time.monotonic() < deadline:
            with tail.lock:
                answered = len(valid_ids & tail.outputs.keys())
            offsets = {p.name: p.training_offset() for p in processes}
            if answered == len(valid_ids) and all(o is not None and o >= train_end for o in offsets.values()):
                break
            if time.monotonic() - last_report > 10:
                last_report = time.monotonic()
                say(f"chaos: answered {answered}/{len(valid_ids)}, training offsets {offsets} of {train_end}")
            time.sleep(0.5)
        stop_supervisor.set()
        supervisor.join()
        exits = {p.name: p.terminate() for p in processes}
        time.sleep(1.0)  # the last outputs and dead letters reach the tail
        letters_ends = probe.end_offsets([TopicPartition(topics["dlq"], 0)] + out_tps, timeout=10.0)
        wait_until = time.monotonic() + 20
        while not tail.caught_up(letters_ends) and time.monotonic() < wait_until:
            time.sleep(0.1)
        # ------------------------------------------------------------------ the audit
        return audit(config, client=client, topics=topics, processes=processes, exits=exits, tail=tail,
                     fault_log=fault_log, train_end=train_end, scoring_records=kinds["score"], valid_ids=valid_ids,
                     started=started, work=work)
    finally:
        if frozen.is_set():
            os.kill(broker.pid, signal.SIGCONT)
        for proc in processes:
            if proc.process is not None and proc.process.poll() is None:
                proc.process.kill()
                proc.process.wait(10)
        if tail is not None:
            tail.stop.set()
            tail.join(10)
        broker.stop()
