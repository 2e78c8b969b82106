"""The fault campaign behind ``sgm chaos``: kill processes, freeze the broker, then audit everything.

Set-up: a private embedded broker (Tansu), the four topics created up front
(training: 1 partition; scoring and output: ``score_partitions``; DLQ: 1),
``trainers`` processes ``sgm serve --role trainer`` and ``classifiers``
processes ``sgm serve --role classifier`` (one classifier group), each with
its own state directory and log file. Every process keeps its own model and
applies the whole training log itself.

The stream: the project's synthetic stream (news + spam, drift, new labels,
corrections, forgets, malformed records tagged with the reason they must get)
sized so that there are at least ``records`` training *and* ``records`` scoring
records, plus a hostile record every ``hostile_every`` records that only the
model can refuse (a forget of an unknown id, an unlearn under the wrong
labels). A feeder thread produces it at ``rate`` records/s with an idempotent
producer, so the logs hold every record exactly once in stream order.

Faults, at seeded random moments of the feed: ``kills`` SIGKILLs, each of a
random process (at least one trainer and one classifier), restarted at once on
the same state directory; and ``freezes`` SIGSTOPs of the broker for
``freeze_seconds`` each, then SIGCONT. A supervisor restarts any process that
exits on its own and counts it as a crash.

The end: once every valid scoring id has an output and every process has
applied the whole training log (its ``sgm_training_offset``), every process
gets SIGTERM (graceful: snapshot, commit, exit 0). Then the audit:

``lost`` / ``double_counted``
    The training log is read back and replayed in order into a fresh model,
    as an uninterrupted service would apply it: the reference. Each process's
    final snapshot must have the reference's state checksum. When it does not,
    its documents are compared with the reference's: ids the reference holds
    that the model lacks or holds with other content are *lost*; ids the model
    holds that the reference does not (a learn re-applied after its forget) and
    changed ids learned later than in the reference are *double counted*.
    Totals over processes.
``unanswered``
    Valid scoring ids without any output.
``duplicates`` and ``duplicate_bound``
    Outputs beyond the first per id (scoring is at least once), and what can
    explain them: for each classifier kill, the outputs that were written but
    not committed when it died (measured: answered ids at or above the group's
    committed offsets, after the kill), plus one batch (``max_poll_records``)
    for every batch the classifiers' logs say they rescored or could not commit
    (delivery failure, commit refused after a rebalance, commit error).
``bad_inputs`` and ``dead_letters_missing``
    Records that must be rejected (malformed ones, and the hostile ones the
    reference model refuses) and how many of them have no dead letter with the
    expected reason.
``crashes``
    Processes that exited without being killed by the campaign, or exited
    non-zero on SIGTERM.

``ok`` is true when nothing is lost, double counted, unanswered, missing from
the DLQ or crashed, the checksums match and duplicates are within the bound.
"""
from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from sgm.model import LearnGuardError, build_model
from sgm.model.persistence import loads as load_snapshot, read_meta
from sgm.stream.broker import EmbeddedBroker
from sgm.stream.records import ApplyReason, InvalidRecord, Op, parse_dead_letter, parse_output, parse_score, parse_train
from sgm.stream.snapshot_store import SnapshotStore
from sgm.stream.synthetic import SyntheticConfig, SyntheticStream
from sgm.stream.kafka import KafkaConfig, TopicPartition, open_client

from .logs import metrics_port_in_log

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class CampaignConfig:
    """Knobs of one campaign (``sgm chaos --help`` lists them with their defaults)."""

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

    def model_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"model": self.model, "params": dict(self.params), "multilabel": "per_label"}
        if self.half_life is not None:
            config["half_life"] = self.half_life
        return config


# --------------------------------------------------------------------------------------- processes


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - best effort, Linux only
        pass


