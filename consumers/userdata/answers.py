"""The service's answers to scoring records this command sent: outputs, or dead letters, by id.

:class:`AnswerReader` is opened *before* the records are sent: it reads the
output and dead-letter topics from their ends at that moment, so only answers
to this run are seen (an id scored earlier is not mistaken for an answer).
Outputs are matched by their ``id``; dead letters of the scoring topic by the
original record's key (the id: records are keyed by id).
"""
from __future__ import annotations

import time
from typing import Callable

from sgm.stream.kafka import Client, TopicPartition
from sgm.stream.records import InvalidRecord, OutputRecord, parse_dead_letter, parse_output

__all__ = ["AnswerReader"]


class AnswerReader:
    """Reads outputs and dead letters written after it was opened.

    Parameters
    ----------
    client : Client
    output_topic, dlq_topic, score_topic : str
    fetch_wait_ms : int
    """

    def __init__(self, client: Client, output_topic: str, dlq_topic: str, score_topic: str,
                 fetch_wait_ms: int = 50) -> None:
        self.output_topic, self.dlq_topic, self.score_topic = output_topic, dlq_topic, score_topic
        self.consumer = client.consumer(None, fetch_wait_ms=fetch_wait_ms)
        tps = [TopicPartition(topic, p) for topic in (output_topic, dlq_topic)
               for p in self.consumer.partitions_for(topic)]
        self.consumer.assign(tps)
        for tp, offset in self.consumer.end_offsets(tps).items():
            self.consumer.seek(tp, offset)
        self.outputs: dict[str, OutputRecord] = {}
        self.dead: dict[str, tuple[str, str]] = {}  # id -> (reason, detail)

    def wait(self, ids: set[str], timeout: float, on_answer: Callable[[str], None] = lambda doc_id: None) -> set[str]:
        """Read until every id in ``ids`` has an output or a dead letter, or ``timeout`` seconds pass;
        returns the ids still without an answer. ``on_answer(id)`` is called for each new answer."""
        waiting = set(ids) - set(self.outputs) - set(self.dead)
        deadline = time.monotonic() + timeout
        while waiting and time.monotonic() < deadline:
            for record in self.consumer.poll(2000, min(0.2, max(deadline - time.monotonic(), 0.0))):
                doc_id = self._take(record)
                if doc_id is not None and doc_id in waiting:
                    waiting.discard(doc_id)
                    on_answer(doc_id)
        return waiting

    def _take(self, record) -> str | None:
        try:
            if record.topic == self.output_topic:
                output = parse_output(record.value)
                self.outputs.setdefault(output.id, output)
                return output.id
            letter = parse_dead_letter(record.value)
        except (InvalidRecord, ValueError):
            return None  # not ours to judge: some other writer's bytes on these topics
        if letter.topic != self.score_topic or letter.key is None:
            return None
        doc_id = letter.key.decode("utf-8", "replace")
        self.dead.setdefault(doc_id, (letter.reason.value, letter.detail))
        return doc_id

    def close(self) -> None:
        self.consumer.close()
