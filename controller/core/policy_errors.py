"""How a refused policy document is told to a person: ``PolicyError`` and the one-line
messages made from pydantic's errors (``policy 'gpu': thresholds.act=1.5 is outside
[0, 1]``: the policy, the field path, the value and the rule).

Separate from the models because the YAML reader (``policy_yaml.py``) raises the same
error before any model is involved, and from the reader because pydantic's error shapes
have nothing to do with YAML.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError


class PolicyError(ValueError):
    """A refused policy document; the message names the file and the field."""


def describe_errors(err: ValidationError, limit: int = 5) -> list[str]:
    """Pydantic errors as ``policy 'gpu': thresholds.act=1.5 is outside [0, 1]``."""
    out = [_describe_one(e) for e in err.errors()[:limit]]
    if err.error_count() > limit:
        out.append(f"... and {err.error_count() - limit} more")
    return out


# Strict fields: YAML "3" and "yes" are strings, not the number or boolean they look like.
_EXPECTED = {"int_type": "an integer", "float_type": "a number", "bool_type": "true or false"}


def _describe_one(e: Any) -> str:
    loc = [str(p) if isinstance(p, str) else p for p in e["loc"]]
    prefix = ""
    if len(loc) >= 2 and loc[0] == "policies":
        prefix = f"policy '{loc[1]}': "
        loc = loc[2:]
    path = _join_path(loc)
    msg = str(e["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    value = e.get("input")
    if e["type"] == "value_error" and isinstance(value, dict | list):
        # A cross-field rule: its message already names the fields inside this object.
        # "@" in such a message stands for the object's own path.
        if msg.startswith("policy '") or msg.startswith("cluster."):
            return msg
        here = "" if path == _ROOT else f"{path}."
        if "@" in msg:
            return prefix + msg.replace("@", here)
        return prefix + here + msg
    if e["type"] == "missing":
        return f"{prefix}{path} is required"
    if e["type"] == "extra_forbidden":
        return f"{prefix}{path} is not a known field"
    if value is None or isinstance(value, dict | list):
        return f"{prefix}{path}: {msg}"
    if e["type"] in _EXPECTED:
        return f"{prefix}{path}={_show(value)} must be {_EXPECTED[e['type']]}, not {_kind(value)}"
    if e["type"] == "value_error":
        return f"{prefix}{path}={_show(value)} {msg}"
    return f"{prefix}{path}={_show(value)}: {msg}"


_ROOT = "<document>"


def _join_path(loc: list[Any]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif "[" in str(part) or part in ("function-after", "function-before"):
            continue
        else:
            out += ("." if out else "") + str(part)
    return out or _ROOT


def _show(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, float) and value.is_integer():
        return str(value)
    return json.dumps(value) if isinstance(value, bool) else str(value)


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int):
        return "an integer"
    return f"a {type(value).__name__}"  # float, datetime (YAML timestamps), bytes
