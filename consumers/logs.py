"""Structured logs: one JSON object (or one logfmt line) per record, extras included.

>>> import logging, io
>>> stream = io.StringIO(); handler = logging.StreamHandler(stream)
>>> handler.setFormatter(JsonFormatter()); log = logging.getLogger("doc"); log.addHandler(handler)
>>> log.warning("rejected", extra={"id": "m1", "reason": "bad_label"})
>>> import json; line = json.loads(stream.getvalue()); (line["msg"], line["id"], line["reason"], line["level"])
('rejected', 'm1', 'bad_label', 'warning')
"""
from __future__ import annotations

import json
import logging
import re
import sys
import time

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "taskName"}


def _extras(record: logging.LogRecord) -> dict:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {"ts": round(record.created, 3), "level": record.levelname.lower(), "logger": record.name,
                "msg": record.getMessage(), **_extras(record)}
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, ensure_ascii=False)


class LogfmtFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        pairs = {"ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)), "level": record.levelname.lower(),
                 "logger": record.name, "msg": record.getMessage(), **_extras(record)}
        return " ".join(f"{k}={_logfmt_value(v)}" for k, v in pairs.items())


def _logfmt_value(value) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    if not text or any(c in text for c in ' ="\\\n'):
        return json.dumps(text)
    return text


#: Longest id written to a log line (ids are bounded by the validator, keys of bad records are not).
MAX_LOGGED_ID_CHARS = 200
#: Rejected values up to this size are re-read for their id; bigger ones are only identified by key.
MAX_ID_PROBE_BYTES = 1 << 20


def record_context(record, doc_id: str | None = None) -> dict:
    """Log fields that identify a consumed record: ``id``, ``topic``, ``partition``, ``offset``.

    The id is ``doc_id`` when the record parsed; else the value's ``id`` field if
    it can still be read (a record rejected for its labels has a good id); else
    the Kafka key, which producers set to the id (docs/SCHEMAS.md). None when
    none of these exists.

    >>> from sgm.stream.kafka import Record
    >>> record_context(Record("sgm-train", 0, 41, b"k-7", b'{"id": "m1", "labels": [""]}'))
    {'id': 'm1', 'topic': 'sgm-train', 'partition': 0, 'offset': 41}
    >>> record_context(Record("sgm-score", 2, 5, b"k-7", b"\\xff not json"))["id"]
    'k-7'
    """
    if doc_id is None:
        doc_id = _id_in_value(record.value)
    if doc_id is None and record.key is not None:
        doc_id = bytes(record.key).decode("utf-8", "replace")
    if doc_id is not None and len(doc_id) > MAX_LOGGED_ID_CHARS:
        doc_id = doc_id[: MAX_LOGGED_ID_CHARS - 3] + "..."
    return {"id": doc_id, "topic": record.topic, "partition": record.partition, "offset": record.offset}


def undelivered_ids(error, limit: int = 20) -> list[str]:
    """Keys (record ids, docs/SCHEMAS.md) of the records a ``DeliveryError`` reports, at most ``limit``.

    >>> from sgm.stream.kafka import DeliveryError, DeliveryFailure
    >>> undelivered_ids(DeliveryError([DeliveryFailure("sgm-output", 1, b"q7", b"{}", "timed out")]))
    ['q7']
    """
    keys = [f.key for f in getattr(error, "failures", ()) if f.key is not None]
    return [bytes(k).decode("utf-8", "replace")[:MAX_LOGGED_ID_CHARS] for k in keys[:limit]]


def _id_in_value(value: bytes | None) -> str | None:
    if value is None or len(value) > MAX_ID_PROBE_BYTES:
        return None
    try:
        obj = json.loads(value)
    except (ValueError, RecursionError):
        return None
    found = obj.get("id") if isinstance(obj, dict) else None
    return found if isinstance(found, str) and found.strip() else None  # an empty id says less than the key


#: A client instance's name in a librdkafka line (``[sgm-all#consumer-12]``), and numbers (``after 2ms``,
#: ``1/2 brokers``): lines alike but for them are one kind.
_CLIENT_NAME = re.compile(r"\[[^\]\s]*#[^\]\s]*\]|\d+")


class RepeatFilter(logging.Filter):
    """Lets one line of each kind through per ``window`` seconds; the next one that passes says how many were held.

    librdkafka logs every failed connection attempt of every client, so a broker gone for a minute
    wrote ~5,000 lines (70 per second, session 6 by hand); the lines that matter (``kafka error;
    retrying``, with its stage) come from the service and are not filtered.

    >>> clock = [0.0]; repeats = RepeatFilter(30.0, clock=lambda: clock[0])
    >>> def line(client): return logging.LogRecord("r", 30, "", 0, "FAIL [%s] refused", (client,), None)
    >>> [repeats.filter(line(f"sgm#consumer-{i}")) for i in range(3)]
    [True, False, False]
    >>> clock[0] = 31.0; record = line("sgm#consumer-9"); repeats.filter(record), record.repeated
    (True, 2)
    """

    def __init__(self, window: float = 30.0, clock=time.monotonic) -> None:
        super().__init__()
        self.window, self.clock = window, clock
        self.seen: dict[str, list] = {}  # kind of line -> [when it last passed, lines held back since]

    def filter(self, record: logging.LogRecord) -> bool:
        kind = f"{record.levelno}:{_CLIENT_NAME.sub('[]', record.getMessage())}"
        now = self.clock()
        entry = self.seen.get(kind)
        if entry is not None and now - entry[0] < self.window:
            entry[1] += 1
            return False
        if entry is not None and entry[1]:
            record.repeated = entry[1]
        if len(self.seen) >= 1000:
            self.seen.clear()
        self.seen[kind] = [now, 0]
        return True


def setup_logging(fmt: str = "json", level: str = "INFO", stream=None) -> None:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else LogfmtFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("kafka", "sgm.stream.kafka.librdkafka"):
        logger = logging.getLogger(noisy)
        logger.setLevel(max(logging.WARNING, logging.getLevelName(level)))
        logger.filters[:] = [f for f in logger.filters if not isinstance(f, RepeatFilter)] + [RepeatFilter()]


def metrics_port_in_log(lines, restart_marker: bytes | None = None) -> int | None:
    """Port of a service's metrics endpoint, read from its JSON log lines (bytes).

    The last ``"service started"`` line wins; a line holding ``restart_marker``
    (a supervisor's note that it started the process again) forgets what came
    before. ``None`` when no started line with a port follows.

    >>> metrics_port_in_log([b'{"msg": "service started", "metrics": ["127.0.0.1", 9464]}'])
    9464
    """
    port = None
    for raw in lines:
        if restart_marker is not None and restart_marker in raw:
            port = None
        elif b'"service started"' in raw:
            try:
                port = int(json.loads(raw)["metrics"][1])
            except (ValueError, KeyError, TypeError, IndexError):
                pass
    return port
