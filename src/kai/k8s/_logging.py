"""Structured logs: one JSON object per line on stderr (time, level, logger, message and the record's
``extra`` fields), the shape log collectors in a cluster expect."""

from __future__ import annotations

import datetime as _dt
import json
import logging
import sys

_STANDARD = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": _dt.datetime.fromtimestamp(record.created, _dt.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for k, v in record.__dict__.items():
            if k not in _STANDARD and not k.startswith("_"):
                out[k] = v
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def setup_logging(level: str = "info") -> None:
    """JSON lines on stderr for the ``kai`` loggers (replaces earlier handlers: safe to call twice)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger("kai")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
