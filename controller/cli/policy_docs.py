"""The policy reference in Markdown, generated from the pydantic models (one source of
truth: the field docstrings in ``policy.py``). ``pacekeeper policy docs`` prints it."""

from __future__ import annotations

import json
import types
from enum import Enum
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from pacekeeper.controller.core.policy import PolicyDocument


def policy_reference() -> str:
    """Markdown tables: one per object, each row a field with type, default, meaning."""
    sections: list[str] = []
    _walk(PolicyDocument, "", sections, seen=set())
    return "\n".join(sections)


def _walk(model: type[BaseModel], path: str, out: list[str], seen: set[type[BaseModel]]) -> None:
    title = path or "(document)"
    doc = " ".join((model.__doc__ or "").strip().split("\n\n")[0].split())
    rows = ["| field | type | default | meaning |", "|---|---|---|---|"]
    nested: list[tuple[type[BaseModel], str]] = []
    for name, info in model.model_fields.items():
        key = info.alias or name
        rows.append(
            f"| `{key}` | {_type_name(info.annotation)} | {_default(info)} | "
            f"{_one_line(info.description)} |"
        )
        sub = _model_in(info.annotation)
        if sub is not None:
            child = f"{path}.{key}" if path else key
            if _is_mapping(info.annotation):
                child += ".<name>"
            elif _is_list(info.annotation):
                child += "[]"
            nested.append((sub, child))
    out.append(f"### `{title}`\n")
    if doc:
        out.append(doc + "\n")
    out.extend(rows)
    out.append("")
    # A model used by several fields of one object (the ladder's steps) is shown once.
    by_model: dict[type[BaseModel], list[str]] = {}
    for sub, child in nested:
        by_model.setdefault(sub, []).append(child)
    for sub, children in by_model.items():
        if len(children) == 1:
            child = children[0]
        else:
            names = "|".join(c.rsplit(".", 1)[-1] for c in children)
            child = f"{children[0].rsplit('.', 1)[0]}.<{names}>"
        if sub in seen:
            continue
        seen.add(sub)
        _walk(sub, child, out, seen)


def _one_line(text: str | None) -> str:
    return " ".join((text or "").split()).replace("|", "\\|")


def _default(info: FieldInfo) -> str:
    if info.default_factory is not None:
        value: Any = info.default_factory()  # type: ignore[call-arg]
    elif info.default is PydanticUndefined:
        return "required"
    else:
        value = info.default
    if isinstance(value, BaseModel):
        dumped = value.model_dump(mode="json", by_alias=True)
        return "see below" if len(json.dumps(dumped)) > 60 else f"`{json.dumps(dumped)}`"
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, dict) and value and all(isinstance(v, BaseModel) for v in value.values()):
        return f"`{{{', '.join(value)}: ...}}`"
    return f"`{json.dumps(value)}`"


def _type_name(tp: Any) -> str:
    origin = get_origin(tp)
    if origin is Literal:
        return " \\| ".join(f"`{a}`" for a in get_args(tp))
    if origin in (Union, types.UnionType):
        return " or ".join(_type_name(a) for a in get_args(tp))
    if origin is list:
        return f"list of {_type_name(get_args(tp)[0])}"
    if origin is dict:
        k, v = get_args(tp)
        return f"map {_type_name(k)} → {_type_name(v)}"
    if hasattr(tp, "__metadata__"):
        return _type_name(get_args(tp)[0])
    if tp is type(None):
        return "null"
    if isinstance(tp, type) and issubclass(tp, Enum):
        return " \\| ".join(f"`{m.value}`" for m in tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return "object"
    return getattr(tp, "__name__", str(tp))


def _model_in(tp: Any) -> type[BaseModel] | None:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp
    for arg in get_args(tp):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _is_mapping(tp: Any) -> bool:
    return get_origin(tp) is dict


def _is_list(tp: Any) -> bool:
    return get_origin(tp) is list
