"""Patch bodies applied to stored objects: merge patch and JSON patch.

Strategic merge patch is served as a merge patch: lists are replaced, never merged
by key. The lists our code patches (node taints, finalizers) are atomic in the real
API as well, so the difference does not show there; docs/testing.md records it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any


class PatchError(ValueError):
    """A patch the real API server would refuse (422), or a failed `test` operation."""


def _pruned(value: Any) -> Any:
    """What the real API server stores for a value a merge patch brings in whole: `null`
    members of every object are dropped, at any depth, inside arrays too (Kubernetes'
    merge-patch library prunes them; `{"a": [{"x": null, "y": 1}]}` is stored as
    `{"a": [{"y": 1}]}`). A `null` element of an array itself is kept."""
    if isinstance(value, Mapping):
        return {k: _pruned(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_pruned(v) for v in value]
    return copy.deepcopy(value)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 as Kubernetes applies it: dicts merge recursively, `None` deletes a key,
    anything else replaces, with the nulls inside what replaces pruned (``_pruned``)."""
    if not isinstance(patch, Mapping):
        return _pruned(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"JSON pointer must start with '/': {path!r}")
    return [token.replace("~1", "/").replace("~0", "~") for token in path[1:].split("/")]


def _parent(document: Any, tokens: list[str], path: str) -> Any:
    node = document
    for token in tokens[:-1]:
        if isinstance(node, list):
            try:
                node = node[int(token)]
            except (ValueError, IndexError) as exc:
                raise PatchError(f"path {path!r} does not exist") from exc
        elif isinstance(node, dict) and token in node:
            node = node[token]
        else:
            raise PatchError(f"path {path!r} does not exist")
    return node


def _get(document: Any, path: str) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return document
    parent = _parent(document, tokens, path)
    last = tokens[-1]
    if isinstance(parent, list):
        try:
            return parent[int(last)]
        except (ValueError, IndexError) as exc:
            raise PatchError(f"path {path!r} does not exist") from exc
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    raise PatchError(f"path {path!r} does not exist")


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 `add`, `remove`, `replace` and `test`; a failed `test` raises PatchError."""
    if not isinstance(operations, list):
        raise PatchError("a JSON patch must be a list of operations")
    document = copy.deepcopy(target)
    for operation in operations:
        op = operation.get("op")
        path = operation.get("path", "")
        tokens = _pointer(path)
        if op == "test":
            if _get(document, path) != operation.get("value"):
                raise PatchError(f"test operation failed at {path!r}")
            continue
        if not tokens:
            raise PatchError(f"cannot {op} the whole document")
        parent = _parent(document, tokens, path)
        last = tokens[-1]
        if op in {"remove", "replace"}:
            _get(document, path)  # must exist
        if op == "remove":
            del parent[int(last) if isinstance(parent, list) else last]
        elif op == "replace":
            parent[int(last) if isinstance(parent, list) else last] = operation["value"]
        elif op == "add":
            if isinstance(parent, list):
                index = len(parent) if last == "-" else int(last)
                parent.insert(index, operation["value"])
            elif isinstance(parent, dict):
                parent[last] = operation["value"]
            else:
                raise PatchError(f"path {path!r} does not exist")
        else:
            raise PatchError(f"unsupported JSON patch operation: {op!r}")
    return document
