"""One line on stderr when ``sgm serve`` ends without its shutdown (a native crash, SIGKILL, the OOM killer).

A process killed by a signal prints nothing: no handler runs for SIGKILL, and a segfault on one of
librdkafka's own threads (which block signals) ends the process before Python's fault handler can
write (docs/RELIABILITY.md, "Crashes"). A process cannot report its own death, so a small watcher
process does: it holds the read end of a pipe whose write end only the service holds. Every exit that
runs Python's shutdown (a graceful stop, an error exit, an uncaught exception) writes ``done`` first
(``atexit``); end of file without it means the process died without shutting down. The watcher then
reads the dying process's exit status from ``/proc/PID/stat`` (its parent may reap it first: then the
signal is not known) and writes one line to the service's stderr.

This file is also the watcher: ``python -I -S crash_watch.py PID PROG`` (standard library only, no
sgm import: 11 MB resident, 40-70 ms to start, measured). It ignores SIGINT, SIGTERM and SIGHUP, so that a terminal's
Ctrl-C or a supervisor's signal to the whole process group leaves it there to see how the service ended.

Examples
--------
>>> describe_status(11 | 0x80)  # waitpid's encoding: SIGSEGV, with a core dump
'killed by SIGSEGV (a crash in native code)'
>>> describe_status(9)
'killed by SIGKILL (an operator, a supervisor or the out-of-memory killer)'
>>> describe_status(3 << 8)
'exited with status 3 without running its shutdown'
>>> describe_status(None)
'killed by a signal or crashed (its exit status went to its parent first)'
"""
from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import time

DONE = b"done"
#: The words every watcher line holds (what a log search or the chaos audit looks for).
DEATH_LINE = "ended without shutting down"

_WHY = {
    signal.SIGSEGV: "a crash in native code",
    signal.SIGBUS: "a crash in native code",
    signal.SIGILL: "a crash in native code",
    signal.SIGFPE: "a crash in native code",
    signal.SIGABRT: "an abort in native code",
    signal.SIGKILL: "an operator, a supervisor or the out-of-memory killer",
}


def describe_status(status: int | None) -> str:
    """Say how a process ended from its exit status in waitpid's encoding (None: not known)."""
    if status is None:
        return "killed by a signal or crashed (its exit status went to its parent first)"
    signum = status & 0x7F
    if signum == 0:  # exit() from Python writes DONE first: this is os._exit or a native exit()
        return f"exited with status {status >> 8} without running its shutdown"
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    why = _WHY.get(signum)
    return f"killed by {name}" + (f" ({why})" if why else "")


def stat_fields(pid: int) -> list[bytes] | None:
    """The fields of /proc/PID/stat after the command name (which may hold spaces): ``[0]`` is the state
    (``b"Z"``: a zombie), ``[49]`` the exit status; None when there is no such process (or no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def zombie_status(pid: int, wait: float = 0.5) -> int | None:
    """The exit status of the dying or dead process ``pid`` (field 52 of /proc/PID/stat, Linux >= 3.5), or None.

    The kernel sets it as the process starts to exit, before its files close (which ends the pipe),
    so it is read at once: the parent may reap the process (and /proc/PID with it) any moment after.
    A status of 0 is only believed from a zombie (a process still running shows 0 too). None when the
    process is gone or shows no status within ``wait`` seconds.
    """
    deadline = time.monotonic() + wait
    while True:
        fields = stat_fields(pid)
        if fields is None:
            return None
        if len(fields) > 49 and (fields[49] != b"0" or fields[0] == b"Z"):
            return int(fields[49])
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.005)


def watch(pid: int, prog: str, read_fd: int = 0) -> int:
    """The watcher's loop: read until end of file; without ``done``, write the one line."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    seen = b""
    while True:
        chunk = os.read(read_fd, 64)  # (PEP 475: retried by Python when a signal interrupts it)
        if not chunk:
            break
        seen += chunk
    if DONE in seen:
        return 0
    line = (f"{prog}: the process (pid {pid}) {DEATH_LINE}: {describe_status(zombie_status(pid))}; "
            'see docs/RELIABILITY.md ("Crashes")\n')
    try:
        sys.stderr.write(line)
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):  # no stderr to write to
        pass
    return 1


_started: dict[int, subprocess.Popen | None] = {}


def start_crash_watch(prog: str = "sgm serve") -> subprocess.Popen | None:
    """Start the watcher of this process, once (a second call returns the first one's); None where it cannot
    start (best effort: the service runs anyway).

    The pipe's write end is not inheritable (PEP 446), so no other child of the service (an embedded
    broker, say) keeps it open after the service has died.
    """
    pid = os.getpid()
    if pid not in _started:  # (keyed by pid: a forked child watches itself)
        _started[pid] = _start(prog)
    return _started[pid]


def watcher_of(pid: int) -> int | None:
    """The pid of the running crash watcher of process ``pid`` (its child), or None.

    >>> watcher_of(0) is None  # no such process
    True
    """
    try:
        children = open(f"/proc/{pid}/task/{pid}/children").read().split()
    except FileNotFoundError:  # a kernel without CONFIG_PROC_CHILDREN (or no such process): every process is a candidate
        if not os.path.exists(f"/proc/{pid}"):
            return None
        children = [entry for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return None
    for child in children:
        try:
            argv = open(f"/proc/{child}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if len(argv) > 4 and argv[3].endswith(b"crash_watch.py") and argv[4] == str(pid).encode():
            fields = stat_fields(int(child))
            if fields and fields[0] != b"Z":  # (None: it ended meanwhile)
                return int(child)
    return None


def _start(prog: str) -> subprocess.Popen | None:
    if not sys.platform.startswith("linux"):
        return None  # the exit status in /proc/PID/stat is Linux's
    try:
        read_end, write_end = os.pipe()
    except OSError:
        return None
    try:
        watcher = subprocess.Popen([sys.executable, "-I", "-S", os.path.abspath(__file__), str(os.getpid()), prog],
                                   stdin=read_end, stdout=subprocess.DEVNULL, close_fds=True)
    except OSError:
        os.close(write_end)
        return None
    finally:
        os.close(read_end)

    def shut_down_cleanly() -> None:
        try:
            os.write(write_end, DONE)
            os.close(write_end)
        except OSError:
            pass

    atexit.register(shut_down_cleanly)
    return watcher


if __name__ == "__main__":
    sys.exit(watch(int(sys.argv[1]), sys.argv[2]))
