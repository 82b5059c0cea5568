"""Structured logs: one JSON object per line on stdout.

Every field goes through JSON encoding, so user-controlled strings (names,
messages) cannot forge a log line. Callers pass facts in `extra`, never objects.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

import orjson

_RECORD_FIELDS = frozenset(vars(logging.makeLogRecord({}))) | {
    "message",
    "asctime",
    "color_message",
}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update((k, v) for k, v in vars(record).items() if k not in _RECORD_FIELDS)
        if record.exc_info:
            entry["traceback"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


def logging_config(level: str) -> dict[str, Any]:
    """A dictConfig for our loggers and uvicorn's; each worker process applies it again."""
    handler = {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stdout"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": JsonFormatter}},
        "handlers": {"stdout": handler},
        "loggers": {
            "webhook": {"handlers": ["stdout"], "level": level.upper(), "propagate": False},
            "uvicorn": {"handlers": ["stdout"], "level": level.upper(), "propagate": False},
            "uvicorn.access": {"handlers": [], "propagate": False},
        },
    }


def configure(level: str) -> None:
    import logging.config

    logging.config.dictConfig(logging_config(level))
    # Fields JsonFormatter never writes: skipping them saves a stack walk and three lookups per
    # record (the logging HOWTO's "Optimization") on the admission path.
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
