"""``sgm demo``, the README's first command: it runs to its summary, and Ctrl-C ends it in one line.

The demo is the installed ``sgm`` against its own embedded broker (Tansu), as a user runs it; a
smaller stream (``--docs``) keeps it short.
"""
from __future__ import annotations

import os
import re
import signal
import socket
import sys

import pytest

from tests.cli_helpers import Background, hold_state_dir, sgm

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Tansu ships for Linux here")


def test_the_demo_scores_every_document_and_dead_letters_every_malformed_record():
    done = sgm("demo", "--docs", "2000", "--quiet", timeout=300)
    scored = re.search(r"scored\s+(\d+) of (\d+) documents", done.stdout)
    assert scored and scored.group(1) == scored.group(2) and int(scored.group(2)) > 1500, done.stdout[-2000:]
    dead = re.search(r"dead letters\s+(\d+) \(expected (\d+) malformed\)", done.stdout)
    assert dead and dead.group(1) == dead.group(2) and int(dead.group(2)) > 0, done.stdout[-2000:]
    accuracy = float(re.search(r"accuracy\s+([0-9.]+) prequential", done.stdout).group(1))
    assert accuracy > 0.8, done.stdout[-2000:]
    assert "Traceback" not in done.stdout + done.stderr


@pytest.mark.parametrize("when", ["stream:", r"\[\s*\d+\.\ds\] sent"])  # generating the stream; feeding it
def test_ctrl_c_ends_the_demo_in_one_line_after_stopping_the_service_and_the_broker(tmp_path, when):
    # Ctrl-C in a terminal signals the whole foreground process group: here the demo runs in a session of its
    # own and SIGINT goes to that group. Before: a KeyboardInterrupt traceback; the broker, in the same group,
    # died first, so the service's clients logged connection errors (level=error), and the scratch state
    # folder went before the service had stopped ("snapshot failed; will retry ... No such file or directory").
    demo = Background("demo", "--docs", "20000", "--rate", "2000", log=tmp_path / "demo.log", new_session=True)
    try:
        port = int(demo.wait_for(r"broker 127\.0\.0\.1:(\d+);", 300).group(1))
        demo.wait_for(when, 300)
        os.killpg(demo.process.pid, signal.SIGINT)
        code = demo.process.wait(90)
    finally:
        if demo.process.poll() is None:
            os.killpg(demo.process.pid, signal.SIGKILL)
        demo.stop()
    out = demo.output()
    assert code == 130, out[-3000:]
    assert out.rstrip().splitlines()[-1] == "sgm demo: interrupted", out[-3000:]
    assert "Traceback" not in out and "level=error" not in out, out[-3000:]
    with socket.socket() as probe:  # the broker is gone with the demo
        assert probe.connect_ex(("127.0.0.1", port)) != 0


def test_a_start_up_error_of_the_demos_service_is_one_line(tmp_path):
    # a state directory another process holds: the service's StartupError was re-raised as a traceback
    holder = hold_state_dir(tmp_path)
    try:
        done = sgm("demo", "--state-dir", str(tmp_path), "--docs", "200", check=False, timeout=300)
    finally:
        holder.kill()
        holder.wait()
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1].startswith(f"sgm demo: --state-dir {str(tmp_path)!r} is in use"), \
        done.stderr[-2000:]
    assert "Traceback" not in done.stderr
