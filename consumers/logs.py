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


def setup_logging(fmt: str = "json", level: str = "INFO", stream=None) -> None:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else LogfmtFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("kafka", "stream.transport.librdkafka"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLevelName(level)))
