"""What a command did with its input: documents handled, and what was skipped, why and where.

Every input a command reads ends in exactly one place: handled (sent,
scored) or skipped with a reason (a reader's code from
:data:`sgm.stream.sources.SKIP_REASONS`, or a validator code from docs/SCHEMAS.md).
The summary names each reason with a count and the first few places it occurred,
so nothing vanishes unnoticed.

Examples
--------
>>> from sgm.stream.sources import Skipped
>>> tally = Tally()
>>> tally.handled(["spam"]); tally.handled(["spam"]); tally.handled(["ham"])
>>> tally.skip(Skipped("data/junk.bin", "binary", "NUL bytes"))
>>> print(tally.summary("sent"))
sent 3 (spam 2, ham 1); skipped 1: binary 1
  binary: data/junk.bin (NUL bytes)
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from sgm.stream.sources import Skipped

__all__ = ["Tally"]

#: Places listed per skip reason in a summary.
EXAMPLES_PER_REASON = 3


@dataclass
class Tally:
    """Counts of handled documents (by label) and of skipped inputs (by reason, with examples)."""

    done: int = 0
    labels: Counter = field(default_factory=Counter)
    skipped: Counter = field(default_factory=Counter)
    examples: dict[str, list[Skipped]] = field(default_factory=dict)

    def handled(self, labels=()) -> None:
        self.done += 1
        self.labels.update(labels)

    def skip(self, item: Skipped) -> None:
        self.skipped[item.reason] += 1
        listed = self.examples.setdefault(item.reason, [])
        if len(listed) < EXAMPLES_PER_REASON:
            listed.append(item)

    @property
    def skipped_total(self) -> int:
        return sum(self.skipped.values())

    def summary(self, verb: str, context: str = "") -> str:
        """``<verb> N (by label)<context>; skipped M: reason count, ...`` and the first places of each reason."""
        head = f"{verb} {self.done:,}"
        if self.labels:
            head += " (" + ", ".join(f"{label} {count:,}" for label, count in self.labels.most_common(10))
            head += ", ..." if len(self.labels) > 10 else ""
            head += ")"
        head += context
        if not self.skipped:
            return head + "; skipped 0"
        head += f"; skipped {self.skipped_total:,}: " + ", ".join(
            f"{reason} {count:,}" for reason, count in self.skipped.most_common())
        lines = [head]
        for reason, count in self.skipped.most_common():
            first, *others = self.examples[reason]
            line = f"  {reason}: {first.origin}" + (f" ({first.detail})" if first.detail else "")
            more = count - 1 - len(others)
            if others:
                line += "; also " + ", ".join(s.origin for s in others) + (f" and {more:,} more" if more else "")
            lines.append(line)
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"done": self.done, "labels": dict(self.labels), "skipped": dict(self.skipped),
                "skipped_examples": {r: [str(s) for s in items] for r, items in self.examples.items()}}
