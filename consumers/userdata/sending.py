"""Sending checked records to a topic, keyed by id, with periodic flushes and an honest count.

A record counts as sent only once the broker acknowledged it (a flush
succeeded); records that failed or were still unconfirmed when a flush timed
out are counted in :attr:`TopicSender.failed` and the command says so. Relearning is a no-op per id, so running the same
command again is always safe.
"""
from __future__ import annotations

import time

from sgm.stream.kafka import DeliveryError, KafkaTransportError, Producer

__all__ = ["TopicSender"]

#: Seconds and records between flushes: progress is confirmed in steps, not only at the end.
FLUSH_SECONDS = 0.5
FLUSH_RECORDS = 2000


class TopicSender:
    """Sends ``(key, value)`` records to one topic; :attr:`delivered` and :attr:`failed` after :meth:`close`.

    Parameters
    ----------
    producer : Producer
    topic : str
    flush_timeout : float
        Seconds a flush waits for acknowledgements.
    """

    def __init__(self, producer: Producer, topic: str, flush_timeout: float = 60.0) -> None:
        self.producer, self.topic, self.flush_timeout = producer, topic, flush_timeout
        self.pending = 0
        self.delivered = 0
        self.failed = 0
        self.errors: list[str] = []
        self.last_flush = time.monotonic()

    def send(self, key: str, value: bytes) -> int:
        """Queue one record; returns how many records were newly acknowledged (a flush may happen here)."""
        self.producer.send(self.topic, value, key=key.encode("utf-8"))
        self.pending += 1
        if self.pending >= FLUSH_RECORDS or time.monotonic() - self.last_flush >= FLUSH_SECONDS:
            return self.flush()
        return 0

    def flush(self) -> int:
        """Wait for the queued records; returns how many were acknowledged now."""
        pending, self.pending = self.pending, 0
        self.last_flush = time.monotonic()
        if not pending:
            return 0
        try:
            self.producer.flush(self.flush_timeout)
        except DeliveryError as exc:
            unconfirmed = pending if exc.undelivered is None else exc.undelivered
            lost = min(len(exc.failures) + unconfirmed, pending)
            self.failed += lost
            self.delivered += pending - lost
            self.errors.append(str(exc).splitlines()[0])
            return pending - lost
        except KafkaTransportError as exc:
            self.failed += pending
            self.errors.append(str(exc).splitlines()[0])
            return 0
        self.delivered += pending
        return pending

    def close(self) -> None:
        self.flush()
        try:
            self.producer.close(5.0)
        except (DeliveryError, KafkaTransportError) as exc:  # everything was flushed above; report, do not raise
            self.errors.append(str(exc).splitlines()[0])
