"""Model snapshots on local disk, written atomically, with the training offsets they include.

A snapshot file is the model archive of :mod:`model.snapshot` whose ``extra``
metadata records, per training partition, the next offset to read: the model
state holds exactly the records before those offsets. Restoring a snapshot and
seeking the training consumer there means no training record is lost or
counted twice, although Kafka delivers at least once (docs/PROTOCOL.md).

Atomicity: the bytes go to a temporary file in the same directory, which is
fsynced, renamed over the final name (an atomic step on POSIX file systems),
and the directory is fsynced. A crash at any point leaves either the previous
snapshots or the new one, never a torn file. Files are named by a sequence
number; the highest is the latest; older ones beyond ``keep`` are deleted.

A write that fails (disk full, permissions) removes its temporary file; a
snapshot that would grow beyond ``max_bytes`` is abandoned as soon as it does
(:class:`SnapshotTooLarge`): the store never publishes a file that
:meth:`latest` would refuse to load.

One process writes a directory: :meth:`SnapshotStore.claim` takes a POSIX lock on its ``.lock`` file
(released by the kernel when the process ends, however it ends), so a second service started on the
same ``--state-dir`` stops at start (:class:`StateDirInUse`) instead of numbering, pruning and setting
aside the first one's snapshots under it. Readers (``sgm stats``, ``sgm score --state-dir``) claim nothing.
"""
from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable

from sgm.model.persistence import DEFAULT_MAX_BYTES, SnapshotError

_NAME = re.compile(r"^snapshot-(\d{12})\.sgm$")
log = logging.getLogger(__name__)


class StateDirInUse(OSError):
    """Another process holds the snapshot directory (:meth:`SnapshotStore.claim`)."""


class SnapshotTooLarge(SnapshotError):
    """A snapshot being written grew beyond the store's ``max_bytes``: it was abandoned, not published."""


class _LimitedFile:
    """A binary file that refuses to grow beyond ``limit`` bytes (raises :class:`SnapshotTooLarge`)."""

    def __init__(self, handle: BinaryIO, limit: int) -> None:
        self._handle, self._limit = handle, limit

    def write(self, data) -> int:
        if self._handle.tell() + len(data) > self._limit:
            raise SnapshotTooLarge(f"the snapshot grew beyond the {self._limit}-byte limit (--max-snapshot-bytes); "
                                   "a snapshot that large would be refused at start, so it was not written")
        return self._handle.write(data)

    def __getattr__(self, name: str):  # tell, seek, flush, seekable, ...: the file's own
        return getattr(self._handle, name)


@dataclass(frozen=True)
class SavedSnapshot:
    path: Path
    bytes: int
    seconds: float
    written_at: float


