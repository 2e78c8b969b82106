"""The field-fault suite, part 2: ``sgm serve`` processes meeting faults at start, in memory, on disk (issue #15).

Numbered as the issue's findings. Each runs the real command against the
real broker (a private Tansu where the broker itself is the fault) and
checks what an operator sees: exit status, one-line errors, log lines,
``/ready``, metrics, resident memory, files in ``--state-dir``. Every test
failed on the code before the fix (docs/RELIABILITY.md, "Field faults").
Longer variants are marked ``slow``.
"""
from __future__ import annotations

import contextlib
import json
import os
import random
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sgm.model import MNB
from sgm.stream.broker import EmbeddedBroker, free_port
from sgm.stream.kafka import KafkaConfig, open_client
from sgm.stream.records import ScoreRecord, TrainRecord, encode_score, encode_train
from sgm.stream.snapshot_store import SnapshotStore
from tests.field_fault_helpers import (
    dead_letters,
    field_config,
    kill_quietly,
    learn,
    log_lines,
    metrics_port,
    outputs,
    produce,
    ready_status,
    scrape,
    serve,
    serve_args,
    terminate,
    vm_hwm,
    vm_rss,
    wait_until,
)

pytestmark = pytest.mark.kafka


# ------------------------------------------------------------------------------ 3. broker down at start
def _broker_down_at_start(tmp_path: Path, name: str, down_seconds: float) -> None:
    port = free_port()
    cfg = field_config(f"127.0.0.1:{port}", name, tmp_path / "state")
    log = tmp_path / "serve.log"
    process = serve(serve_args(cfg), log=log)
    broker = None
    try:
        started = time.monotonic()

        def retry_lines() -> list[dict]:
            return [line for line in log_lines(log) if line.get("msg") == "kafka error; retrying"]

        # a loaded machine can take seconds to import and reach the first attempt: wait for two, then the rest
        wait_until(lambda: len(retry_lines()) >= 2 or process.poll() is not None, 60, "two start retries")
        time.sleep(max(0.0, down_seconds - (time.monotonic() - started)))
        assert process.poll() is None, "sgm serve died while the broker was down"
        retries = retry_lines()
        assert len(retries) >= 2 and all(line["stage"] == "start" for line in retries)  # one line per attempt
        assert [line["retry_in"] for line in retries[:3]] == sorted(line["retry_in"] for line in retries[:3])
        metrics = metrics_port(log)  # the endpoint is up while Kafka is not
        assert ready_status(metrics) == 503
        broker = EmbeddedBroker(port=port)
        broker.start()
        wait_until(lambda: ready_status(metrics) == 200, 60, "ready once the broker is back")
        produce(broker.bootstrap_servers, cfg.train_topic, [learn(i) for i in range(50)])
        produce(broker.bootstrap_servers, cfg.score_topic, [encode_score(ScoreRecord(id="q1", text="hamw1 shared1"))])
        client = open_client("confluent", KafkaConfig(bootstrap_servers=broker.bootstrap_servers))
        answered = outputs(client, cfg.output_topic, 1)
        assert [o.id for o in answered] == ["q1"]
        assert terminate(process) == 0
        text = log.read_text()
        assert "Traceback" not in text
    finally:
        kill_quietly(process)
        if broker is not None:
            broker.stop()


def test_3_sgm_serve_waits_out_a_broker_that_is_down_at_start(tmp_path, unique_name):
    _broker_down_at_start(tmp_path, unique_name, down_seconds=6.0)


@pytest.mark.slow
@pytest.mark.long
def test_3_sgm_serve_waits_out_a_broker_down_for_a_minute(tmp_path, unique_name):
    _broker_down_at_start(tmp_path, unique_name, down_seconds=60.0)


# ------------------------------------------------------------------------------ 5. memory bound
def _adversarial_text(rng: random.Random, distinct: int, chars: int = 10) -> str:
    """Words never seen before, ``distinct`` of them, ``chars`` hex digits each (45,000 x 11 = ~500 KB)."""
    return " ".join(f"{rng.getrandbits(4 * chars):0{chars}x}" for _ in range(distinct))


