"""Structured log lines: ``ts level event key=value ...``, one event per line, easy to grep and parse."""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

_LOGGER = logging.getLogger("kcoord")


def _fmt(value: Any) -> str:
    text = str(value)
    if text == "" or any(c in text for c in ' ="\n'):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    return text


class _Formatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        fields: dict[str, Any] = getattr(record, "fields", {})
        parts = [ts, record.levelname, record.getMessage()]
        parts.extend(f"{k}={_fmt(v)}" for k, v in fields.items() if v is not None)
        line = " ".join(parts)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def configure(level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter())
    _LOGGER.handlers[:] = [handler]
    _LOGGER.setLevel(level)
    _LOGGER.propagate = False


def set_level(level: str) -> None:
    """Changes the level while the broker runs (IncrementalAlterConfigs on the broker logger)."""
    _LOGGER.setLevel(level)


def event(name: str, level: int = logging.INFO, exc_info: bool = False, **fields: Any) -> None:
    if _LOGGER.isEnabledFor(level):
        _LOGGER.log(level, name, extra={"fields": fields}, exc_info=exc_info)


def warn(name: str, **fields: Any) -> None:
    event(name, logging.WARNING, **fields)


def debug(name: str, **fields: Any) -> None:
    event(name, logging.DEBUG, **fields)
