"""Dead letters: every rejected record goes to the DLQ topic with its reason and its original bytes.

Scoring dead letters travel with their batch's outputs (a batch whose
delivery fails is scored again, and its dead letters come back with it).
Training dead letters cannot come back that way: the model has already
applied or refused their records, which are not read again. So they are
flushed before more training is read, and the failed ones are sent again
until the broker acknowledges them (docs/RELIABILITY.md, stage ``train_dlq``).
"""
from __future__ import annotations

import dataclasses
import hashlib

from sgm.stream.kafka import DeliveryError
from sgm.stream.records import DeadLetter, InvalidRecord, encode_dead_letter, parse_dead_letter

from ..config import ServiceConfig
from .connections import Connections
from .retry import KafkaErrors

#: What a dead letter keeps of the rejected record at most (see fit_dead_letter): the envelope stays
#: under librdkafka's default message.max.bytes of 1,000,000.
DLQ_MAX_VALUE_BYTES = 600_000
DLQ_MAX_KEY_BYTES = 1024
DLQ_MAX_HEADER_BYTES = 16_384


def fit_dead_letter(letter: DeadLetter) -> DeadLetter:
    """Cut what a dead letter keeps of a huge record so that it can always be delivered.

    A rejected record can be as large as the topic allows; its envelope (base64
    adds a third) must still fit the producer's ``message.max.bytes``
    (librdkafka's default is 1,000,000), or its delivery fails for good and the
    batch is retried forever. The cut is noted in ``detail`` with the
    original size and SHA-256.

    >>> from sgm.stream.records import Reason
    >>> letter = DeadLetter(reason=Reason.TOO_LARGE, detail="too large", value=b"x" * 700_000, key=b"k")
    >>> fitted = fit_dead_letter(letter)
    >>> len(fitted.value), fitted.detail.startswith("too large [value cut to its first 600000 of 700000 bytes")
    (600000, True)
    """
    notes = []
    value, key, headers = letter.value, letter.key, letter.headers
    if value is not None and len(value) > DLQ_MAX_VALUE_BYTES:
        notes.append(f"value cut to its first {DLQ_MAX_VALUE_BYTES} of {len(value)} bytes, "
                     f"sha256 {hashlib.sha256(value).hexdigest()}")
        value = value[:DLQ_MAX_VALUE_BYTES]
    if key is not None and len(key) > DLQ_MAX_KEY_BYTES:
        notes.append(f"key cut to its first {DLQ_MAX_KEY_BYTES} of {len(key)} bytes")
        key = key[:DLQ_MAX_KEY_BYTES]
    if sum(len(name) + len(data or b"") for name, data in headers) > DLQ_MAX_HEADER_BYTES:
        notes.append(f"{len(headers)} headers dropped")
        headers = ()
    if not notes:
        return letter
    return dataclasses.replace(letter, value=value, key=key, headers=headers,
                               detail=f"{letter.detail} [{'; '.join(notes)}]")


class DeadLetters:
    """Writes dead letters through the service's producer; keeps training ones until they are acknowledged.

    Parameters
    ----------
    config : ServiceConfig
        The DLQ topic, and the training topic that tells training letters apart.
    connections : Connections
        Its producer (looked up at every send: it can be replaced).
    errors : KafkaErrors
    """

    def __init__(self, config: ServiceConfig, connections: Connections, errors: KafkaErrors) -> None:
        self.config, self.connections, self.errors = config, connections, errors
        self.unflushed = False  # training dead letters sent but not yet acknowledged

    def send(self, letters: list[DeadLetter]) -> None:
        producer, topic = self.connections.producer, self.config.dlq_topic
        for letter in letters:
            letter = fit_dead_letter(letter)
            producer.send(topic, encode_dead_letter(letter), key=letter.key)

    def send_training(self, letters: list[DeadLetter]) -> None:
        """Send the dead letters of an applied training batch and wait for their acknowledgement."""
        self.send(letters)
        self.unflushed = True
        self.flush_training()

    def flush_training(self) -> None:
        """Wait for the training dead letters' acks; on failure send the failed ones again and raise.

        The model has already applied (or rejected) these records, so they are
        not read again: their dead letters must not be dropped. The run loop
        backs off and calls this again before reading more.
        """
        self.errors.stage = "train_dlq"
        try:
            self.connections.producer.flush()
        except DeliveryError as exc:
            self.resend_training(exc)
            raise
        self.unflushed = False

    def resend_training(self, exc: DeliveryError) -> None:
        """Send again the failed dead letters of *training* records (scoring ones come back by rescoring)."""
        for failure in exc.failures:
            if failure.topic != self.config.dlq_topic or failure.value is None:
                continue
            try:
                source = parse_dead_letter(failure.value).topic
            except InvalidRecord:
                continue
            if source == self.config.train_topic:
                self.connections.producer.send(failure.topic, failure.value, key=failure.key)
                self.unflushed = True
