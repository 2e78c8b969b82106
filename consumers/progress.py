"""A one-line progress display on stderr (sgm learn, score, tune): counts, rate, elapsed time, and a bar when the total is known.

Drawn only when enabled (by default: when the stream is a terminal), at most
five times a second, so a loop can call :meth:`ProgressLine.update` per item.

Examples
--------
>>> import io
>>> out = io.StringIO()
>>> line = ProgressLine("learn", enabled=True, stream=out, clock=iter([0.0, 1.0, 2.0]).__next__)
>>> line.update(sent=10, skipped=1)
>>> line.close()
>>> out.getvalue().splitlines()[-1].split("\\r")[-1].rstrip()
'learn: 10 sent, 1 skipped, 5.0/s, 2.0s'
"""
from __future__ import annotations

import sys
import time
from typing import Callable, TextIO

__all__ = ["ProgressLine"]


class ProgressLine:
    """Counts of named things (``sent``, ``skipped``...) and their rate, redrawn in place.

    Parameters
    ----------
    label : str
        Printed first (the command).
    total : int, optional
        Items expected: adds a bar and a percentage (the first count is the one that advances it).
    enabled : bool, optional
        Draw at all; default: when ``stream`` is a terminal.
    stream : text file, optional
        Default ``sys.stderr``.
    clock : callable, optional
        Seconds (``time.monotonic``); for tests.
    """

    def __init__(self, label: str, total: int | None = None, enabled: bool | None = None,
                 stream: TextIO | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream or sys.stderr
        self.enabled = _isatty(self.stream) if enabled is None else enabled
        self.label, self.total, self.clock = label, total, clock
        self.counts: dict[str, int] = {}
        self.started = clock()
        self.drawn = -1.0
        self.width = 0

    def update(self, **counts: int) -> None:
        """Add to the named counts and redraw (throttled)."""
        for name, value in counts.items():
            self.counts[name] = self.counts.get(name, 0) + value
        if self.enabled:
            now = self.clock()
            finished = self.total is not None and next(iter(self.counts.values()), 0) >= self.total
            if now - self.drawn >= 0.2 or finished:
                self.drawn = now
                self._draw(now)

    def text(self, now: float | None = None) -> str:
        now = self.clock() if now is None else now
        elapsed = max(now - self.started, 1e-9)
        parts = [f"{value:,} {name}" for name, value in self.counts.items()]
        first = next(iter(self.counts.values()), 0)
        head = f"{self.label}: "
        if self.total:
            share = min(first / self.total, 1.0)
            head += f"[{'#' * int(share * 20)}{'.' * (20 - int(share * 20))}] {share:6.1%} "
        rate = first / elapsed
        return head + ", ".join(parts) + (f", {rate:,.1f}/s" if rate < 10 else f", {rate:,.0f}/s") + f", {elapsed:.1f}s"

    def _draw(self, now: float) -> None:
        text = self.text(now)
        self.stream.write("\r" + text + " " * max(self.width - len(text), 0))
        self.stream.flush()
        self.width = len(text)

    def close(self, keep: bool = True) -> None:
        """Draw the final counts and end the line (``keep=False``: erase it instead)."""
        if not self.enabled:
            return
        if keep:
            self._draw(self.clock())
            self.stream.write("\n")
        elif self.drawn >= 0:
            self.stream.write("\r" + " " * self.width + "\r")
        self.stream.flush()


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
