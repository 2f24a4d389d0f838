"""The log of ``geppetto serve``: geppetto's and uvicorn's records on stderr, as text or as JSON lines.

The package itself only adds a ``NullHandler`` (a library leaves logging to its application); the server is
an application, so each worker process sets up one handler, at ``--log-level`` (default ``warning``: events
dropped or retried, control-topic failures, failed inferences, errors answered 5xx) in ``--log-format``:

- ``text``: ``2026-11-27T14:03:05.123Z WARNING geppetto.server [host:pid] message``;
- ``json``: one object per line, ``{"time", "level", "logger", "worker", "message"}`` and ``"exception"``
  (the traceback) when there is one: what log collectors parse without a pattern.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

from ..turns import new_id as _new_id

__all__ = ["LOG_FORMATS", "LOG_LEVELS", "JsonFormatter", "configure_logging"]

LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS = ("text", "json")
LOGGERS = ("geppetto", "uvicorn")
"""The loggers the server's handler is put on (uvicorn's access log is off)."""

_MARK = f"geppetto-serve-{_new_id()}"


def _time(record: logging.LogRecord) -> str:
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
    return f"{seconds}.{int(record.msecs):03d}Z"


class TextFormatter(logging.Formatter):
    def __init__(self, worker: str) -> None:
        super().__init__()
        self.worker = worker

    def format(self, record: logging.LogRecord) -> str:
        line = f"{_time(record)} {record.levelname} {record.name} [{self.worker}] {record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def __init__(self, worker: str) -> None:
        super().__init__()
        self.worker = worker

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": _time(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "worker": self.worker,
            "message": record.getMessage(),
        }
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


def configure_logging(level: str = "warning", fmt: str = "text", *, worker: str = "") -> None:
    """Send the records of :data:`LOGGERS` at ``level`` and above to stderr in ``fmt``; called again, it
    replaces its own handler (never one the application added)."""
    if level not in LOG_LEVELS:
        raise ValueError(f"log level {level!r}: use one of {', '.join(LOG_LEVELS)}")
    if fmt not in LOG_FORMATS:
        raise ValueError(f"log format {fmt!r}: use one of {', '.join(LOG_FORMATS)}")
    handler = logging.StreamHandler(sys.stderr)
    handler.set_name(_MARK)
    handler.setFormatter(JsonFormatter(worker) if fmt == "json" else TextFormatter(worker))
    for name in LOGGERS:
        logger = logging.getLogger(name)
        for old in [h for h in logger.handlers if h.get_name() == _MARK]:
            logger.removeHandler(old)
        logger.addHandler(handler)
        logger.setLevel(level.upper())
        logger.propagate = False
