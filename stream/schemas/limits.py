"""Bounds on a single input record: :class:`Limits` and :data:`DEFAULT_LIMITS`."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_LIMITS", "MAX_TS", "Limits"]

#: 3000-01-01T00:00:00Z. Later event times are almost surely milliseconds or
#: microseconds sent as seconds.
MAX_TS = 32503680000.0


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on a single input record; anything over them is rejected.

    The defaults leave room above every document of the shared datasets (largest
    text 228,369 characters, at most 16 labels, longest id 62 characters) while
    keeping one record's cost bounded.

    Parameters
    ----------
    max_record_bytes : int
        Size of the raw Kafka value. Default 1 MiB, Kafka's default ``message.max.bytes``.
    max_text_chars : int
        Characters of ``text``. Default 500,000.
    max_terms : int
        Distinct keys of ``terms``. Default 50,000.
    max_term_count : float
        Largest count of one term in one document. Default 1,000,000.
    max_labels : int
        Distinct labels of one document. Default 64.
    max_label_chars : int
        Characters of one label. Default 128.
    max_id_chars : int
        Characters of ``id``. Default 512.
    max_term_chars : int
        Characters of one term. Default 256.
    min_ts, max_ts : float
        Accepted event times, epoch seconds. Default 0 (1970) to 3000-01-01.

    Examples
    --------
    >>> from sgm.stream.records import parse_train
    >>> Limits().max_labels
    64
    >>> parse_train(b'{"id": "d1", "text": "x", "labels": ["a", "b"]}', Limits(max_labels=1))
    Traceback (most recent call last):
    ...
    sgm.stream.schemas.reasons.InvalidRecord: too_many_labels: 2 distinct labels, limit 1
    """

    max_record_bytes: int = 1 << 20
    max_text_chars: int = 500_000
    max_terms: int = 50_000
    max_term_count: float = 1_000_000.0
    max_labels: int = 64
    max_label_chars: int = 128
    max_id_chars: int = 512
    max_term_chars: int = 256
    min_ts: float = 0.0
    max_ts: float = MAX_TS


DEFAULT_LIMITS = Limits()
