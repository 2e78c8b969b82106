"""Event times: :func:`parse_timestamp` turns a record's ``ts`` into float epoch seconds."""
from __future__ import annotations

import math
import re
from datetime import datetime, timezone
from typing import Any

from .json_values import json_type_name
from .limits import DEFAULT_LIMITS, Limits
from .reasons import InvalidRecord, Reason

__all__ = ["parse_timestamp"]

# Extended ISO-8601 calendar date first: rejects basic (20020822) and week dates.
_ISO_DATE_PREFIX = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}(?:$|[T ])")
_MAX_TS_STRING = 64


def parse_timestamp(value: Any, limits: Limits = DEFAULT_LIMITS) -> float | None:
    """Normalise an event time to float epoch seconds (``None`` stays ``None``).

    Accepts epoch seconds (int or float) or an ISO-8601 string in extended format:
    date only, date and time, with or without UTC offset or ``Z``. A string without
    offset is taken as UTC.

    Raises
    ------
    InvalidRecord
        ``wrong_type`` for other JSON types, ``bad_timestamp`` for unparsable strings,
        NaN/infinity, or values outside ``[limits.min_ts, limits.max_ts]``.

    Examples
    --------
    >>> parse_timestamp("2002-08-22T11:36:16+00:00")
    1030016176.0
    >>> parse_timestamp("2002-08-22T13:36:16+02:00") == parse_timestamp("2002-08-22 11:36:16")
    True
    >>> parse_timestamp("1999-12-10"), parse_timestamp(1.5), parse_timestamp(None)
    (944784000.0, 1.5, None)
    >>> parse_timestamp(1_700_000_000_000)  # milliseconds by mistake
    Traceback (most recent call last):
    ...
    sgm.stream.schemas.reasons.InvalidRecord: bad_timestamp: ts 1700000000000 is out of range [0.0, 32503680000.0]
    """
    if value is None:
        return None
    if isinstance(value, bool):  # bool is an int subclass; true is not a time
        raise InvalidRecord(Reason.WRONG_TYPE, "ts must be a number, an ISO-8601 string or null, got boolean")
    if isinstance(value, (int, float)):
        try:
            seconds = float(value)
        except OverflowError:
            raise InvalidRecord(Reason.BAD_TIMESTAMP, "ts is too large") from None
        if not math.isfinite(seconds):
            raise InvalidRecord(Reason.BAD_TIMESTAMP, f"ts is {seconds}")
    elif isinstance(value, str):
        if len(value) > _MAX_TS_STRING or not _ISO_DATE_PREFIX.match(value):
            raise InvalidRecord(Reason.BAD_TIMESTAMP, f"ts {value[:_MAX_TS_STRING]!r} is not an ISO-8601 date-time")
        try:
            moment = datetime.fromisoformat(value)
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=timezone.utc)
            seconds = moment.timestamp()
        except (ValueError, OverflowError) as exc:
            raise InvalidRecord(Reason.BAD_TIMESTAMP, f"ts {value!r}: {exc}") from None
    else:
        raise InvalidRecord(Reason.WRONG_TYPE,
                            f"ts must be a number, an ISO-8601 string or null, got {json_type_name(value)}")
    if not limits.min_ts <= seconds <= limits.max_ts:
        shown = value if isinstance(value, (int, float)) else repr(value)
        raise InvalidRecord(Reason.BAD_TIMESTAMP, f"ts {shown} is out of range [{limits.min_ts}, {limits.max_ts}]")
    return seconds
