"""``sgm serve`` never dies without a word (consumers/crash_watch.py, docs/RELIABILITY.md "Crashes").

A death no handler sees (SIGKILL, the out-of-memory killer, a segfault on one of librdkafka's own
threads) is said in one line by the service's watcher process; a graceful stop or a start-up error is
not. The processes are real: ``sgm serve`` against a broker that never comes (its start-up loop) and,
for the crash that made this necessary, against Tansu with the training topic deleted under it.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sgm.consumers import crash_watch
from sgm.stream.broker import EmbeddedBroker, free_port
from tests.field_fault_helpers import field_config, learn, produce, serve, serve_args, terminate, wait_until

LINE = "ended without shutting down"


def _serve_waiting_for_a_broker(tmp_path) -> tuple[subprocess.Popen, Path]:
    log = tmp_path / "serve.log"
    process = serve(["--bootstrap-servers", f"127.0.0.1:{free_port()}", "--connect-timeout", "120",
                     "--state-dir", str(tmp_path / "state"), "--metrics-address", "127.0.0.1:0",
                     "--log-level", "INFO"], log=log)
    # the watcher starts before the configuration line, so once the line is there it is watching
    wait_until(lambda: b'"configuration"' in log.read_bytes() or process.poll() is not None, 60,
               "the configuration line")
    assert process.poll() is None, log.read_text()[-2000:]
    wait_until(lambda: crash_watch.watcher_of(process.pid) is not None, 10, "the watcher process")
    return process, log


def _line_without_reaping(log: Path, timeout: float = 30.0) -> str:
    """The watcher's line, read before the test reaps the service (so its exit status is still readable)."""
    wait_until(lambda: LINE in log.read_text(), timeout, "the watcher's line")
    lines = [line for line in log.read_text().splitlines() if LINE in line]
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize("signum, said", [(signal.SIGKILL, "killed by SIGKILL (an operator, a supervisor or the "
                                                               "out-of-memory killer)"),
                                          (signal.SIGSEGV, "killed by SIGSEGV (a crash in native code)")])
def test_a_death_no_handler_sees_is_said_in_one_line(tmp_path, signum, said):
    process, log = _serve_waiting_for_a_broker(tmp_path)
    try:
        os.kill(process.pid, signum)
        line = _line_without_reaping(log)
        assert process.wait(30) == -signum
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert line == (f"sgm serve: the process (pid {process.pid}) {LINE}: {said}; "
                    'see docs/RELIABILITY.md ("Crashes")')


