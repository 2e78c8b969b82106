"""The Tansu workaround: exact end offsets from a fetch's high watermark.

Tansu's ListOffsets answers the base offset of the last record *batch* + 1, not
the log end, so ``end_offsets`` would under-report a partition whose last batch
holds several records. A fetch response's high watermark is right, so a
consumer corrects the reported ends by fetching from ``end - 1`` with a private,
group-less probe consumer and reading the watermark. This module holds the
procedure; each client supplies an :class:`EndOffsetProbe` (its few library
calls). It runs only with ``KafkaConfig(probe_end_offsets=True)``, the default;
it never lowers an end offset, so it is harmless on Apache Kafka.
"""
from __future__ import annotations

import abc
import time
from collections.abc import Callable, Mapping

from .values import TopicPartition

__all__ = ["EndOffsetProbe", "correct_end_offsets"]


class EndOffsetProbe(abc.ABC):
    """A client's group-less consumer used only to read fetch high watermarks."""

    @abc.abstractmethod
    def fetch_from(self, positions: Mapping[TopicPartition, int]) -> None:
        """Assign exactly ``positions``' partitions, each to be fetched from its offset."""

    @abc.abstractmethod
    def answered(self, wait: float) -> set[TopicPartition]:
        """Wait up to ``wait`` seconds for fetch responses; the partitions known to have answered."""

    @abc.abstractmethod
    def high_watermark(self, tp: TopicPartition) -> int | None:
        """The high watermark the last fetch of ``tp`` reported (``None``: none yet)."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Drop the assignment (the probe is kept for the next call)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the probe's consumer."""


def correct_end_offsets(ends: dict[TopicPartition, int], probe: Callable[[], EndOffsetProbe], timeout: float) -> None:
    """Raise each ``ends[tp]`` to the high watermark a fetch from ``ends[tp] - 1`` reports.

    ``probe`` gives the client's probe (created on first use, so an empty or
    all-zero ``ends`` costs nothing). Waits at most ``timeout`` seconds; a
    partition that does not answer in time keeps its reported end.
    """
    targets = [tp for tp, end in ends.items() if end > 0]
    if not targets:
        return
    prober = probe()
    prober.fetch_from({tp: ends[tp] - 1 for tp in targets})
    try:
        pending = set(targets)
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            # short waits: the probe returns at its first event, not when all have answered
            pending -= prober.answered(max(0.0, min(0.05, deadline - time.monotonic())))
        for tp in targets:
            high = prober.high_watermark(tp)
            if high is not None and high > ends[tp]:
                ends[tp] = int(high)
    finally:
        prober.stop()