def test_5_the_memory_bound_holds_whatever_valid_texts_arrive_and_a_restore_stays_near_it(kafka_broker, unique_name,
                                                                                        tmp_path):
    """60 valid 500 KB texts of ~45k new words each used to take RSS from 176 MB to 1.6 GB (--max-documents 100)."""
    bound = 48 * 1024 * 1024
    cfg = field_config(kafka_broker.bootstrap_servers, unique_name, tmp_path / "state")
    log = tmp_path / "serve.log"
    process = serve(serve_args(cfg, "--max-model-bytes", str(bound), "--max-documents", "100",
                               "--snapshot-every-seconds", "1000000", "--max-poll-records", "20"), log=log)
    rng = random.Random(5)
    try:
        port = metrics_port(log)
        wait_until(lambda: ready_status(port) == 200, 60, "ready")
        produce(cfg.bootstrap_servers, cfg.train_topic, [learn(i) for i in range(20)])  # warm: every loop compiled
        wait_until(lambda: scrape(port, "sgm_model_documents") == 20, 30, "warm-up learned")
        warm = vm_rss(process.pid)
        texts = [encode_train(TrainRecord(id=f"adv{i}", labels=("x" if i % 2 else "y",),
                                          text=_adversarial_text(rng, 45_000))) for i in range(40)]
        wide = encode_train(TrainRecord(id="too-wide", labels=("x",), text=_adversarial_text(rng, 60_000, chars=7)))
        produce(cfg.bootstrap_servers, cfg.train_topic, texts[:20] + [wide] + texts[20:])
        peak_rss = 0
        deadline = time.monotonic() + 120
        while (scrape(port, "sgm_training_offset") or 0) < 61 and time.monotonic() < deadline:
            peak_rss = max(peak_rss, vm_rss(process.pid))
            time.sleep(0.2)
        assert scrape(port, "sgm_training_offset") == 61
        wait_until(lambda: (scrape(port, "sgm_model_bytes") or 0) > 0, 10, "gauges")
        time.sleep(2.5)  # one gauge refresh after the last record
        model_bytes = scrape(port, "sgm_model_bytes")
        pruned = scrape(port, "sgm_model_pruned_documents")
        running = vm_rss(process.pid)
        high_water = vm_hwm(process.pid)
        assert pruned and pruned >= 30, "the byte bound pruned documents (counted)"
        assert model_bytes <= bound * 1.3  # the gauge estimates more than the bound counts (caches)
        # RSS held: the process stays within the bound (plus transient batches) above its warm size.
        assert high_water - warm < 3 * bound, (warm, high_water)
        assert terminate(process) == 0
        found = SnapshotStore(cfg.state_dir).latest()
        assert found is not None
        letters = dead_letters(open_client("confluent", kafka_broker.config()), cfg.dlq_topic, 1)
        assert [d.reason.value for d in letters] == ["too_many_terms"]
        # restore: the peak while loading stays within 1.5x of the running process
        log2 = tmp_path / "restore.log"
        restored = serve(serve_args(cfg, "--max-model-bytes", str(bound), "--max-documents", "100"), log=log2)
        try:
            port2 = metrics_port(log2)
            wait_until(lambda: ready_status(port2) == 200, 60, "restored and ready")
            restore_peak = vm_hwm(restored.pid)
            print(f"memory: warm {warm >> 20} MB, high water {high_water >> 20} MB, running {running >> 20} MB, "
                  f"model {model_bytes / 2**20:.0f} MB, pruned {pruned:.0f}, restore peak {restore_peak >> 20} MB")
            assert restore_peak <= 1.5 * running, (restore_peak, running)
            assert terminate(restored) == 0
        finally:
            kill_quietly(restored)
    finally:
        kill_quietly(process)


