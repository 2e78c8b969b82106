"""A mail admin's decision on a two-label posterior: a spam threshold and learn guards.

Spam filters do not answer "spam" because spam is the arg-max; an admin sets a
threshold on the posterior, and SpamAssassin's Bayes gives no verdict at all
until it has learned ``bayes_min_spam_num`` spams and ``bayes_min_ham_num``
hams (200 each by default). :class:`SpamDecision` is that rule, shared by the
service (every output carries it, ``docs/SCHEMAS.md``) and ``sgm eval`` (the
false-positive and false-negative rates at the threshold, ``docs/EVALUATION.md``).

The posterior the threshold applies to is the model's own, or, with a
``prior_weight``, the posterior the model would give with its class prior
counted ``prior_weight`` times instead of ``theta`` times (prior scaling,
docs/MODEL.md section 4): ``p(l | x)`` reweighted by ``p(l) ** (prior_weight -
theta)`` and normalized. The ranking, ``top_k`` and the top label stay the
model's; only the verdict reads the reweighted posterior. A prior weight suits
a decision that must hold while the class balance of the training data moves:
``theta`` = 2, chosen for ranking, makes the posterior follow the balance twice.

Verdicts: ``"spam"`` (that posterior of the spam label at or above the threshold,
guards met), ``"ham"`` (below it), ``"not_ready"`` (a guard not met: no spam
verdict). Documents counted for the guards are the model's live documents:
"spam" those with the spam label, "ham" all others (what a forget or the memory
bound removes no longer counts).

Examples
--------
>>> rule = SpamDecision(threshold=0.9, min_spam=2, min_ham=1)
>>> learned = rule.learned({"spam": 3, "ham": 1})
>>> learned, rule.verdict(0.95, learned), rule.verdict(0.6, learned)
({'spam': 3, 'ham': 1}, 'spam', 'ham')
>>> rule.verdict(0.99, rule.learned({"spam": 3}))
'not_ready'
>>> rule.output(0.99, {"spam": 3, "ham": 0})
{'label': 'spam', 'p': 0.99, 'threshold': 0.9, 'verdict': 'not_ready', 'learned': {'spam': 3, 'ham': 0}, \
'min': {'spam': 2, 'ham': 1}}

A prior weight of 1 for a model scoring with ``theta`` = 2 and a spam prior of 0.8 divides the spam
odds by 4 (0.9 -> 0.69):

>>> weighted = SpamDecision(threshold=0.9, prior_weight=1.0)
>>> shift = {"spam": (1.0 - 2.0) * math.log(0.8), "ham": (1.0 - 2.0) * math.log(0.2)}
>>> round(weighted.posterior(["spam", "ham"], [0.9, 0.1], shift), 4)
0.6923
>>> weighted.posterior(["ham"], [1.0], shift), SpamDecision().posterior(["spam", "ham"], [0.9, 0.1])
(0.0, 0.9)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

__all__ = ["SpamDecision", "VERDICTS"]

VERDICTS = ("spam", "ham", "not_ready")


@dataclass(frozen=True)
class SpamDecision:
    """Threshold and learn guards of a spam verdict.

    Parameters
    ----------
    label : str
        The spam label (the positive class).
    threshold : float
        Posterior of ``label`` at or above which the verdict is spam, in (0, 1].
    min_spam, min_ham : int
        No spam verdict until the model holds this many documents with ``label`` /
        without it (SpamAssassin's ``bayes_min_spam_num`` / ``bayes_min_ham_num``).
    prior_weight : float or None
        The weight of the class prior in the posterior the threshold applies to (>= 0; ``None``:
        the model's own, ``theta``). 1 is the plain Bayes posterior, 0 drops the prior.
    """

    label: str = "spam"
    threshold: float = 0.5
    min_spam: int = 0
    min_ham: int = 0
    prior_weight: float | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.label, str) and self.label):
            raise ValueError("the spam label must be a non-empty string")
        if not (0.0 < float(self.threshold) <= 1.0):
            raise ValueError(f"threshold must be in (0, 1], got {self.threshold!r}")
        for name in ("min_spam", "min_ham"):
            value = getattr(self, name)
            if isinstance(value, bool) or int(value) != value or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
        if self.prior_weight is not None and not (math.isfinite(float(self.prior_weight))
                                                  and float(self.prior_weight) >= 0.0):
            raise ValueError(f"prior_weight must be a finite number >= 0, got {self.prior_weight!r}")

    def learned(self, per_class: Mapping[Any, int]) -> dict[str, int]:
        """``{"spam": n, "ham": m}`` from a model's :meth:`documents_per_class` (powerset classes are label
        tuples). A document with several labels counts once, as spam when the spam label is among them."""
        spam = ham = 0
        for name, count in per_class.items():
            labels = name if isinstance(name, tuple) else (name,)
            if self.label in labels:
                spam += count
            else:
                ham += count
        return {"spam": int(spam), "ham": int(ham)}

    def learned_from(self, model) -> dict[str, int]:
        """:meth:`learned` of a model. In per-label mode a document with the spam label and another
        is counted under both classes: ham is then the live documents minus the spam ones."""
        counts = self.learned(model.documents_per_class())
        if model.multilabel != "powerset":
            counts["ham"] = len(model) - counts["spam"]
        return counts

    def prior_shift(self, model) -> dict[str, float] | None:
        """Per class name as the model's rankings spell it (a label set joined by ``+``): what
        :meth:`posterior` adds to its log posterior, ``(prior_weight - theta) log p(l)``. ``None``
        without a prior weight."""
        if self.prior_weight is None:
            return None
        names, log_prior = model.class_log_prior()
        factor = float(self.prior_weight) - model.prior_scale
        return {("+".join(name) if isinstance(name, tuple) else name): factor * value
                for name, value in zip(names, log_prior.tolist())}

    def posterior(self, names: Sequence[str], probabilities: Sequence[float],
                  shift: Mapping[str, float] | None = None) -> float:
        """The spam posterior the threshold applies to, from a document's posteriors over ``names``
        (every class the model knows): the spam label's (0 if absent), reweighted by ``shift``
        (:meth:`prior_shift`) when given. In [0, 1]."""
        if self.label not in names:
            return 0.0
        if shift is None:
            return min(max(float(probabilities[list(names).index(self.label)]), 0.0), 1.0)
        logs = [(math.log(p) + shift.get(name, 0.0)) if p > 0.0 else -math.inf
                for name, p in zip(names, map(float, probabilities))]
        top = max(logs)
        if top == -math.inf:
            return 0.0
        total = math.fsum(math.exp(value - top) for value in logs)
        spam = logs[list(names).index(self.label)]
        return min(max(math.exp(spam - top) / total, 0.0), 1.0)

    def ready(self, learned: Mapping[str, int]) -> bool:
        return learned["spam"] >= self.min_spam and learned["ham"] >= self.min_ham

    def verdict(self, p_spam: float, learned: Mapping[str, int]) -> str:
        if not self.ready(learned):
            return "not_ready"
        return "spam" if p_spam >= self.threshold else "ham"

    def output(self, p_spam: float, learned: Mapping[str, int]) -> dict[str, Any]:
        """The ``decision`` object of an output record."""
        p = float(p_spam)
        if not math.isfinite(p):
            raise ValueError(f"p must be finite, got {p_spam!r}")
        out = {"label": self.label, "p": p, "threshold": float(self.threshold), "verdict": self.verdict(p, learned),
               "learned": dict(learned), "min": {"spam": int(self.min_spam), "ham": int(self.min_ham)}}
        if self.prior_weight is not None:
            out["prior_weight"] = float(self.prior_weight)
        return out

    def labels(self, verdict: str, ranked: list[str]) -> list[str]:
        """The output label set for a verdict: the spam label, else the best-ranked other label (none known: [])."""
        if verdict == "spam":
            return [self.label]
        return next(([name] for name in ranked if name != self.label), [])

    def decide(self, model, ranked_names: Sequence[Sequence[str]],
               ranked_probabilities: Sequence[Sequence[float]]) -> tuple[list[dict[str, Any]], list[list[str]]]:
        """The ``decision`` object and the output labels of each scored document, from ``model``'s ranking of
        every class it knows (names and posteriors per document, best first): what the classifier
        (``consumers/service/scoring.py``) and ``sgm score --state-dir`` both write.

        Examples
        --------
        >>> from sgm.model import build_model
        >>> model = build_model({"model": "u_jm"})
        >>> model.learn_many(["cheap pills", "lunch at noon"], [("spam",), ("ham",)])
        2
        >>> made, labels = SpamDecision(threshold=0.5).decide(model, [["spam", "ham"]], [[0.9, 0.1]])
        >>> made[0]["verdict"], labels
        ('spam', [['spam']])
        """
        learned, shift = self.learned_from(model), self.prior_shift(model)
        made = [self.output(self.posterior(names, probabilities, shift), learned)
                for names, probabilities in zip(ranked_names, ranked_probabilities)]
        return made, [self.labels(m["verdict"], list(names)) for m, names in zip(made, ranked_names)]

    def to_dict(self) -> dict[str, Any]:
        out = {"label": self.label, "threshold": float(self.threshold), "min_spam": int(self.min_spam),
               "min_ham": int(self.min_ham)}
        if self.prior_weight is not None:
            out["prior_weight"] = float(self.prior_weight)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "SpamDecision":
        unknown = set(data) - {"label", "threshold", "min_spam", "min_ham", "prior_weight"}
        if unknown:
            raise ValueError(f"unknown decision settings: {sorted(unknown)}")
        weight = data.get("prior_weight")
        return cls(label=str(data.get("label", "spam")), threshold=float(data.get("threshold", 0.5)),
                   min_spam=int(data.get("min_spam", 0)), min_ham=int(data.get("min_ham", 0)),
                   prior_weight=None if weight is None else float(weight))
