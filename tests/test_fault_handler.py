"""A fault in native code never ends ``sgm serve`` without a word (docs/RELIABILITY.md, "A topic deleted ...").

``sgm serve`` enables Python's fault handler: a SIGSEGV on one of its Python threads (a compiled
kernel, a Kafka client's ``poll``) writes ``Fatal Python error: Segmentation fault`` and every
thread's stack to stderr before the process ends with the signal. Without it the process died
with exit status 139 and nothing on stderr. The signal is sent from outside here: a real fault
cannot be caused on purpose without crashing the test's own process.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from sgm.stream.broker import free_port
from tests.field_fault_helpers import serve


def test_a_segfault_in_sgm_serve_prints_the_signal_and_the_stacks(tmp_path):
    log = tmp_path / "serve.log"
    # a broker that never comes: the service waits for it in its start-up loop, a state easy to reach
    process = serve(["--bootstrap-servers", f"127.0.0.1:{free_port()}", "--connect-timeout", "120",
                     "--state-dir", str(tmp_path / "state"), "--metrics-address", "127.0.0.1:0",
                     "--log-level", "INFO"], log=log)
    try:
        deadline = time.monotonic() + 60
        while b'"configuration"' not in log.read_bytes():
            assert process.poll() is None, log.read_text()[-2000:]
            assert time.monotonic() < deadline, "no configuration line within 60 s"
            time.sleep(0.1)
        process.send_signal(signal.SIGSEGV)
        assert process.wait(30) == -signal.SIGSEGV
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    stderr = log.read_text()
    assert "Fatal Python error: Segmentation fault" in stderr
    assert "consumers/commands/serve.py" in stderr  # the main thread's stack, down to the command


def test_sgm_serve_with_stderr_closed_still_ends_in_its_one_line_and_exit_2(tmp_path):
    # fd 2 closed (`sgm serve 2>&-`): Python sets sys.stderr to None and faulthandler.enable() raised RuntimeError,
    # so the start-up error became exit 1 with nothing said; print() then falls back to stdout
    done = subprocess.run([sys.executable, "-m", "sgm.consumers.cli", "serve", "--bootstrap-servers",
                           f"127.0.0.1:{free_port()}", "--connect-timeout", "1", "--state-dir", str(tmp_path / "s"),
                           "--metrics-address", "127.0.0.1:0"], stdout=subprocess.PIPE, preexec_fn=lambda: os.close(2),
                          timeout=120)
    assert done.returncode == 2
    assert b"sgm serve: could not reach Kafka" in done.stdout