class SnapshotStore:
    """A directory of numbered snapshot files owned by one process.

    Examples
    --------
    >>> import tempfile
    >>> store = SnapshotStore(tempfile.mkdtemp(), keep=2)
    >>> store.latest() is None
    True
    >>> for payload in (b"one", b"two", b"three"):
    ...     _ = store.save(payload)
    >>> store.latest()[1]
    b'three'
    >>> len(store.files())
    2
    """

    def __init__(self, directory: str | os.PathLike, *, keep: int = 3, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if keep < 1:
            raise ValueError("keep at least one snapshot")
        self.directory = Path(directory)
        self.keep = keep
        self.max_bytes = max_bytes
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock_fd: int | None = None

    def claim(self) -> None:
        """Hold the directory for this process until :meth:`release` or the process's end; :class:`StateDirInUse`
        when another process holds it (the message names its pid). Where POSIX locks do not exist, nothing.

        A POSIX record lock (``lockf``): per process, so a second claim in the same process (a test restarting a
        service in place) is not refused, and no child process inherits it.

        >>> import tempfile
        >>> store = SnapshotStore(tempfile.mkdtemp())
        >>> store.claim(); store.claim()  # this process again: fine
        >>> store.release()
        """
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            return
        if self._lock_fd is not None:
            return
        fd = os.open(self.directory / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EACCES, errno.EAGAIN):  # no locks here (ENOLCK: some NFS mounts): run unguarded
                os.close(fd)
                log.warning("the state directory cannot be locked; nothing stops a second service from using it",
                            extra={"state_dir": str(self.directory), "error": exc.strerror or str(exc)})
                return
            holder = os.read(fd, 32).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise StateDirInUse(f"--state-dir {str(self.directory)!r} is in use by another process (pid {holder}): "
                                "give each sgm serve its own state directory") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd

    def release(self) -> None:
        """Let go of :meth:`claim` (closing the lock file releases the lock)."""
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._lock_fd)
            self._lock_fd = None

    def remove_leftovers(self) -> int:
        """Delete temporary files of writers that died mid-write (never published).

        Only the process that owns the directory calls this at start; files of
        a live process (a pid that still exists) are left alone.
        """
        removed = 0
        for leftover in self.directory.glob(".snapshot-*.tmp"):
            try:
                pid = int(leftover.name.split(".")[-2])
            except (ValueError, IndexError):
                continue
            if pid != os.getpid() and _alive(pid):
                continue
            leftover.unlink(missing_ok=True)
            removed += 1
        return removed

    def files(self) -> list[Path]:
        """Snapshot files, oldest first."""
        found = [(int(m.group(1)), p) for p in self.directory.iterdir() if (m := _NAME.match(p.name))]
        return [p for _, p in sorted(found)]

    def save(self, data: bytes | Callable[[BinaryIO], None]) -> SavedSnapshot:
        """Publish a snapshot atomically: ``data``, or what ``data(handle)`` writes to the file."""
        started = time.perf_counter()
        existing = self.files()
        number = int(_NAME.match(existing[-1].name).group(1)) + 1 if existing else 1
        final = self.directory / f"snapshot-{number:012d}.sgm"
        temporary = self.directory / f".snapshot-{number:012d}.{os.getpid()}.tmp"
        try:
            with open(temporary, "wb") as handle:
                limited = _LimitedFile(handle, self.max_bytes)
                if callable(data):
                    data(limited)  # streamed: no copy of the snapshot in memory
                else:
                    limited.write(data)
                handle.flush()
                size = handle.tell()
                os.fsync(handle.fileno())
            os.replace(temporary, final)
        except BaseException:
            try:
                temporary.unlink(missing_ok=True)  # never leave a partial file behind (disk full, too large)
            except OSError:
                pass  # the original error says what is wrong with the directory
            raise
        _fsync_directory(self.directory)
        for old in self.files()[: -self.keep]:
            old.unlink(missing_ok=True)
        return SavedSnapshot(final, size, time.perf_counter() - started, time.time())

    def set_aside(self, name: str) -> str | None:
        """Move every snapshot into the subdirectory ``name`` (never loaded from there); its path, or None.

        For a model that is rebuilt from scratch: the old state is kept for the
        operator, out of the way of :meth:`latest`.
        """
        files = self.files()
        if not files:
            return None
        target = self.directory / name
        target.mkdir(parents=True, exist_ok=True)
        for path in files:
            os.replace(path, target / path.name)
        _fsync_directory(self.directory)
        return str(target)

    def latest(self) -> tuple[Path, bytes] | None:
        """The newest snapshot's path and bytes, or ``None`` if there is none.

        Raises :class:`SnapshotError` if it is larger than ``max_bytes``: a
        process must not start on a snapshot it refuses, nor silently fall back
        to an older one (that would hide the damage; an operator decides).
        """
        path = self.latest_path()
        return None if path is None else (path, path.read_bytes())

    def latest_path(self) -> Path | None:
        """The newest snapshot's path (checked against ``max_bytes`` as :meth:`latest`), to be read as a file."""
        files = self.files()
        if not files:
            return None
        path = files[-1]
        size = path.stat().st_size
        if size > self.max_bytes:
            raise SnapshotError(f"{path} is {size} bytes, above the {self.max_bytes}-byte limit; refusing to start")
        return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _fsync_directory(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
