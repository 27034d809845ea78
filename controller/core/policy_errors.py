"""How a refused policy document is told to a person: ``PolicyError`` and the messages
made from pydantic's errors, one problem a line, each naming the policy, the field path,
the value and the rule in plain words (``policy 'gpu': thresholds.act=1.5 is outside
[0, 1]``, ``thresholds.recovr is not a known field; did you mean 'recover'?``).

Separate from the models because the YAML reader (``policy_yaml.py``) raises the same
error before any model is involved, and from the reader because pydantic's error shapes
have nothing to do with YAML. The models are passed in (``describe_errors(err, model)``)
rather than imported: they import this module.
"""

from __future__ import annotations

import difflib
import json
import re
import types
import typing
from collections.abc import Sequence
from typing import Any

import annotated_types
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo


class PolicyError(ValueError):
    """A refused policy document; the message names the file and the field, one problem
    a line (``problems``), so that a person fixes every one in one edit."""

    @property
    def problems(self) -> list[str]:
        return str(self).splitlines()


def policy_error(source: str, problems: Sequence[str]) -> PolicyError:
    """One ``PolicyError`` for every problem found in ``source``, each line naming it."""
    return PolicyError("\n".join(f"{source}: {p}" for p in problems))


def describe_errors(err: ValidationError, model: type[BaseModel] | None = None) -> list[str]:
    """Every pydantic error as ``policy 'gpu': thresholds.act=1.5 is outside [0, 1]``.

    ``model`` is the validated model: with it, an unknown field gets the closest known
    one (``did you mean 'recover'?``), and a bound names what null means where null is
    allowed."""
    out: list[str] = []
    for e in err.errors():
        out += _describe_one(e, model)
    return list(dict.fromkeys(out))


# Strict fields: YAML "3" and "yes" are strings, not the number or boolean they look like.
_EXPECTED = {
    "int_type": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
    "string_type": "a string",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "list_type": "a list",
}
_BOUND_WORDS = {
    "greater_than_equal": ("≥", "ge"),
    "greater_than": (">", "gt"),
    "less_than_equal": ("≤", "le"),
    "less_than": ("<", "lt"),
}