class Supervised:
    """One ``sgm serve`` process under the campaign's control."""

    def __init__(self, name: str, role: str, args: list[str], state_dir: Path, log_path: Path) -> None:
        self.name, self.role, self.args = name, role, args
        self.state_dir, self.log_path = state_dir, log_path
        self.process: subprocess.Popen | None = None
        self.starts = 0
        self.kills = 0
        self.crashes: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            log.write(f'{{"msg": "chaos: start #{self.starts + 1}", "ts": {time.time():.3f}}}\n'.encode())
            self.process = subprocess.Popen(self.args, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                            stderr=log, preexec_fn=_die_with_parent if os.name == "posix" else None)
        self.starts += 1

    def kill(self) -> None:
        with self.lock:
            if self.process is not None and self.process.poll() is None:
                self.process.send_signal(signal.SIGKILL)
                self.process.wait(30)
            self.kills += 1
            self.start()

    def check(self) -> bool:
        """Restart the process if it exited on its own (a crash); True if it did."""
        with self.lock:
            if self.process is None or self.process.poll() is None:
                return False
            code = self.process.returncode
            self.crashes.append({"returncode": code, "at": time.time(), "log_tail": self.log_tail(1500)})
            self.start()
            return True

    def terminate(self, timeout: float = 60.0) -> int | None:
        with self.lock:
            process = self.process
            if process is None:
                return None
            if process.poll() is not None:
                return process.returncode
            process.send_signal(signal.SIGTERM)
            try:
                return process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
                return None

    def log_lines(self) -> list[dict[str, Any]]:
        out = []
        with open(self.log_path, "rb") as handle:
            for raw in handle:
                try:
                    line = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(line, dict):
                    out.append(line)
        return out

    def log_tail(self, size: int = 2000) -> str:
        with open(self.log_path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - size))
            return handle.read().decode("utf-8", "replace")

    def metrics_port(self) -> int | None:
        """Port of the current run's metrics endpoint (from its 'service started' log line)."""
        with open(self.log_path, "rb") as handle:
            return metrics_port_in_log(handle, restart_marker=b'"chaos: start')

    def training_offset(self) -> int | None:
        """The running process's next training offset, from its metrics endpoint (None if unreachable)."""
        port = self.metrics_port()
        if port is None:
            return None
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2.0) as response:
                text = response.read().decode()
        except OSError:
            return None
        found = re.search(r'^sgm_training_offset\{partition="0"\} ([0-9.e+]+)$', text, re.M)
        return int(float(found.group(1))) if found else None


# --------------------------------------------------------------------------------------- the tail


class Tail(threading.Thread):
    """Reads the scoring, output and DLQ topics as they grow (the campaign's view of the logs)."""

    def __init__(self, client, topics: dict[str, str], partitions: dict[str, int]) -> None:
        super().__init__(name="chaos-tail", daemon=True)
        self.topics = topics
        self.consumer = client.consumer(None, **{"confluent": {"fetch.wait.max.ms": 50}}.get(client.kind, {}))
        self.consumer.assign([TopicPartition(t, p) for t in topics.values() for p in range(partitions[t])])
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.positions: dict[TopicPartition, int] = {}
        self.score_position: dict[str, tuple[int, int]] = {}  # valid scoring id -> (partition, offset)
        self.score_invalid: dict[tuple[int, int], str] = {}  # (partition, offset) -> expected reason
        self.outputs: Counter = Counter()
        self.letters: list[tuple[str | None, int | None, int | None, str]] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                records = self.consumer.poll(5000, 0.2)
                with self.lock:
                    for record in records:
                        self.positions[record.tp] = record.offset + 1
                        if record.topic == self.topics["score"]:
                            try:
                                parsed = parse_score(record.value)
                            except InvalidRecord as exc:
                                self.score_invalid[(record.partition, record.offset)] = exc.reason.value
                            else:
                                self.score_position.setdefault(parsed.id, (record.partition, record.offset))
                        elif record.topic == self.topics["output"]:
                            self.outputs[parse_output(record.value).id] += 1
                        else:
                            letter = parse_dead_letter(record.value)
                            self.letters.append((letter.topic, letter.partition, letter.offset, letter.reason.value))
        except BaseException as exc:  # noqa: BLE001 - reported by the campaign
            self.error = exc
        finally:
            self.consumer.close()

    def caught_up(self, ends: dict[TopicPartition, int]) -> bool:
        with self.lock:
            return all(self.positions.get(tp, 0) >= end for tp, end in ends.items())


# --------------------------------------------------------------------------------------- reference


