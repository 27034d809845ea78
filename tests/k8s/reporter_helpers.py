"""Shared by the reporter tests: the CRD's schema as a validator, RFC 7386 apply."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

CRD_PATH = Path(__file__).parents[2] / "charts/pacekeeper/crds/stragglerreports.pacekeeper.dev.yaml"


def crd() -> dict[str, Any]:
    return yaml.safe_load(CRD_PATH.read_text())  # type: ignore[no-any-return]


def _to_json_schema(node: Any) -> Any:
    """OpenAPI 3.0 (as in CRDs) to JSON Schema draft 4: ``nullable`` becomes a type union;
    Kubernetes ``x-`` extensions are dropped."""
    if isinstance(node, list):
        return [_to_json_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _to_json_schema(v) for k, v in node.items() if not k.startswith("x-")}
    if out.pop("nullable", False) and "type" in out:
        out["type"] = [out["type"], "null"]
    return out


def status_validator() -> Any:
    import jsonschema

    schema = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return jsonschema.Draft4Validator(_to_json_schema(schema["properties"]["status"]))


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386, written out plainly as the reference for our patch builder."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_merge_patch(result.get(key), value)
    return result
