"""Structured logs: one JSON object per line, the ``extra`` fields as keys.

Messages are constant strings (STYLE.md); everything variable travels in ``extra``, so
log pipelines can index ``job``, ``node``, ``reason`` without parsing text. The text
format is for people: the same fields follow the message as ``key=value``, since a
constant message alone (``action applied``) does not say on what.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

# Attributes every LogRecord has; anything else came in through ``extra``.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


def extra_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The fields that came in through ``extra``, in the order they were given."""
    return {
        key: value
        for key, value in vars(record).items()
        if key not in _STANDARD and not key.startswith("_")
    }


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        out.update(extra_fields(record))
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


class TextFormatter(logging.Formatter):
    """``LEVEL logger message key=value ...``: the extra fields sorted by key, so two
    lines of one kind line up whatever order the caller gave them in; a value with a
    space, quote, ``=`` or nothing in it is quoted (JSON string rules), so the line
    splits back into its fields."""

    def __init__(self) -> None:
        super().__init__("%(levelname)s %(name)s %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 (logging's name)
        line = super().formatMessage(record)
        fields = extra_fields(record)
        if not fields:
            return line
        pairs = " ".join(f"{key}={_text_value(fields[key])}" for key in sorted(fields))
        return f"{line} {pairs}"


def _text_value(value: Any) -> str:
    if isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, default=str, separators=(",", ":"))
    if text == "" or any(c.isspace() or c in '"=' for c in text):
        return json.dumps(text)
    return text


def configure(fmt: str = "json", level: str = "info") -> None:
    """Install one handler on the root logger (idempotent)."""
    if fmt not in ("json", "text"):
        raise ValueError(f"log format {fmt!r} is not one of json, text")
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    if root.level > logging.DEBUG:
        # Kopf logs each handler run at INFO with its settings attached; our own
        # decision and action lines say what matters.
        logging.getLogger("kopf").setLevel(logging.WARNING)