def replay(records, model_config: dict[str, Any]):
    """Apply training records in log order, as the service does; returns (model, expected dead letters).

    Expected dead letters are ``{(partition, offset): reason}`` for every record
    the validator or the model refuses (``ApplyReason`` codes included).
    """
    model = build_model(model_config)
    expected: dict[tuple[int, int], str] = {}
    for record in records:
        where = (record.partition, record.offset)
        try:
            parsed = parse_train(record.value)
        except InvalidRecord as exc:
            expected[where] = exc.reason.value
            continue
        ts = parsed.ts if parsed.ts is not None else (
            record.timestamp_ms / 1000.0 if record.timestamp_ms is not None else None)
        doc = parsed.text if parsed.text is not None else parsed.terms
        if parsed.op is Op.LEARN:
            try:
                model.check_labels(parsed.labels)
            except ValueError:
                expected[where] = ApplyReason.MODEL_REJECTED.value
                continue
            model.learn_one(doc, parsed.labels, ts=ts, id=parsed.id)
        elif parsed.op is Op.FORGET:
            if not model.forget(parsed.id):
                expected[where] = ApplyReason.UNKNOWN_ID.value
        else:
            try:
                done = model.unlearn_one(doc, parsed.labels, ts=ts, id=parsed.id)
            except LearnGuardError:
                expected[where] = ApplyReason.UNLEARN_MISMATCH.value
            except ValueError:
                expected[where] = ApplyReason.MODEL_REJECTED.value
            else:
                if not done:
                    expected[where] = ApplyReason.UNKNOWN_ID.value
    return model, expected


def compare_models(model, reference) -> tuple[int, int]:
    """(lost, double counted) documents of ``model`` against ``reference`` (see the module docstring)."""
    have, want = model.document_ids(), reference.document_ids()
    lost = len(want - have)
    doubled = len(have - want)
    for doc_id in want & have:
        mine, theirs = model.document(doc_id), reference.document(doc_id)
        if mine[:3] != theirs[:3]:  # labels, event time, term counts
            if mine.seq > theirs.seq:
                doubled += 1
            else:
                lost += 1
    return lost, doubled


# --------------------------------------------------------------------------------------- the stream


def build_stream(config: CampaignConfig) -> list[tuple[str, bytes, bytes]]:
    """``(kind, key, value)`` records: the synthetic stream plus hostile records only the model refuses."""
    warmup = 100
    n_docs = config.records + warmup + 10
    while True:
        events = list(SyntheticStream(SyntheticConfig(
            seed=config.seed, n_docs=n_docs, profiles=("news", "spam"), malformed_rate=config.malformed_rate,
            warmup_docs=warmup, forget_rate=0.004, id_prefix=f"chaos{config.seed}")).events())
        trains = sum(e.kind == "train" for e in events)
        scores = sum(e.kind == "score" for e in events)
        if trains >= config.records and scores >= config.records:
            break
        n_docs += max(config.records - min(trains, scores), 10)
    rng = random.Random(config.seed)
    out: list[tuple[str, bytes, bytes]] = []
    learned: list[tuple[str, tuple[str, ...]]] = []
    hostile = 0
    for index, event in enumerate(events):
        out.append((event.kind, event.key, event.value))
        if event.kind == "train" and event.valid and event.op is Op.LEARN:
            learned.append((event.id, event.truth_labels))
        if config.hostile_every and index % config.hostile_every == config.hostile_every - 1:
            hostile += 1
            if hostile % 2 and learned:  # unlearn a recent document under labels it was not learned with
                doc_id, _ = learned[-rng.randrange(1, min(len(learned), 20) + 1)]
                value = {"id": doc_id, "op": "unlearn", "labels": ["chaos-wrong-label"], "text": "x"}
            else:  # forget an id that was never learned
                doc_id = f"chaos-unknown-{hostile}"
                value = {"id": doc_id, "op": "forget"}
            out.append(("train", doc_id.encode(), json.dumps(value).encode()))
    return out


