"""Label and field selectors, as the API server reads them from query strings and PDBs."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

Predicate = Callable[[Mapping[str, str]], bool]

_SET_REQUIREMENT = re.compile(r"^\s*([^\s!=()]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")
_EQUALITY = re.compile(r"^\s*([^\s!=()]+)\s*(==|=|!=)\s*([^\s!=()]*)\s*$")
_EXISTS = re.compile(r"^\s*(!?)\s*([^\s!=()]+)\s*$")


class SelectorError(ValueError):
    """A selector string the real API server would refuse with 400."""


def _split_requirements(text: str) -> list[str]:
    # Commas separate requirements, except inside the value list of `in (a,b)`.
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [part for part in parts if part.strip()]


def _requirement(text: str) -> Predicate:
    if match := _SET_REQUIREMENT.match(text):
        key, operator, raw_values = match.groups()
        values = {value.strip() for value in raw_values.split(",") if value.strip()}
        if operator == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    if match := _EQUALITY.match(text):
        key, operator, value = match.groups()
        if operator == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    if match := _EXISTS.match(text):
        negated, key = match.groups()
        if negated:
            return lambda labels: key not in labels
        return lambda labels: key in labels
    raise SelectorError(f"unable to parse requirement: {text.strip()!r}")


def parse_label_selector(text: str | None) -> Predicate:
    """`a=b,c!=d,e in (x,y),f notin (z),g,!h`; an empty selector matches everything."""
    if not text:
        return lambda labels: True
    requirements = [_requirement(part) for part in _split_requirements(text)]
    return lambda labels: all(requirement(labels) for requirement in requirements)


def _field_value(obj: Mapping[str, Any], dotted: str) -> str:
    node: Any = obj
    for key in dotted.split("."):
        if not isinstance(node, Mapping):
            return ""
        node = node.get(key)
    return "" if node is None else str(node)


def parse_field_selector(text: str | None) -> Callable[[Mapping[str, Any]], bool]:
    """`metadata.name=x,spec.nodeName!=y`: dotted paths into the object, `=`, `==`, `!=`."""
    if not text:
        return lambda obj: True
    checks: list[tuple[str, bool, str]] = []
    for part in _split_requirements(text):
        match = _EQUALITY.match(part)
        if match is None:
            raise SelectorError(f"invalid field selector: {part.strip()!r}")
        path, operator, value = match.groups()
        checks.append((path, operator == "!=", value))
    return lambda obj: all(
        (_field_value(obj, path) != value) if negated else (_field_value(obj, path) == value)
        for path, negated, value in checks
    )


def label_selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A structured `LabelSelector` (matchLabels, matchExpressions), as in PDBs.

    An empty selector matches every pod, as in policy/v1.
    """
    if not selector:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key = expression["key"]
        operator = expression["operator"]
        values = set(expression.get("values") or [])
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True