def test_a_graceful_stop_and_a_start_up_error_say_nothing_more(tmp_path):
    process, log = _serve_waiting_for_a_broker(tmp_path)
    watcher = crash_watch.watcher_of(process.pid)
    assert watcher is not None
    process.send_signal(signal.SIGTERM)
    assert process.wait(60) == 0, log.read_text()[-2000:]
    wait_until(lambda: not _alive(watcher), 10, "the watcher to end")
    assert LINE not in log.read_text()

    # a start-up error: its own one line and exit 2, nothing from the watcher
    done = subprocess.run([sys.executable, "-m", "sgm.consumers.cli", "serve", "--bootstrap-servers",
                           f"127.0.0.1:{free_port()}", "--connect-timeout", "1", "--state-dir", str(tmp_path / "s2"),
                           "--metrics-address", "127.0.0.1:0"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2  # (run() returns once the watcher, holding the stderr pipe too, has ended)
    assert "sgm serve: could not reach Kafka" in done.stderr and LINE not in done.stderr, done.stderr[-2000:]


def test_the_watcher_reads_a_zombie_status_and_says_nothing_after_done():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        os.kill(child.pid, signal.SIGKILL)
        # not reaped: a zombie whose status /proc still holds
        assert crash_watch.zombie_status(child.pid, wait=5.0) == signal.SIGKILL
    finally:
        child.wait()
    assert crash_watch.zombie_status(child.pid, wait=0.0) is None  # reaped: gone

    for written, expected in ((crash_watch.DONE, 0), (b"", 1)):
        read_end, write_end = os.pipe()
        os.write(write_end, written)
        os.close(write_end)
        script = ("import sys; sys.path.insert(0, sys.argv[1]); import crash_watch; "
                  "sys.exit(crash_watch.watch(999999999, 'prog'))")
        done = subprocess.run([sys.executable, "-I", "-S", "-c", script, str(Path(crash_watch.__file__).parent)],
                              stdin=read_end, capture_output=True, text=True, timeout=60)
        os.close(read_end)
        assert done.returncode == expected
        assert (LINE in done.stderr) == (expected == 1), done.stderr
        if expected:  # no such process: the status is not known, and the line says so
            assert "killed by a signal or crashed (its exit status went to its parent first)" in done.stderr


def test_a_training_topic_deleted_under_the_confluent_client_never_ends_the_service_silently(tmp_path):
    """librdkafka 2.16 on Tansu segfaults on one of its own threads when an assigned topic is deleted
    (docs/RELIABILITY.md): the process may survive a fixed client, but it never dies without the line."""
    from confluent_kafka.admin import AdminClient

    log = tmp_path / "serve.log"
    with EmbeddedBroker() as broker:
        cfg = field_config(broker.bootstrap_servers, "crashwatch", tmp_path / "state")
        process = serve(serve_args(cfg, "--create-topics", "true", "--log-level", "INFO"), log=log)
        try:
            wait_until(lambda: b'"service started"' in log.read_bytes() or process.poll() is not None, 120,
                       "the service to start")
            assert process.poll() is None, log.read_text()[-3000:]
            produce(broker.bootstrap_servers, cfg.train_topic, [learn(i) for i in range(20)])
            time.sleep(1.0)  # let the trainer fetch from the topic: the crash needs an assigned, fetched partition
            admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
            for future in admin.delete_topics([cfg.train_topic]).values():
                future.result(30)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and LINE not in log.read_text():
                time.sleep(0.1)
            died = LINE in log.read_text()
            if not died:  # no line yet: then the process must be alive (a client that survives the deletion)
                assert _alive(process.pid), log.read_text()[-3000:]
        finally:
            if process.poll() is None:
                terminate(process)
    if died:
        assert f"sgm serve: the process (pid {process.pid}) {LINE}: killed by SIG" in log.read_text()
        assert process.returncode < 0


def _alive(pid: int) -> bool:
    fields = crash_watch.stat_fields(pid)
    return bool(fields) and fields[0] != b"Z"


def test_a_kill_in_the_first_moments_is_said_too(tmp_path):
    # `sgm serve` starts its watcher before the ~0.5 s of imports that build the parser: a kill while the process
    # is still importing (no configuration line yet) is said like any other
    log = tmp_path / "serve.log"
    process = serve(["--bootstrap-servers", f"127.0.0.1:{free_port()}", "--connect-timeout", "120",
                     "--state-dir", str(tmp_path / "state"), "--metrics-address", "127.0.0.1:0"], log=log)
    try:
        wait_until(lambda: crash_watch.watcher_of(process.pid) is not None or process.poll() is not None, 30,
                   "the watcher", interval=0.002)
        assert b'"configuration"' not in log.read_bytes()  # still starting
        os.kill(process.pid, signal.SIGKILL)
        line = _line_without_reaping(log)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
    assert "killed by SIGKILL" in line, line


def test_the_watcher_is_found_without_proc_children_too(tmp_path, monkeypatch):
    # a kernel without CONFIG_PROC_CHILDREN has no /proc/PID/task/PID/children: every process is looked at instead
    process, log = _serve_waiting_for_a_broker(tmp_path)
    try:
        found = crash_watch.watcher_of(process.pid)
        real_open = open

        def no_children(path, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003
            if str(path).endswith("/children"):
                raise FileNotFoundError(path)
            return real_open(path, *args, **kwargs)

        monkeypatch.setattr(crash_watch, "open", no_children, raising=False)
        assert crash_watch.watcher_of(process.pid) == found is not None
        assert crash_watch.watcher_of(0) is None
    finally:
        terminate(process)
