"""One writer per ``--state-dir`` (stream/snapshot_store.py: ``SnapshotStore.claim``).

Two services started on one state directory (a copied command line, ``--scale trainer=2`` on a shared
volume) both numbered, pruned and set aside snapshots in it, silently. The second now stops at start
with one line naming the holder's pid, exit 2; a holder that died (even by SIGKILL) holds nothing, and
readers (``sgm stats``) are not refused.
"""
from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from sgm.stream.broker import free_port
from sgm.stream.snapshot_store import SnapshotStore, StateDirInUse
from tests.cli_helpers import hold_state_dir, sgm

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX record locks")


def test_a_second_sgm_serve_on_a_state_dir_in_use_stops_in_one_line(tmp_path):
    state = tmp_path / "state"
    holder = hold_state_dir(state)
    try:
        done = subprocess.run([sys.executable, "-m", "sgm.consumers.cli", "serve", "--bootstrap-servers",
                               f"127.0.0.1:{free_port()}", "--connect-timeout", "60", "--state-dir", str(state),
                               "--metrics-address", "127.0.0.1:0"], capture_output=True, text=True, timeout=120)
        assert done.returncode == 2, done.stderr[-2000:]
        assert done.stderr.strip().splitlines()[-1] == (
            f"sgm serve: --state-dir {str(state)!r} is in use by another process (pid {holder.pid}): "
            "give each sgm serve its own state directory")
        assert "Traceback" not in done.stderr
        sgm("stats", "--state-dir", str(state), check=False)  # a reader is never refused (nothing to read: exit 2)
    finally:
        holder.kill()
        holder.wait()
    # the holder died by SIGKILL: the kernel released its lock
    SnapshotStore(state).claim()


def test_claim_is_refused_while_another_process_holds_it_and_free_after(tmp_path):
    holder = hold_state_dir(tmp_path)
    try:
        with pytest.raises(StateDirInUse, match=rf"pid {holder.pid}\)"):
            SnapshotStore(tmp_path).claim()
    finally:
        holder.send_signal(signal.SIGTERM)
        holder.wait()
    store = SnapshotStore(tmp_path)
    store.claim()
    store.release()


def test_a_file_system_without_locks_runs_unguarded_with_a_warning(tmp_path, monkeypatch, caplog):
    # ENOLCK (some NFS mounts): refusing to start there would stop every service on such a volume
    import errno
    import fcntl
    import logging

    def no_locks(fd, operation):  # noqa: ANN001
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "lockf", no_locks)
    with caplog.at_level(logging.WARNING):
        SnapshotStore(tmp_path).claim()
    assert any("cannot be locked" in m for m in caplog.messages), caplog.messages
