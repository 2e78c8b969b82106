"""The event-time guard: a learn record from the future must not move the model's clock.

With decay, model time is the latest event time learned (MODEL.md section 7,
``model/decay.py``); one record stamped years ahead (a producer's clock, a
millisecond timestamp read as seconds that still passes the validator's
3000-01-01 bound, a Kafka CreateTime of a skewed host) makes every earlier
document decay away at once, and the record stays in the log for every replay.
So the consumer compares each learn record's event time (its ``ts``, else the
Kafka timestamp) with its own clock: more than ``max_skew`` seconds ahead and
the record is refused (``future_timestamp``) before it reaches the model. Old
event times stay valid: backfills and replays of old corpora are normal.

The decision depends on the wall clock when the record is first applied. A
replica that reads the same record much later (when its time has come) would
accept it; with the default skew of a day the window where replicas could
disagree is a record stamped between a day and a day plus the replica's lag
ahead, which is what the dead letter, the metric and the alert are for.
"""
from __future__ import annotations

import math
import time
from typing import Any, Callable, Sequence

from sgm.model.state import EXPIRY_WEIGHT


class EventTimeGuard:
    """Refuses event times more than ``max_skew`` seconds ahead of ``clock()``.

    Parameters
    ----------
    max_skew : float
        Seconds an event time may lie ahead of the clock.
    clock : callable
        Epoch seconds now (``time.time``).

    Examples
    --------
    >>> guard = EventTimeGuard(60.0, clock=lambda: 1_000_000.0)
    >>> guard.ahead(1_000_030.0) is None, guard.ahead(999.0) is None, guard.ahead(1_000_090.0)
    (True, True, 90.0)
    """

    def __init__(self, max_skew: float, clock: Callable[[], float] = time.time) -> None:
        self.max_skew = float(max_skew)
        self.clock = clock

    def ahead(self, ts: float | None) -> float | None:
        """Seconds ``ts`` lies ahead of the clock when that is more than the allowed skew, else ``None``."""
        if ts is None:
            return None
        ahead = ts - self.clock()
        return ahead if ahead > self.max_skew else None

    def detail(self, ts: float, ahead: float) -> str:
        return (f"event time {ts:.3f} is {ahead:.0f} s ahead of this process's clock (allowed: {self.max_skew:g} s); "
                "it would move the model's clock and decay everything learned before it")


def guard_for(max_skew: float | None) -> EventTimeGuard | None:
    """The guard of a ``--max-event-skew`` setting (``None``: no check)."""
    return None if max_skew is None else EventTimeGuard(max_skew)


#: Half-lives behind the model's time after which a document's weight, ``2 ** -h``, is below the weight at
#: which the count state expires it on arrival (``EXPIRY_WEIGHT``, model/state.py): learning it would change nothing.
EXPIRED_AFTER_HALF_LIVES = -math.log2(EXPIRY_WEIGHT)


def decay_clocks(model: Any) -> list:
    """The decay clocks of ``model`` (each base's for an ensemble); empty when any of them does not decay."""
    clocks = [base.state.clock for base in getattr(model, "bases", (model,))]
    return clocks if all(clock.half_life is not None for clock in clocks) else []


def half_lives_behind(clocks: Sequence, ts: float, now: float | None = None) -> float | None:
    """Half-lives ``ts`` lies behind model time (``now`` if later) when it would weigh nothing in every clock.

    A producer whose clock is years behind (a host without a real-time clock, a ``ts`` in the wrong unit
    that still passes the validator) learns documents that expire on arrival; they are dead-lettered
    (``past_timestamp``) instead of being counted as learned and silently absent (the caller leaves a
    relearn of an id the model holds to the model).

    >>> from sgm.model.decay import DecayClock
    >>> clock = DecayClock(half_life=86400.0, origin=0.0, now=1.7e9)
    >>> half_lives_behind([clock], 1.7e9 - 86400.0 * 900) is None, round(half_lives_behind([clock], 0.0))
    (True, 19676)
    """
    if not clocks:
        return None
    behind = math.inf
    for clock in clocks:
        model_now = clock.now if now is None or (clock.now is not None and clock.now > now) else now
        if model_now is None:
            return None
        behind = min(behind, (model_now - ts) / clock.half_life)
    return behind if behind > EXPIRED_AFTER_HALF_LIVES else None


def past_detail(ts: float, behind: float) -> str:
    return (f"event time {ts:.3f} is {behind:.0f} half-lives behind the model's time: its weight underflows to "
            "zero, so learning it would change nothing (a producer's clock far behind?)")


#: A training batch that moves the model's time forward by at least this many half-lives and expires documents
#: is reported (:class:`TimeJump`): a live stream moves it a little at a time.
JUMP_HALF_LIVES = 10.0


class TimeJump:
    """Says when one training batch moved a decaying model's time far forward and documents expired with it.

    With decay, model time is the latest event time learned, so one record stamped much later than
    everything before it (a corpus with historical ``ts`` followed by a record without ``ts``, which takes
    the Kafka timestamp: now) expires every document older than ~930 half-lives before it. That is what
    decay means, but it empties a model without a dead letter; :meth:`after` returns the warning's fields.

    Examples
    --------
    >>> from sgm.model import MNB
    >>> m = MNB("u_jm", half_life=60.0); m.learn_one("old story", "a", ts=0.0, id="d1")
    True
    >>> jump = TimeJump(m); m.learn_one("new story", "b", ts=86400.0, id="d2")
    True
    >>> fields = jump.after(m); fields["expired"], fields["documents"], round(fields["half_lives"])
    (1, 1, 1440)
    """

    def __init__(self, model: Any) -> None:
        clock, state = self._parts(model)
        self.now, self.expired = (clock.now, state.expired_documents) if clock is not None else (None, 0)

    @staticmethod
    def _parts(model: Any) -> tuple[Any, Any]:
        state = getattr(model, "bases", (model,))[0].state  # an ensemble's bases share the stream: the first says
        return (state.clock if state.clock.half_life is not None else None), state

    def after(self, model: Any) -> dict[str, Any] | None:
        """The warning's fields when the model's time jumped and documents expired since ``__init__``, else None."""
        clock, state = self._parts(model)
        if clock is None or self.now is None or clock.now is None or state.expired_documents <= self.expired:
            return None
        half_lives = (clock.now - self.now) / clock.half_life
        if half_lives < JUMP_HALF_LIVES:
            return None
        return {"expired": state.expired_documents - self.expired, "documents": len(model),
                "model_time_before": self.now, "model_time": clock.now, "half_lives": half_lives}
