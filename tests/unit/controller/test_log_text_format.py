"""``--log-format text`` keeps the structured fields: after the message, as key=value."""

from __future__ import annotations

import json
import logging
import shlex
import sys

import pytest

from pacekeeper.controller.runtime.logs import JsonFormatter, TextFormatter, configure


def _record(msg: str = "action applied", **extra: object) -> logging.LogRecord:
    logger = logging.getLogger("pacekeeper.controller.test")
    return logger.makeRecord(logger.name, logging.INFO, __file__, 1, msg, (), None, extra=extra)


def test_text_line_carries_the_extra_fields_sorted_and_quoted_when_spaced() -> None:
    line = TextFormatter().format(
        _record(node="gpu-7", job="ml/llm", reason="BelowThreshold", note="slow rank 3", n=2)
    )
    assert line == (
        "INFO pacekeeper.controller.test action applied "
        'job=ml/llm n=2 node=gpu-7 note="slow rank 3" reason=BelowThreshold'
    )


def test_text_values_split_back_into_their_fields() -> None:
    fields = {
        "empty": "",
        "quote": 'say "hi"',
        "eq": "a=b",
        "evidence": {"scores": [0.5, 0.25], "why": "two ranks"},
        "none": None,
        "flag": True,
        "lines": "one\ntwo",
    }
    line = TextFormatter().format(_record("m", **fields))
    pairs = dict(p.split("=", 1) for p in shlex.split(line.split(" ", 3)[3], posix=True))
    assert pairs["empty"] == "" and pairs["quote"] == 'say "hi"' and pairs["eq"] == "a=b"
    assert json.loads(pairs["evidence"]) == fields["evidence"]
    assert pairs["none"] == "null" and pairs["flag"] == "true"
    assert "\n" not in line


def test_text_line_without_extra_is_the_plain_message_and_keeps_the_traceback() -> None:
    assert TextFormatter().format(_record("leader elected")) == (
        "INFO pacekeeper.controller.test leader elected"
    )
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        record = _record("action failed", job="ml/llm")
        record.exc_info = sys.exc_info()
    text = TextFormatter().format(record)
    first, *rest = text.splitlines()
    assert first.endswith("action failed job=ml/llm")
    assert "RuntimeError: boom" in rest[-1]


def test_json_format_is_unchanged() -> None:
    out = json.loads(JsonFormatter().format(_record(job="ml/llm", n=2)))
    assert {k: out[k] for k in ("level", "logger", "msg", "job", "n")} == {
        "level": "info",
        "logger": "pacekeeper.controller.test",
        "msg": "action applied",
        "job": "ml/llm",
        "n": 2,
    }


def test_configure_text_installs_the_field_keeping_formatter() -> None:
    root, kopf = logging.getLogger(), logging.getLogger("kopf")
    saved, level, kopf_level = root.handlers[:], root.level, kopf.level
    try:
        configure("text", "info")
        (handler,) = root.handlers
        assert isinstance(handler.formatter, TextFormatter)
        with pytest.raises(ValueError, match="log format"):
            configure("yaml")
    finally:
        root.handlers[:] = saved
        root.setLevel(level)
        kopf.setLevel(kopf_level)