def _describe_one(e: Any, model: type[BaseModel] | None) -> list[str]:
    loc = [p for p in e["loc"] if isinstance(p, int) or not _is_tag(str(p))]
    prefix = ""
    if len(loc) >= 2 and loc[0] == "policies":
        prefix = f"policy '{loc[1]}': "
        path_loc = loc[2:]
    else:
        path_loc = loc
    path = _join_path(path_loc)
    msg = str(e["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    value = e.get("input")
    kind = e["type"]
    if kind == "value_error" and isinstance(value, dict | list):
        # A cross-field rule: its message already names the fields inside this object,
        # one problem a line. "@" in such a message stands for the object's own path.
        return [_cross_field(line, prefix, path) for line in msg.splitlines()]
    if kind == "missing":
        return [f"{prefix}{path} is required"]
    if kind == "extra_forbidden":
        return [prefix + _unknown_field(model, loc, path)]
    if kind in _EXPECTED:
        shown = "" if value is None or isinstance(value, dict | list) else f"={_show(value)}"
        return [f"{prefix}{path}{shown} must be {_EXPECTED[kind]}, not {_kind(value)}"]
    if kind in ("enum", "literal_error"):
        return [prefix + _not_one_of(path, value, str((e.get("ctx") or {}).get("expected", "")))]
    if kind in _BOUND_WORDS:
        return [prefix + _out_of_bounds(model, loc, path, value, kind=kind, ctx=e.get("ctx") or {})]
    if value is None or isinstance(value, dict | list):
        return [f"{prefix}{path}: {_lower_first(msg)}"]
    if kind == "value_error":
        return [f"{prefix}{path}={_show(value)} {msg}"]
    return [f"{prefix}{path}={_show(value)}: {_lower_first(msg)}"]


def _cross_field(line: str, prefix: str, path: str) -> str:
    if line.startswith("policy '") or line.startswith("cluster."):
        return line
    here = "" if path == _ROOT else f"{path}."
    if "@" in line:
        return prefix + line.replace("@", here)
    return prefix + here + line


def _unknown_field(model: type[BaseModel] | None, loc: list[Any], path: str) -> str:
    word = str(loc[-1])
    known = _field_names(_type_at(model, loc[:-1]))
    text = f"{path} is not a known field"
    if not known:
        return text
    close = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
    if not close:
        # Case alone (snake_case, different capitals) is worth a hint too.
        folded = {k.lower().replace("_", ""): k for k in known}
        hit = folded.get(word.lower().replace("_", ""))
        close = [hit] if hit else []
    if close:
        return f"{text}; did you mean '{close[0]}'?"
    return f"{text} (known: {', '.join(known)})"


def _not_one_of(path: str, value: Any, expected: str) -> str:
    options = re.findall(r"'([^']*)'", expected)
    text = f"{path}={_show(value)} must be one of {', '.join(options) or expected}"
    if isinstance(value, str):
        close = difflib.get_close_matches(value, options, n=1, cutoff=0.6)
        if close:
            text += f"; did you mean '{close[0]}'?"
    return text


def _out_of_bounds(
    model: type[BaseModel] | None,
    loc: list[Any],
    path: str,
    value: Any,
    *,
    kind: str,
    ctx: dict[str, Any],
) -> str:
    found = _field_at(model, loc)
    bounds: dict[str, Any] = {}
    nullable, description = False, None
    if found is not None:
        bounds, nullable, description = found
    lo = next(((k, bounds[k]) for k in ("ge", "gt") if k in bounds), None)
    hi = next(((k, bounds[k]) for k in ("le", "lt") if k in bounds), None)
    if lo is not None and hi is not None:
        left = "[" if lo[0] == "ge" else "("
        right = "]" if hi[0] == "le" else ")"
        rule = f"is outside {left}{_num(lo[1])}, {_num(hi[1])}{right}"
    else:
        sign, key = _BOUND_WORDS[kind]
        rule = f"must be {sign} {_num(ctx.get(key))}"
    text = f"{path}={_show(value)} {rule}"
    if nullable:
        meaning = _null_meaning(description)
        text += f" (null means {meaning})" if meaning else " (or null)"
    return text


def _null_meaning(description: str | None) -> str | None:
    if not description:
        return None
    m = re.search(r"\(null(?::| =| means) ([^)]*)\)", description) or re.search(
        r"null = ([^;.]*)", description
    )
    return m.group(1).strip() if m else None


# --- the model a path leads to ---------------------------------------------------------


def _type_at(model: type[BaseModel] | None, loc: Sequence[Any]) -> Any:
    tp: Any = model
    for part in loc:
        tp = _step(_strip(tp)[0], part)
        if tp is None:
            return None
    return _strip(tp)[0]


def _field_at(
    model: type[BaseModel] | None, loc: Sequence[Any]
) -> tuple[dict[str, Any], bool, str | None] | None:
    """The bounds (ge/gt/le/lt), nullability and description of the field at ``loc``."""
    if model is None or not loc:
        return None
    parent = _type_at(model, loc[:-1])
    if not (isinstance(parent, type) and issubclass(parent, BaseModel)):
        return None
    info = _field_info(parent, loc[-1])
    if info is None:
        return None
    _, nullable, metadata = _strip(info.annotation)
    bounds: dict[str, Any] = {}
    for item in [*info.metadata, *metadata]:
        for key in ("ge", "gt", "le", "lt"):
            if isinstance(item, getattr(annotated_types, key.capitalize())):
                bounds[key] = getattr(item, key)
    return bounds, nullable, info.description


def _field_info(model: type[BaseModel], part: Any) -> FieldInfo | None:
    for name, info in model.model_fields.items():
        if part in (name, info.alias):
            return info
    return None


def _step(tp: Any, part: Any) -> Any:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        info = _field_info(tp, part)
        return None if info is None else info.annotation
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is dict and len(args) == 2:
        return args[1]
    if origin is list and args and isinstance(part, int):
        return args[0]
    return None


def _strip(tp: Any) -> tuple[Any, bool, list[Any]]:
    """``tp`` without ``Annotated`` and ``| None``: (the type, whether None is allowed,
    the metadata that was around it, FieldInfo's own metadata flattened in)."""
    nullable = False
    metadata: list[Any] = []
    while True:
        if typing.get_origin(tp) is typing.Annotated:
            for item in tp.__metadata__:
                metadata += [*item.metadata] if isinstance(item, FieldInfo) else [item]
            tp = tp.__origin__
            continue
        if typing.get_origin(tp) in (typing.Union, types.UnionType):
            rest = [a for a in typing.get_args(tp) if a is not type(None)]
            nullable = nullable or len(rest) < len(typing.get_args(tp))
            if len(rest) == 1:
                tp = rest[0]
                continue
        return tp, nullable, metadata


def _field_names(tp: Any) -> list[str]:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [info.alias or name for name, info in tp.model_fields.items()]
    return []


# --- words -----------------------------------------------------------------------------

_ROOT = "<document>"


def _is_tag(part: str) -> bool:
    """pydantic's own steps in a location (``function-after[...]``), not the user's keys."""
    return "[" in part or part in ("function-after", "function-before", "function-wrap")


def _join_path(loc: list[Any]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or _ROOT


def _lower_first(msg: str) -> str:
    return msg[:1].lower() + msg[1:]


def _num(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _show(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, float) and value.is_integer():
        return str(value)
    return json.dumps(value) if isinstance(value, bool) else str(value)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__}"  # float, datetime (YAML timestamps), bytes
