"""Structured logs: one JSON object per line, the ``extra`` fields as keys.

Messages are constant strings (STYLE.md); everything variable travels in ``extra``, so
log pipelines can index ``job``, ``node``, ``reason`` without parsing text.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

# Attributes every LogRecord has; anything else came in through ``extra``.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def configure(fmt: str = "json", level: str = "info") -> None:
    """Install one handler on the root logger (idempotent)."""
    if fmt not in ("json", "text"):
        raise ValueError(f"log format {fmt!r} is not one of json, text")
    handler = logging.StreamHandler()
    handler.setFormatter(
        JsonFormatter()
        if fmt == "json"
        else logging.Formatter("%(levelname)s %(name)s %(message)s")
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    if root.level > logging.DEBUG:
        # Kopf logs each handler run at INFO with its settings attached; our own
        # decision and action lines say what matters.
        logging.getLogger("kopf").setLevel(logging.WARNING)
