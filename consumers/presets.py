"""Tuned defaults picked by name: ``--preset spam`` for ``sgm serve``, ``sgm eval`` and ``sgm tune``.

A preset is a model configuration (the ``build_model`` dict, with its ``"mail"``
options) and, for a two-label task, the decision on its posterior (threshold and
learn guards). Anything given explicitly (``--config``, ``--model``, ``--param``,
``--spam-threshold``, ``--spam-prior-weight``, ``--min-spam``, ``--min-ham``) overrides the preset's value.

``spam``: whole emails (``raw_b64`` records, :class:`sgm.model.mail.Message`).
The model and its mail features were chosen for 1-ROCA% on the first 25% of the
SpamAssassin stream (``bench/mail_stream.py``); the decision (the prior's weight
in the posterior the threshold reads, the threshold, the learn guards) on the
same development stream, by the fewest errors when a false positive counts as
many false negatives (:data:`FP_COST`; ``python -m bench.mail_stream --mode
decision``). docs/EVALUATION.md and docs/RESULTS.md give the numbers.

Examples
--------
>>> spam = preset("spam")
>>> spam.model["model"], spam.decision.label
('uc_jm_dp_ps', 'spam')
>>> preset("ham")
Traceback (most recent call last):
...
ValueError: unknown preset 'ham'; known: spam
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from sgm.model.mail import MAIL_CONFIG

from .decision import SpamDecision

__all__ = ["FP_COST", "PRESETS", "Preset", "preset"]

#: How many false negatives one false positive (ham called spam) costs when the decision is chosen
#: (Androutsopoulos et al.'s lambda = 9: a lost ham is much worse than a spam in the inbox).
FP_COST = 9


@dataclass(frozen=True)
class Preset:
    """A named, documented default: a model configuration and, optionally, a spam decision."""

    name: str
    about: str
    model: dict[str, Any]
    decision: SpamDecision | None = None

    def model_config(self) -> dict[str, Any]:
        """A fresh copy of the model configuration (callers may change it)."""
        return copy.deepcopy(self.model)


PRESETS: dict[str, Preset] = {
    "spam": Preset(
        name="spam",
        about="whole emails (raw_b64): the mail model and features, spam decision (prior weight, threshold, learn "
              "guards) chosen on the SpamAssassin development stream",
        model=MAIL_CONFIG,
        decision=SpamDecision(label="spam", threshold=0.989, min_spam=0, min_ham=0, prior_weight=1.1),
    ),
}


def preset(name: str) -> Preset:
    """The preset called ``name``; ``ValueError`` naming the known ones otherwise."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown preset {name!r}; known: {', '.join(sorted(PRESETS))}") from None
