"""Prequential accuracy: predictions remembered by id, judged when the labels arrive later as training."""
from __future__ import annotations

from collections import OrderedDict

#: Scored ids remembered for prequential accuracy (feedback arriving later as training records).
RECENT_PREDICTIONS = 100_000


class RecentPredictions:
    """The top prediction of the last scored ids, judged against the first labels learned for each.

    Parameters
    ----------
    record_feedback : callable
        Called with ``True`` (correct) or ``False`` for every judged prediction
        (``ServiceMetrics.record_feedback``).
    size : int
        Ids remembered; the oldest are forgotten first.

    Examples
    --------
    >>> outcomes = []
    >>> recent = RecentPredictions(outcomes.append, size=2)
    >>> recent.remember("q1", "spam"); recent.remember("q2", frozenset({"a", "b"})); recent.remember("q3", "ham")
    >>> recent.judge("q1", ("spam",)), recent.judge("q2", ("a", "b")), recent.judge("q3", ("spam",))
    (None, None, None)
    >>> outcomes  # q1 was forgotten; q2 is a powerset prediction: right only if the sets are equal
    [True, False]
    """

    def __init__(self, record_feedback, size: int = RECENT_PREDICTIONS) -> None:
        self.record_feedback, self.size = record_feedback, size
        self._recent: OrderedDict[str, str | frozenset] = OrderedDict()

    def remember(self, doc_id: str, prediction: str | frozenset) -> None:
        """``prediction``: the top label, or the predicted label set of a powerset model."""
        recent = self._recent
        recent[doc_id] = prediction
        if len(recent) > self.size:
            recent.popitem(last=False)

    def remember_many(self, predictions) -> None:
        """:meth:`remember` for each ``(doc_id, prediction)`` pair, in order (one dict update for a batch)."""
        recent = self._recent
        recent.update(predictions)
        while len(recent) > self.size:
            recent.popitem(last=False)

    def judge(self, doc_id: str, labels: tuple[str, ...]) -> None:
        """Labels arrived for ``doc_id``: judge its prediction, if one is remembered (once)."""
        predicted = self._recent.pop(doc_id, None)
        if predicted is not None:
            # powerset: the prediction is a label set, right only if it is exactly the true set
            correct = predicted == frozenset(labels) if isinstance(predicted, frozenset) else predicted in labels
            self.record_feedback(correct)