class Feeder(threading.Thread):
    """Produces the stream at a steady rate (idempotent producer: each record lands once, in order)."""

    def __init__(self, client, stream, topics: dict[str, str], rate: float) -> None:
        super().__init__(name="chaos-feeder", daemon=True)
        self.producer = client.producer(**{"confluent": {"enable.idempotence": True, "message.timeout.ms": 900_000}}
                                        .get(client.kind, {}))
        self.stream, self.topics, self.rate = stream, topics, rate
        self.sent = 0
        self.done = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            started = time.monotonic()
            chunk = max(1, int(self.rate / 20))
            for start in range(0, len(self.stream), chunk):
                for kind, key, value in self.stream[start : start + chunk]:
                    self.producer.send(self.topics["train" if kind == "train" else "score"], value, key=key)
                self.sent = min(start + chunk, len(self.stream))
                self._flush()
                delay = started + self.sent / self.rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            self._flush()
        except BaseException as exc:  # noqa: BLE001 - reported by the campaign
            self.error = exc
        finally:
            self.done.set()

    def _flush(self) -> None:
        from sgm.stream.kafka import DeliveryError

        while True:
            try:
                self.producer.flush(60.0)
                return
            except DeliveryError as exc:  # records still queued are retried by the client
                if exc.failures:
                    raise


# --------------------------------------------------------------------------------------- the campaign


