"""Compiled check of caller-supplied term counts (one pass instead of several array reductions)."""
from __future__ import annotations

import numpy as np
from numba import njit


#: :func:`count_status` results.
COUNTS_POSITIVE, COUNTS_WITH_ZEROS, COUNTS_INVALID = 0, 1, 2


@njit(cache=True, nogil=True)
def count_status(values):  # pragma: no cover - compiled
    """One pass over caller-supplied term counts: all positive and finite, some zero, or invalid.

    Invalid means negative, NaN or infinite (NaN fails every comparison).
    """
    status = COUNTS_POSITIVE
    for x in values:
        if x > 0.0:
            if x == np.inf:
                return COUNTS_INVALID
        elif x == 0.0:
            status = COUNTS_WITH_ZEROS
        else:
            return COUNTS_INVALID
    return status
