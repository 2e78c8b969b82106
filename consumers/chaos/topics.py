"""What a fault campaign writes to and reads from Kafka: the stream it feeds, and its tail of the results.

The stream: the project's synthetic stream (news + spam, drift, new labels,
corrections, forgets, malformed records tagged with the reason they must get)
sized so that there are at least ``records`` training *and* ``records``
scoring records, plus a hostile record every ``hostile_every`` records that
only the model can refuse (a forget of an unknown id, an unlearn under the
wrong labels), a learn from a clock-skewed producer every ``skewed_every``
records (alternately a ``ts`` and a Kafka CreateTime ten years ahead: kinds
``train`` and ``train_future``), and with ``poison`` one training record too
large for any client to fetch in the middle (kind ``poison``). :class:`Feeder`
produces it at ``rate`` records/s with an idempotent producer, so the logs hold
every record exactly once in stream order. :class:`Tail` reads the scoring,
output and DLQ topics as they grow.
"""
from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter

from sgm.stream.kafka import DeliveryError, TopicPartition
from sgm.stream.records import InvalidRecord, Op, TrainRecord, encode_train, parse_dead_letter, parse_output, parse_score
from sgm.stream.synthetic import SyntheticConfig, SyntheticStream

#: Stream kinds that go to the training topic.
TRAIN_KINDS = ("train", "train_future", "poison")
#: How far ahead of the clock a skewed producer stamps its records (ten years).
SKEW_SECONDS = 10 * 365 * 86400
#: Size of the poison record (the issue's 101 MB): past librdkafka's default receive.message.max.bytes (100 MB).
POISON_BYTES = 101 * 1024 * 1024
POISON_KEY = b"chaos-poison"


def build_stream(config) -> list[tuple[str, bytes, bytes]]:
    """``(kind, key, value)`` records: the synthetic stream plus hostile records only the model refuses.

    ``config`` is a :class:`~.campaign.CampaignConfig` (``records``, ``seed``,
    ``malformed_rate``, ``hostile_every``).
    """
    warmup = 100
    n_docs = config.records + warmup + 10
    while True:
        events = list(SyntheticStream(SyntheticConfig(
            seed=config.seed, n_docs=n_docs, profiles=("news", "spam"), malformed_rate=config.malformed_rate,
            warmup_docs=warmup, forget_rate=0.004, id_prefix=f"chaos{config.seed}")).events())
        trains = sum(e.kind == "train" for e in events)
        scores = sum(e.kind == "score" for e in events)
        if trains >= config.records and scores >= config.records:
            break
        n_docs += max(config.records - min(trains, scores), 10)
    rng = random.Random(config.seed)
    out: list[tuple[str, bytes, bytes]] = []
    learned: list[tuple[str, tuple[str, ...]]] = []
    hostile = skewed = 0
    skewed_every = getattr(config, "skewed_every", 0)
    poison_at = len(events) * 2 // 5 if getattr(config, "poison", False) else -1
    for index, event in enumerate(events):
        if index == poison_at:
            out.append(("poison", POISON_KEY, b""))  # the feeder makes its bytes when it sends it
        if skewed_every and index % skewed_every == skewed_every // 2:
            skewed += 1
            doc_id = f"chaos-future-{skewed}"
            record = TrainRecord(id=doc_id, labels=("chaos-future",), text="a record from a clock ten years ahead",
                                 ts=None if skewed % 2 else time.time() + SKEW_SECONDS)
            out.append(("train_future" if skewed % 2 else "train", doc_id.encode(), encode_train(record)))
        out.append((event.kind, event.key, event.value))
        if event.kind == "train" and event.valid and event.op is Op.LEARN:
            learned.append((event.id, event.truth_labels))
        if config.hostile_every and index % config.hostile_every == config.hostile_every - 1:
            hostile += 1
            if hostile % 2 and learned:  # unlearn a recent document under labels it was not learned with
                doc_id, _ = learned[-rng.randrange(1, min(len(learned), 20) + 1)]
                value = {"id": doc_id, "op": "unlearn", "labels": ["chaos-wrong-label"], "text": "x"}
            else:  # forget an id that was never learned
                doc_id = f"chaos-unknown-{hostile}"
                value = {"id": doc_id, "op": "forget"}
            out.append(("train", doc_id.encode(), json.dumps(value).encode()))
    return out


