"""Kafka errors the service survives: the stage they hit, how each is counted and logged, the backoff.

A :class:`KafkaErrors` is shared by the service's parts: each sets ``stage``
before a Kafka call whose error the loop catches (the label of
``sgm_transport_errors_total``), and parts that recover from an error
themselves (a failed commit, a failed delivery) report it here too.
"""
from __future__ import annotations

import logging

log = logging.getLogger("sgm.service")

#: Backoff after a Kafka error, doubling per consecutive error: first and longest wait, seconds.
RETRY_BACKOFF_MIN = 0.1
RETRY_BACKOFF_MAX = 5.0
#: After this many consecutive errors in a consumer's poll, that consumer is closed and re-created.
RESET_AFTER_ERRORS = 5


class KafkaErrors:
    """What the loop was doing when a Kafka error surfaced, and the one way to report an error.

    Parameters
    ----------
    counter : prometheus_client.Counter
        ``sgm_transport_errors_total``, labelled by stage.

    Examples
    --------
    >>> from prometheus_client import CollectorRegistry, Counter
    >>> registry = CollectorRegistry()
    >>> errors = KafkaErrors(Counter("errors", "", ["stage"], registry=registry))
    >>> errors.stage = "score_poll"
    >>> errors.report(errors.stage, TimeoutError("poll timed out"), retry_in=0.1)
    >>> registry.get_sample_value("errors_total", {"stage": "score_poll"})
    1.0
    """

    def __init__(self, counter) -> None:
        self.counter = counter
        self.stage = "start"
        self.in_row = 0  # consecutive errors of the loop (reset by a step that succeeds)

    def report(self, stage: str, exc: BaseException, retry_in: float | None = None) -> None:
        self.counter.labels(stage).inc()
        log.error("kafka error; retrying", extra={"stage": stage, "error": str(exc), "error_type": type(exc).__name__,
                                                  "retry_in": retry_in, "errors_in_row": self.in_row})


def next_backoff(backoff: float) -> float:
    """The wait after one more error in a row: doubled, at most ``RETRY_BACKOFF_MAX``.

    >>> [round(b, 1) for b in (next_backoff(0.1), next_backoff(4.0))]
    [0.2, 5.0]
    """
    return min(backoff * 2, RETRY_BACKOFF_MAX)
