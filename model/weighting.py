"""Feature weighting (MODEL.md section 3: the thesis's generalized TF-IDF).

::

    w_n = log(1 + w'_n / |w'|_0**phi) / |w'|_0**(1 - phi) * log(max(1, ups_idf + I / I_n))

``phi`` scales length normalization (0: normalize after the log), ``ups_idf``
lifts the IDF (0: Robertson-Walker, -1: unsmoothed Croft-Harper, which zeroes
terms found in more than half the documents). ``I`` counts documents and
``I_n`` documents containing ``n``; in a stream both are decayed, and only
their ratio is used, so stored (forward-decay) units are fine.
"""
from __future__ import annotations

import numpy as np


def idf(total_docs: float, term_docs: np.ndarray, ups_idf: float) -> np.ndarray:
    """``log(max(1, ups_idf + I / I_n))``; terms never seen (``I_n = 0``) get 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(term_docs > 0, total_docs / term_docs, 0.0)
    lifted = np.maximum(1.0, ups_idf + ratio)
    out = np.log(lifted)
    out[term_docs <= 0] = 0.0
    return out


def tf(raw: np.ndarray, distinct_terms, phi: float) -> np.ndarray:
    """The TF part: ``log(1 + w'_n / L0**phi) / L0**(1 - phi)`` with ``L0 = |w'|_0``.

    ``distinct_terms`` is ``L0`` of the document, or an array giving it for
    each term (a batch of concatenated documents).

    >>> tf(np.array([1.0, 3.0]), 2, 0.0).round(4)
    array([0.3466, 0.6931])
    """
    if len(raw) == 0:
        return np.zeros(0)
    length = np.asarray(distinct_terms, dtype=np.float64)
    return np.log1p(raw / length**phi) / length ** (1.0 - phi)


def weigh(raw: np.ndarray, distinct_terms: int, idf_values: np.ndarray | None, kind: str | None,
          phi: float) -> np.ndarray:
    """Weights of one document's terms under weighting ``kind`` (an affix or ``None``).

    ``distinct_terms`` is ``|w'|_0`` of the whole document (scored documents may
    have terms the model has never seen; they still count in the length).
    """
    if kind is None:
        return raw
    if kind.startswith("qidf"):
        return raw * idf_values
    return tf(raw, distinct_terms, phi) * idf_values