# ------------------------------------------------------------------------------ 6. snapshot limit
def test_6_a_snapshot_over_the_limit_is_never_written_so_the_service_always_restarts(kafka_broker, unique_name,
                                                                                   tmp_path):
    from tests.service_helpers import start_service

    cfg = field_config(kafka_broker.bootstrap_servers, unique_name, tmp_path / "state", max_snapshot_bytes=60_000,
                       snapshot_every_records=10, role="trainer")
    client = open_client("confluent", kafka_broker.config())
    running = start_service(cfg, client)
    produce(cfg.bootstrap_servers, cfg.train_topic, [learn(i) for i in range(10)])
    wait_until(lambda: SnapshotStore(cfg.state_dir).files(), 30, "a first, small snapshot")
    first = SnapshotStore(cfg.state_dir).files()
    assert len(first) == 1 and first[0].stat().st_size < 60_000
    produce(cfg.bootstrap_servers, cfg.train_topic, [learn(i, prefix=f"big{i}-") for i in range(2000)])
    wait_until(lambda: running.service.metrics.snapshot_failures._value.get() >= 1, 30, "a snapshot over the limit")
    running.halt()
    assert SnapshotStore(cfg.state_dir).files() == first  # nothing over the limit published
    assert not list(Path(cfg.state_dir).glob(".snapshot-*.tmp"))  # and nothing left half-written
    again = start_service(cfg, client)  # starts on the last snapshot it could write, then replays
    try:
        wait_until(lambda: len(again.service.model) == 2010, 30, "the rest replayed from Kafka")
    finally:
        again.halt()


# ------------------------------------------------------------------------------ 7. disk full
@contextlib.contextmanager
def _small_filesystem(path: Path, size: str):
    """A tmpfs of ``size`` mounted at ``path`` (root), else None: the caller falls back to RLIMIT_FSIZE."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = os.geteuid() == 0 and subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                                                   capture_output=True).returncode == 0
    try:
        yield mounted
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)


def _file_size_limit(limit: int):
    def apply() -> None:  # pragma: no cover - runs in the child
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def test_7_disk_full_means_bounded_retries_no_partial_files_and_a_non_zero_exit(kafka_broker, unique_name, tmp_path):
    state = tmp_path / "state"
    with _small_filesystem(state, "256k") as mounted:
        cfg = field_config(kafka_broker.bootstrap_servers, unique_name, state)
        log = tmp_path / "serve.log"
        preexec = None if mounted else _file_size_limit(200_000)
        process = serve(serve_args(cfg, "--snapshot-every-seconds", "0.2", "--snapshot-every-records", "1000000"),
                        log=log, preexec=preexec)
        try:
            port = metrics_port(log)
            wait_until(lambda: ready_status(port) == 200, 60, "ready")
            produce(cfg.bootstrap_servers, cfg.train_topic, [learn(i, prefix=f"{i}-" + "x" * 40) for i in range(3000)])
            wait_until(lambda: (scrape(port, "sgm_snapshot_failures_total") or 0) >= 1, 60, "a failed snapshot")
            time.sleep(8.0)  # idle with records pending: the retries back off (1 s, 2 s, 4 s, ...)
            failures = scrape(port, "sgm_snapshot_failures_total")
            assert 1 <= failures <= 5, failures  # was: one attempt per loop pass (136 in 20 s)
            assert not list(state.glob(".snapshot-*.tmp"))  # partial files removed
            assert terminate(process) == 1  # the final snapshot failed: say so
            lines = log_lines(log)
            assert any(line.get("msg") == "final snapshot failed; on restart the records since the last snapshot "
                       "are read again from Kafka" for line in lines)
            assert "Traceback" not in log.read_text()
        finally:
            kill_quietly(process)


# ------------------------------------------------------------------------------ 8. one-line errors
def _crafted_snapshot(directory: Path, change) -> None:
    import io
    import zipfile

    model = MNB("uc_pd_jm_dp")
    model.learn_one("a b c", "x", id="1")
    data = model.to_bytes({"train_topic": "t", "train_offsets": {"0": 1}})
    source, out = zipfile.ZipFile(io.BytesIO(data)), io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as archive:
        for info in source.infolist():
            raw = source.read(info.filename)
            archive.writestr(info.filename, change(raw) if info.filename == "meta.json" else raw)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "snapshot-000000000001.sgm").write_bytes(out.getvalue())


@contextlib.contextmanager
def _read_only_state_dir(path: Path):
    """A state directory holding a dead writer's leftover .tmp that this process cannot write (ro tmpfs as root)."""
    path.mkdir(parents=True)
    leftover = ".snapshot-000000000002.999999.tmp"
    if os.geteuid() == 0:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(path)], check=True)
        (path / leftover).write_bytes(b"partial")
        subprocess.run(["mount", "-o", "remount,ro", str(path)], check=True)
        try:
            yield path
        finally:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)
    else:
        (path / leftover).write_bytes(b"partial")
        path.chmod(0o555)
        try:
            yield path
        finally:
            path.chmod(0o755)


