"""The server's logs: one JSON object per line on stderr, for a log shipper to read as it is.

Access lines come from the door (``airlock.access``: dialect, status, seconds, a hash of the API
key); uvicorn's own lines and the engine's warnings come out in the same shape.
"""

from __future__ import annotations

import datetime
import json
import logging
from typing import Any

__all__ = ["JsonLines", "log_config"]


class JsonLines(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
        }
        message = record.getMessage()
        try:
            fields = json.loads(message) if message.startswith("{") else None
        except ValueError:
            fields = None
        entry.update(fields if isinstance(fields, dict) else {"message": message})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def log_config(level: str) -> dict[str, Any]:
    """uvicorn's ``log_config``: every logger as JSON lines on stderr at ``level``; uvicorn's
    access log is off (the door logs each request with more to say)."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": JsonLines}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}},
        "root": {"handlers": ["stderr"], "level": level.upper()},
        "loggers": {
            "uvicorn": {"handlers": [], "propagate": True},
            "uvicorn.error": {"handlers": [], "propagate": True},
            "uvicorn.access": {"handlers": [], "propagate": False},
        },
    }