def _serve_args(config: CampaignConfig, bootstrap: str, topics: dict[str, str], group: str, role: str,
                state_dir: Path) -> list[str]:
    args = [sys.executable, "-m", "sgm.consumers.cli", "serve", "--bootstrap-servers", bootstrap, "--client", config.client,
            "--role", role, "--train-topic", topics["train"], "--score-topic", topics["score"],
            "--output-topic", topics["output"], "--dlq-topic", topics["dlq"], "--group", group,
            "--state-dir", str(state_dir), "--create-topics", "false", "--model", config.model,
            "--max-poll-records", str(config.max_poll_records),
            "--snapshot-every-records", str(config.snapshot_every_records),
            "--snapshot-every-seconds", str(config.snapshot_every_seconds),
            "--metrics-address", "127.0.0.1:0", "--log-format", "json", "--log-level", "INFO"]
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
    valid_ids = set()
    for kind, _, value in stream:
        if kind == "score":
            try:
                valid_ids.add(parse_score(value).id)
            except InvalidRecord:
                pass
    feed_seconds = len(stream) / config.rate
    say(f"chaos: {kinds['train']} training + {kinds['score']} scoring records, fed at {config.rate:g}/s "
        f"(~{feed_seconds:.0f} s); work dir {work}")

    broker = EmbeddedBroker(log_path=work / "tansu.log")
    broker.start()
    processes: list[Supervised] = []
    tail = feeder = None
    frozen = threading.Event()
    fault_log: list[dict[str, Any]] = []
    try:
        client = open_client(config.client, KafkaConfig(bootstrap_servers=broker.bootstrap_servers, client_id="sgm-chaos"))
        with client.admin() as admin:
            admin.create_topics([(name, count, 1) for name, count in partitions.items()])
        names: dict[str, list[str]] = {"trainer": [], "classifier": []}
        for role, count in (("trainer", config.trainers), ("classifier", config.classifiers)):
            for i in range(count):
                name = f"{role}-{i}"
                state = work / name
                state.mkdir(exist_ok=True)
                proc = Supervised(name, role, _serve_args(config, broker.bootstrap_servers, topics, group, role, state),
                                  state, work / f"{name}.log")
                proc.start()
                processes.append(proc)
                names[role].append(name)
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

        stop_supervisor = threading.Event()

        def supervise() -> None:
            while not stop_supervisor.wait(0.2):
                for proc in processes:
                    if proc.check():
                        say(f"chaos: {proc.name} exited on its own (crash #{len(proc.crashes)}); restarted")

        supervisor = threading.Thread(target=supervise, name="chaos-supervisor", daemon=True)
        supervisor.start()
        # Give the processes a moment to start (and the classifiers to join) before the records arrive.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not all(p.metrics_port() for p in processes):
            time.sleep(0.2)
        feeder = Feeder(client, stream, topics, config.rate)
        feed_started = time.monotonic()
        feeder.start()
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
        train_end = kinds["train"]
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
        reader = client.consumer(None)
        reader.assign([TopicPartition(topics["train"], 0)])
        train_records: list = []
        read_until = time.monotonic() + 120
        while len(train_records) < train_end and time.monotonic() < read_until:
            train_records.extend(reader.poll(10_000, 1.0))
        reader.close()
        reference, expected_train = replay(train_records, config.model_config())
        ref_checksum = reference.checksum()
        per_process: dict[str, dict[str, Any]] = {}
        lost = doubled = 0
        for proc in processes:
            found = SnapshotStore(proc.state_dir).latest()
            info: dict[str, Any] = {"role": proc.role, "starts": proc.starts, "kills": proc.kills,
                                    "crashes": len(proc.crashes), "exit": exits[proc.name]}
            if found is None:
                info.update(checksum_match=False, train_offset=0)
                lost += len(reference)
            else:
                meta = read_meta(found[1])
                info["train_offset"] = int(meta["extra"]["train_offsets"].get("0", 0))
                info["checksum_match"] = meta["state_checksum"] == ref_checksum
                if not info["checksum_match"]:
                    model, _ = load_snapshot(found[1])
                    p_lost, p_doubled = compare_models(model, reference)
                    info.update(lost=p_lost, double_counted=p_doubled, adds_delta=model.stats()["learned_total"] - reference.stats()["learned_total"])
                    lost += p_lost
                    doubled += p_doubled
            errors = Counter()
            events = Counter()
            for line in proc.log_lines():
                msg = line.get("msg")
                if msg == "kafka error; retrying":
                    errors[line.get("stage", "?")] += 1
                elif msg in ("commit failed after rebalance; outputs of this batch may be duplicated",
                             "output delivery failed; rescoring the batch"):
                    events[msg.split(";")[0]] += 1
            info["transport_errors"] = dict(errors)
            info["rescore_events"] = dict(events)
            per_process[proc.name] = info
        crashes = sum(len(p.crashes) for p in processes) + sum(1 for code in exits.values() if code != 0)
        with tail.lock:
            outputs = Counter(tail.outputs)
            letters = list(tail.letters)
            score_invalid = dict(tail.score_invalid)
        unanswered = len(valid_ids - outputs.keys())
        duplicates = sum(n - 1 for doc_id, n in outputs.items() if doc_id in valid_ids)
        rescore_batches = sum(sum(info["rescore_events"].values()) + info["transport_errors"].get("score_commit", 0)
                              for info in per_process.values() if info["role"] == "classifier")
        measured = sum(max(f.get("in_flight", 0), 0) for f in fault_log)
        bound = measured + config.max_poll_records * rescore_batches
        got_letters = Counter()
        for topic, partition, offset, reason in letters:
            source = "train" if topic == topics["train"] else "score" if topic == topics["score"] else "?"
            got_letters[(source, partition, offset, reason)] += 1
        expected_letters = {("train", p, o, r) for (p, o), r in expected_train.items()}
        expected_letters |= {("score", p, o, r) for (p, o), r in score_invalid.items()}
        missing = expected_letters - got_letters.keys()
        unexpected = got_letters.keys() - expected_letters
        transport_errors = Counter()
        for info in per_process.values():
            transport_errors.update(info["transport_errors"])
        checksum_match = all(info.get("checksum_match") for info in per_process.values())
        result = {
            "faults": len(fault_log),
            "kills": {"trainer": sum(f.get("role") == "trainer" for f in fault_log),
                      "classifier": sum(f.get("role") == "classifier" for f in fault_log)},
            "freezes": sum(f["fault"] == "freeze" for f in fault_log),
            "freeze_seconds": config.freeze_seconds,
            "lost": lost,
            "double_counted": doubled,
            "unanswered": unanswered,
            "bad_inputs": len(expected_letters),
            "dead_letters_missing": len(missing),
            "dead_letters_unexpected": len(unexpected),
            "dead_letter_duplicates": sum(n - 1 for n in got_letters.values()),
            "crashes": crashes,
            "checksum_match": checksum_match,
            "reference_checksum": ref_checksum,
            "training_records": train_end,
            "scoring_records": kinds["score"],
            "valid_scoring_ids": len(valid_ids),
            "duplicates": duplicates,
            "duplicate_bound": bound,
            "in_flight_at_faults": measured,
            "rescored_or_uncommitted_batches": rescore_batches,
            "transport_errors": dict(transport_errors),
            "processes": per_process,
            "fault_log": fault_log,
            "seconds": round(time.monotonic() - started, 1),
            "work_dir": str(work),
            "config": {k: v for k, v in asdict(config).items() if k != "work_dir"},
        }
        result["ok"] = (lost == 0 and doubled == 0 and unanswered == 0 and crashes == 0 and checksum_match
                        and not missing and duplicates <= bound)
        if tail.error is not None:
            result["ok"] = False
            result["tail_error"] = repr(tail.error)
        return result
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