def test_8_every_start_up_mistake_is_one_line_and_exit_2(kafka_broker, tmp_path):
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    base = ["--bootstrap-servers", kafka_broker.bootstrap_servers, "--metrics-address", "127.0.0.1:0",
            "--log-level", "ERROR"]
    deep = b'{"format": "sgm-model-snapshot", "version": 1, "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    _crafted_snapshot(tmp_path / "deep", lambda raw: deep)
    _crafted_snapshot(tmp_path / "types", lambda raw: json.dumps({**json.loads(raw), "scalars": [1, 2]}).encode())
    _crafted_snapshot(tmp_path / "clock", lambda raw: json.dumps({**json.loads(raw), "clock": {"now": "x"}}).encode())
    cases = {
        "unreachable broker": ["--state-dir", str(tmp_path / "a"), "--bootstrap-servers", "127.0.0.1:1",
                               "--connect-timeout", "2", "--metrics-address", "127.0.0.1:0"],
        "negative mu": ["--state-dir", str(tmp_path / "b"), "--param", "mu=-5"],
        "unknown affix": ["--state-dir", str(tmp_path / "c"), "--model", "uc_xx_jm"],
        "metrics port in use": ["--state-dir", str(tmp_path / "d"), "--metrics-address", f"127.0.0.1:{busy.getsockname()[1]}"],
        "deeply nested snapshot header": ["--state-dir", str(tmp_path / "deep"), "--train-topic", "t"],
        "snapshot header of wrong types": ["--state-dir", str(tmp_path / "types"), "--train-topic", "t"],
        "snapshot clock of wrong type": ["--state-dir", str(tmp_path / "clock"), "--train-topic", "t"],
        "bad environment value": ["--state-dir", str(tmp_path / "e")],
    }
    env = {**os.environ, "SGM_MAX_POLL_RECORDS": "0"}
    with _read_only_state_dir(tmp_path / "ro") as read_only:
        cases["read-only state dir with a leftover .tmp"] = ["--state-dir", str(read_only)]
        started = {name: subprocess.Popen(
            [sys.executable, "-m", "sgm.consumers.cli", "serve", *base, *args], stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, env=env if name == "bad environment value" else None) for name, args in cases.items()}
        started["sgm feed, unreachable broker"] = subprocess.Popen(  # the load generator died the same way
            [sys.executable, "-m", "sgm.consumers.cli", "feed", "--bootstrap-servers", "127.0.0.1:1",
             "--connect-timeout", "2", "--docs", "5", "--log-level", "ERROR"], stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE)
        results = {name: (p.wait(120), p.stderr.read().decode()) for name, p in started.items()}
    busy.close()
    for name, (code, stderr) in results.items():
        lines = [line for line in stderr.splitlines() if not line.startswith("{")]  # JSON log lines aside
        assert code == 2, f"{name}: exit {code}\n{stderr[-2000:]}"
        command = "sgm feed: " if name.startswith("sgm feed") else "sgm serve: "
        assert len(lines) == 1 and lines[0].startswith(command), f"{name}: {stderr[-2000:]}"
        assert "Traceback" not in stderr, name
