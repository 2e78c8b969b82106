"""The ``sgm serve`` processes of a fault campaign: started, killed, restarted, stopped, and read from."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from ..crash_watch import watcher_of
from ..logs import metrics_port_in_log

#: The repository root: the working directory of every process.
ROOT = Path(__file__).resolve().parents[2]


def die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """``preexec_fn`` of a child process: SIGKILL it when its parent dies (Linux; elsewhere nothing)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - best effort, Linux only
        pass



def json_log_lines(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSON-lines log file; lines that are not one (a traceback, plain text) are left out."""
    out = []
    with open(path, "rb") as handle:
        for raw in handle:
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if isinstance(line, dict):
                out.append(line)
    return out

class Supervised:
    """One ``sgm serve`` process under the campaign's control.

    Parameters
    ----------
    name, role : str
        ``trainer-0``, ``classifier-1``, ...; ``trainer`` or ``classifier``.
    args : list of str
        The command line.
    state_dir, log_path : Path
        Its state directory (kept across restarts) and the log file its stderr is appended to.
    """

    def __init__(self, name: str, role: str, args: list[str], state_dir: Path, log_path: Path) -> None:
        self.name, self.role, self.args = name, role, args
        self.state_dir, self.log_path = state_dir, log_path
        self.process: subprocess.Popen | None = None
        self.starts = 0
        self.kills = 0
        self.watched_kills = 0  # kills of a process whose crash watcher was running (they must be said)
        self.crashes: list[dict[str, Any]] = []
        self.stopped = False  # stopped on purpose (stop_for_now): not a crash, not restarted by check()
        self.lock = threading.Lock()

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            log.write(f'{{"msg": "chaos: start #{self.starts + 1}", "ts": {time.time():.3f}}}\n'.encode())
            self.process = subprocess.Popen(self.args, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                            stderr=log, preexec_fn=die_with_parent if os.name == "posix" else None)
        self.starts += 1

    def kill(self) -> None:
        with self.lock:
            if self.process is not None and self.process.poll() is None:
                # a process killed in its first ~50 ms has no watcher yet: nothing can say that death
                self.watched_kills += watcher_of(self.process.pid) is not None
                self.process.send_signal(signal.SIGKILL)
                self.process.wait(30)
            self.kills += 1
            self.start()

    def check(self) -> bool:
        """Restart the process if it exited on its own (a crash); True if it did."""
        with self.lock:
            if self.stopped or self.process is None or self.process.poll() is None:
                return False
            code = self.process.returncode
            self.crashes.append({"returncode": code, "at": time.time(), "log_tail": self.log_tail(1500)})
            self.start()
            return True

    def stop_for_now(self, timeout: float = 60.0) -> int | None:
        """SIGTERM and wait (a graceful stop, as an operator's restart); :meth:`resume` starts it again."""
        with self.lock:
            self.stopped = True
        return self.terminate(timeout)

    def resume(self) -> None:
        with self.lock:
            self.stopped = False
            self.start()

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
        return json_log_lines(self.log_path)

    def log_tail(self, size: int = 2000) -> str:
        with open(self.log_path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - size))
            return handle.read().decode("utf-8", "replace")

    def metrics_port(self) -> int | None:
        """Port of the current run's metrics endpoint (from its 'service started' log line)."""
        with open(self.log_path, "rb") as handle:
            return metrics_port_in_log(handle, restart_marker=b'"chaos: start')

    def ready(self) -> bool:
        """Whether the running process answers ``/ready`` with 200 (caught up; a classifier then scores)."""
        port = self.metrics_port()
        if port is None:
            return False
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=2.0) as response:
                return response.status == 200
        except OSError:
            return False

    def _metrics(self) -> str | None:
        port = self.metrics_port()
        if port is None:
            return None
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2.0) as response:
                return response.read().decode()
        except OSError:
            return None

    def training_offset(self) -> int | None:
        """The running process's next training offset, from its metrics endpoint (None if unreachable)."""
        text = self._metrics()
        found = text and re.search(r'^sgm_training_offset\{partition="0"\} ([0-9.e+]+)$', text, re.M)
        return int(float(found.group(1))) if found else None

    def scoring_partitions(self) -> int:
        """Scoring partitions the running process holds now (its ``sgm_consumer_lag{source="score"}`` series)."""
        text = self._metrics() or ""
        return len(re.findall(r'^sgm_consumer_lag\{[^}]*source="score"[^}]*\} ', text, re.M))
