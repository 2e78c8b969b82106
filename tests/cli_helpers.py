"""Running the installed ``sgm`` command as a user would: one-shot commands and background processes."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

#: The console script of the environment running the tests (what `pip install` put there).
SGM = str(Path(sys.executable).parent / "sgm")


def sgm(*args: str, timeout: float = 120, check: bool = True, cwd: str | os.PathLike | None = None,
        env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``sgm ARGS`` to completion; with ``check``, fail the test (showing stderr) on a non-zero exit."""
    done = subprocess.run([SGM, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env={**os.environ, **(env or {})})
    if check and done.returncode != 0:
        raise AssertionError(f"sgm {' '.join(args)} exited {done.returncode}\nstdout:\n{done.stdout[-3000:]}\n"
                             f"stderr:\n{done.stderr[-3000:]}")
    return done


class Background:
    """``sgm ARGS`` running in the background, its output in a file; stopped by its own pid."""

    def __init__(self, *args: str, log: Path, cwd: str | os.PathLike | None = None, new_session: bool = False) -> None:
        """``new_session``: its own process group, which a test can signal whole as a terminal's Ctrl-C does."""
        self.args, self.log_path = args, log
        self.handle = open(log, "wb")
        self.process = subprocess.Popen([SGM, *args], stdout=self.handle, stderr=subprocess.STDOUT, cwd=cwd,
                                        stdin=subprocess.DEVNULL, start_new_session=new_session)

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for(self, pattern: str, timeout: float) -> re.Match:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(pattern, self.output())
            if found:
                return found
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"sgm {' '.join(self.args)}: no {pattern!r} within {timeout} s "
                             f"(exit {self.process.poll()}):\n{self.output()[-3000:]}")

    def stop(self, sig: int = signal.SIGINT, timeout: float = 30) -> int:
        """Send ``sig`` and wait; returns the exit code (the process is killed if it does not stop)."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.handle.close()
        return self.process.returncode


def hold_state_dir(directory) -> subprocess.Popen:
    """Another process holding ``directory`` as its state directory (``SnapshotStore.claim``), as a running
    ``sgm serve`` does; the caller kills it."""
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from sgm.stream.snapshot_store import "
                               "SnapshotStore; SnapshotStore(sys.argv[1]).claim(); print('held', flush=True); "
                               "time.sleep(120)", str(directory)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder
