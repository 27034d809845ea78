"""``pacekeeper policy validate --helm-values``: a Helm values file checked offline.

Separate from ``policy.py`` because it knows the chart: how Helm merges a values file
over the chart's defaults, how templates/policy/ renders ``policy`` and ``mode`` into the
ConfigMap, and where values.schema.json lies. The policy itself is judged by the
controller's own models, so the messages are the ones ``policy validate FILE`` and the
install-time hook print.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pacekeeper.controller.core.policy import (
    API_VERSION,
    KIND,
    PolicyDocument,
    PolicyError,
    parse_policy_document,
    read_policy_bytes,
)

CHART_OWNED_POLICY_KEYS = ("apiVersion", "kind", "mode")
"""Written by the chart (templates/policy/_helpers.tpl), never by ``values.policy``."""


def default_chart_dir() -> Path | None:
    """The chart of a source checkout (charts/pacekeeper beside the package), if any."""
    chart = Path(__file__).resolve().parents[2] / "charts" / "pacekeeper"
    return chart if (chart / "values.yaml").is_file() else None


@dataclass
class HelmValuesCheck:
    """What a values file would install: the policy document, or why not."""

    source: str
    document: PolicyDocument | None = None
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def check_helm_values(path: Path, chart_dir: Path | None) -> HelmValuesCheck:
    """Merge ``path`` over the chart's defaults as Helm does, check the result against
    values.schema.json (when the chart and jsonschema are at hand) and build the policy
    document the chart would render, with the controller's models."""
    check = HelmValuesCheck(source=str(path))
    try:
        # Read as a policy file is: a FIFO or a huge file would hang the check.
        user = yaml.safe_load(read_policy_bytes(path))
    except PolicyError as e:
        check.errors.append(str(e))
        return check
    except yaml.YAMLError as e:
        check.errors.append(f"{path}: not valid YAML: {' '.join(str(e).split())}")
        return check
    if user is None:
        user = {}
    if not isinstance(user, dict):
        check.errors.append(f"{path}: a values file must be a mapping")
        return check
    defaults: dict[str, Any] = {}
    if chart_dir is None:
        check.notes.append("no chart at hand: values.schema.json not checked (pass --chart)")
    else:
        defaults = yaml.safe_load((chart_dir / "values.yaml").read_text(encoding="utf-8"))
    values = merge_values(defaults, user)
    if chart_dir is not None:
        check.errors += _schema_errors(values, chart_dir / "values.schema.json", path, check)
    check.document = _policy_document(values, path, check)
    return check


def merge_values(defaults: dict[str, Any], user: dict[str, Any]) -> dict[str, Any]:
    """Helm's coalescing: maps merge key by key, anything else replaces, null deletes."""
    out = dict(defaults)
    for key, value in user.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_values(out[key], value)
        else:
            out[key] = value
    return out


def rendered_policy(values: dict[str, Any]) -> dict[str, Any]:
    """The document templates/policy/ writes: the header and mode over ``policy``."""
    policy = values.get("policy") or {}
    return {**policy, "apiVersion": API_VERSION, "kind": KIND, "mode": values.get("mode")}


def _policy_document(
    values: dict[str, Any], path: Path, check: HelmValuesCheck
) -> PolicyDocument | None:
    policy = values.get("policy") or {}
    if not isinstance(policy, dict):
        check.errors.append(f"{path}: policy must be a mapping")
        return None
    owned = [k for k in CHART_OWNED_POLICY_KEYS if k in policy]
    for key in owned:
        check.errors.append(f"{path}: policy.{key} is set by the chart (use the top-level value)")
    try:
        return parse_policy_document(rendered_policy(values), f"{path}: policy")
    except PolicyError as e:
        check.errors += e.problems
        return None


def _schema_errors(
    values: dict[str, Any], schema_path: Path, path: Path, check: HelmValuesCheck
) -> list[str]:
    try:
        import jsonschema
    except ImportError:  # a dev dependency; the image has the models only
        check.notes.append("jsonschema is not installed: values.schema.json not checked")
        return []
    import json

    schema = json.loads(schema_path.read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    out = []
    for error in sorted(_leaves(validator.iter_errors(values)), key=lambda e: e.json_path):
        where = "/" + "/".join(str(p) for p in error.absolute_path)
        # A broken cross-field rule says only "True was expected": its description says
        # the rule and why.
        why = rule_description(schema, list(error.absolute_schema_path))
        out.append(f"{path}: values.schema.json: at {where}: {why or error.message}")
    return list(dict.fromkeys(out))


def rule_description(schema: dict[str, Any], schema_path: list[Any]) -> str | None:
    """The ``description`` of the innermost cross-field rule (an ``allOf`` entry) that a
    failure's schema path passes through: why the rule exists, where JSON schema alone
    would say "True was expected". ``$ref`` steps are not in the path: they are followed
    wherever the next key is not found."""
    node: Any = schema
    why: str | None = None
    previous: Any = None
    for part in schema_path:
        node = _follow_refs(schema, node, part)
        if node is None:
            return why
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return why
        if previous == "allOf" and isinstance(node, dict):
            description = node.get("description")
            if isinstance(description, str):
                why = description
        previous = part
    return why


def _follow_refs(schema: dict[str, Any], node: Any, part: Any) -> Any:
    seen = 0
    while isinstance(node, dict) and part not in node and "$ref" in node and seen < 32:
        ref = str(node["$ref"])
        if not ref.startswith("#/"):
            return None
        node = schema
        for key in ref[2:].split("/"):
            node = node.get(key) if isinstance(node, dict) else None
        seen += 1
    return node


def _leaves(errors: Any) -> list[Any]:
    """An ``allOf``/``if`` failure carries the failures that caused it: report those."""
    out: list[Any] = []
    for error in errors:
        out += _leaves(error.context) if error.context else [error]
    return out
