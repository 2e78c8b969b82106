"""A batch of scored documents as the scoring kernel reads it."""
from __future__ import annotations

import numpy as np


class PreparedBatch:
    """Scored documents reduced to the model's known terms and their weights.

    The documents are concatenated: ``terms[i]`` with weight ``weights[i]``
    belongs to document ``owner[i]`` (ascending) of ``n_docs``.
    """

    __slots__ = ("terms", "weights", "owner", "n_docs")

    def __init__(self, terms: np.ndarray, weights: np.ndarray, owner: np.ndarray, n_docs: int) -> None:
        self.terms = terms
        self.weights = weights
        self.owner = owner
        self.n_docs = n_docs