class Feeder(threading.Thread):
    """Produces the stream at a steady rate (idempotent producer: each record lands once, in order)."""

    def __init__(self, client, stream, topics: dict[str, str], rate: float) -> None:
        super().__init__(name="chaos-feeder", daemon=True)
        self.client = client
        self.producer = client.producer(idempotent=True, delivery_timeout_ms=900_000)
        self.poison_sent = False
        self.stream, self.topics, self.rate = stream, topics, rate
        self.sent = 0
        self.done = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            started = time.monotonic()
            chunk = max(1, int(self.rate / 20))
            for start in range(0, len(self.stream), chunk):
                for kind, key, value in self.stream[start : start + chunk]:
                    if kind == "poison":
                        self._send_poison(key)
                    elif kind == "train_future":  # no ts: the CreateTime of a producer whose clock is ten years ahead
                        self.producer.send(self.topics["train"], value, key=key,
                                           timestamp_ms=int((time.time() + SKEW_SECONDS) * 1000))
                    else:
                        self.producer.send(self.topics["train" if kind == "train" else "score"], value, key=key)
                self.sent = min(start + chunk, len(self.stream))
                self._flush()
                delay = started + self.sent / self.rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            self._flush()
        except BaseException as exc:  # noqa: BLE001 - reported by the campaign
            self.error = exc
        finally:
            self.done.set()

    def _send_poison(self, key: bytes) -> None:
        """The poison record, from its own producer allowed to send it; in stream order (both flushed)."""
        self._flush()
        value = b'{"id": "chaos-poison", "labels": ["x"], "text": "' + b"a " * (POISON_BYTES // 2) + b'"}'
        big = self.client.producer(max_request_bytes=2 * POISON_BYTES)  # the producer side's own record limit
        big.send(self.topics["train"], value, key=key)
        big.close(120.0)
        self.poison_sent = True

    def _flush(self) -> None:
        while True:
            try:
                self.producer.flush(60.0)
                return
            except DeliveryError as exc:  # records still queued are retried by the client
                if exc.failures:
                    raise


class Tail(threading.Thread):
    """Reads the scoring, output and DLQ topics as they grow (the campaign's view of the logs)."""

    def __init__(self, client, topics: dict[str, str], partitions: dict[str, int]) -> None:
        super().__init__(name="chaos-tail", daemon=True)
        self.topics = topics
        self.consumer = client.consumer(None, fetch_wait_ms=50)
        self.consumer.assign([TopicPartition(t, p) for t in topics.values() for p in range(partitions[t])])
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.positions: dict[TopicPartition, int] = {}
        self.score_position: dict[str, tuple[int, int]] = {}  # valid scoring id -> (partition, offset)
        self.score_invalid: dict[tuple[int, int], str] = {}  # (partition, offset) -> expected reason
        self.outputs: Counter = Counter()
        self.letters: list[tuple[str | None, int | None, int | None, str]] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                records = self.consumer.poll(5000, 0.2)
                with self.lock:
                    for record in records:
                        self.positions[record.tp] = record.offset + 1
                        if record.topic == self.topics["score"]:
                            try:
                                parsed = parse_score(record.value)
                            except InvalidRecord as exc:
                                self.score_invalid[(record.partition, record.offset)] = exc.reason.value
                            else:
                                self.score_position.setdefault(parsed.id, (record.partition, record.offset))
                        elif record.topic == self.topics["output"]:
                            self.outputs[parse_output(record.value).id] += 1
                        else:
                            letter = parse_dead_letter(record.value)
                            self.letters.append((letter.topic, letter.partition, letter.offset, letter.reason.value))
        except BaseException as exc:  # noqa: BLE001 - reported by the campaign
            self.error = exc
        finally:
            self.consumer.close()

    def caught_up(self, ends: dict[TopicPartition, int]) -> bool:
        with self.lock:
            return all(self.positions.get(tp, 0) >= end for tp, end in ends.items())
