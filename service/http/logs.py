"""Structured logs: one JSON object per line on stderr (time, level, logger, pid, message and
any ``extra`` fields such as ``request_id``; uvicorn's terminal-coloured ``color_message`` is
left out, so no ANSI escape reaches a log)."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "color_message",
}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        obj: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "pid": record.process,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                obj[key] = value
        if record.exc_info:
            obj["exception"] = self.formatException(record.exc_info)
        return json.dumps(obj, default=str, ensure_ascii=False)


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A stream handler on whatever ``sys.stderr`` is when a record is written, not on the stream
    that was current when the service was configured: a process that redirects or replaces its
    stderr later (a test runner's capture, a daemon's log file) never writes to a closed one."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass  # always sys.stderr


def configure(level: str = "INFO") -> None:
    """JSON lines on stderr for the ``wai_dispatch`` and ``uvicorn`` loggers."""
    handler = _StderrHandler()
    handler.setFormatter(JsonFormatter())
    for name in ("wai_dispatch", "uvicorn", "uvicorn.error"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level)
        logger.propagate = False
    logging.getLogger("uvicorn.access").disabled = True  # the service logs each request itself
