"""Forward time decay by event time (MODEL.md section 7).

A document observed at event time ``t`` weighs ``2 ** (-(T - t) / H)`` at model
time ``T`` (the latest event time learned). Instead of shrinking every count as
``T`` advances, each document is stored with the weight ``2 ** ((t - t0) / H)``
relative to a fixed origin ``t0``; the true value of any stored count is then
``stored * scale`` with the one global factor ``scale = 2 ** (-(T - t0) / H)``.
Stored values grow with ``t``; before they overflow the origin is moved forward
by a whole number ``k`` of half-lives and every stored value is multiplied by
``2 ** -k``, which is exact in binary floating point.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

#: Rebase once the newest documents weigh this many half-lives above the origin
#: (stored values up to 2**64 times their true values: far from overflow, and
#: documents older than ~1000 half-lives underflow to zero and are expired).
REBASE_AFTER_HALF_LIVES = 64.0


@dataclass
class DecayClock:
    """Model time, the decay origin and the global scale.

    Examples
    --------
    >>> clock = DecayClock(half_life=10.0)
    >>> clock.observe(100.0)
    0
    >>> clock.factor(100.0), clock.factor(90.0)
    (1.0, 0.5)
    >>> clock.observe(110.0)  # model time advances; nothing is rescaled
    0
    >>> clock.scale()  # true value = stored value * scale
    0.5
    """

    half_life: float | None = None
    origin: float | None = None  # t0
    now: float | None = None  # T: the latest event time learned

    @property
    def decays(self) -> bool:
        return self.half_life is not None

    def event_time(self, ts: float | None) -> float:
        """Event time of a document; ``None`` means the model's current time."""
        if ts is not None:
            return float(ts)
        if self.now is not None:
            return self.now
        return 0.0 if self.origin is None else self.origin

    def observe(self, ts: float | None) -> int:
        """Advance model time to ``ts`` if later.

        Returns the number ``k`` of half-lives the origin must move (0 = none);
        the caller multiplies every stored value by ``2 ** -k`` and then calls
        :meth:`shift_origin`.
        """
        t = self.event_time(ts)
        if self.origin is None:
            self.origin = t
        if self.now is None or t > self.now:
            self.now = t
        if self.half_life is None:
            return 0
        exponent = (self.now - self.origin) / self.half_life
        if exponent > REBASE_AFTER_HALF_LIVES:
            return int(math.floor(exponent))
        return 0

    def would_rebase(self, ts: float | None) -> bool:
        """Whether :meth:`observe` of ``ts`` would move the origin (without observing it)."""
        if self.half_life is None:
            return False
        t = self.event_time(ts)
        origin = t if self.origin is None else self.origin
        now = t if self.now is None or t > self.now else self.now
        return (now - origin) / self.half_life > REBASE_AFTER_HALF_LIVES

    def observe_all(self, stamps: list[float | None]) -> list[float]:
        """Without decay: :meth:`observe` each stamp in order and return their event times.

        The same times as ``observe(ts)`` followed by ``event_time(ts)`` one by
        one (nothing ever rebases without a half-life), in one loop.
        """
        assert self.half_life is None, "with decay, observe one by one (a stamp may move the origin)"
        now, origin = self.now, self.origin
        times = []
        for ts in stamps:
            if ts is not None:
                t = float(ts)
            else:
                t = now if now is not None else (0.0 if origin is None else origin)
            if origin is None:
                origin = t
            if now is None or t > now:
                now = t
            times.append(t)
        self.now, self.origin = now, origin
        return times

    def shift_origin(self, half_lives: int) -> None:
        assert self.half_life is not None and self.origin is not None
        self.origin += half_lives * self.half_life

    def factor(self, ts: float | None) -> float:
        """Stored weight of a document with event time ``ts`` (1.0 without decay)."""
        if self.half_life is None:
            return 1.0
        t = self.event_time(ts)
        origin = t if self.origin is None else self.origin
        try:
            return 2.0 ** ((t - origin) / self.half_life)
        except OverflowError:
            return math.inf

    def scale(self) -> float:
        """Global factor turning stored values into true, decayed values."""
        if self.half_life is None or self.now is None or self.origin is None:
            return 1.0
        return 2.0 ** (-(self.now - self.origin) / self.half_life)

    def to_dict(self) -> dict:
        return {"half_life": self.half_life, "origin": self.origin, "now": self.now}

    @classmethod
    def from_dict(cls, data: dict) -> "DecayClock":
        return cls(data.get("half_life"), data.get("origin"), data.get("now"))
