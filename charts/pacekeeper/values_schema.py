"""The generator of values.schema.json, from the chart's pydantic models.

Helm checks every install and upgrade against values.schema.json, so a bad value fails
before anything reaches the cluster, with a message naming the key. The schema is
generated, never edited: the chart-level keys come from the models in values_models.py
and the ``policy`` key from ``pacekeeper.controller.core.policy.policy_json_schema()``, so
the chart and the controller cannot disagree about what a valid policy is.

    python charts/pacekeeper/values_schema.py           # rewrite values.schema.json
    python charts/pacekeeper/values_schema.py --check   # exit 1 when the file is stale

Cross-field rules (replicas need leader election, ...) are written twice on purpose: as
pydantic validators for Python callers and as JSON-schema ``if``/``then`` blocks for Helm,
and tests/chart checks that both refuse the same values. Each block carries a
``description`` saying the rule and why in plain words: JSON schema's own message for a
broken ``then`` is only "True was expected", and ``pacekeeper policy validate
--helm-values`` prints the description instead (a block is found by its place in an
``allOf``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic.alias_generators import to_camel

from pacekeeper.controller.core.policy import (
    PREREQUISITE_WHY,
    PREREQUISITES,
    Ladder,
    PolicyDocument,
    ScoreKind,
    policy_json_schema,
)

SCHEMA_PATH = Path(__file__).with_name("values.schema.json")
VALUES_PATH = Path(__file__).with_name("values.yaml")


def _load_models() -> ModuleType:
    """values_models.py, beside this file, whether this runs as a script or is loaded by
    path (tests/chart): registered in sys.modules, where pydantic resolves annotations."""
    name = "pacekeeper_chart_values_models"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(
        name, Path(__file__).with_name("values_models.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_models = _load_models()
Actions = _models.Actions
ChartValues = _models.ChartValues
_CHART_OWNED_POLICY_KEYS = _models.CHART_OWNED_POLICY_KEYS

# The model validators above, restated as JSON schema for Helm. Each entry is
# (where in the schema, the if/then block).
_CROSS_FIELD_RULES: list[tuple[tuple[str, ...], dict[str, Any]]] = [
    (
        ("Controller",),
        {
            "description": "controller.replicas of 2 or more needs "
            "controller.leaderElection.enabled=true: two active controllers would act twice",
            "if": {"properties": {"replicas": {"minimum": 2}}, "required": ["replicas"]},
            "then": {
                "properties": {
                    "leaderElection": {
                        "properties": {"enabled": {"const": True}},
                        "required": ["enabled"],
                    }
                },
                "required": ["leaderElection"],
            },
        },
    ),
    (
        ("Metrics",),
        {
            "description": "metrics.enabled=false turns off what scrapes or shows the "
            "metrics too: serviceMonitor, prometheusRule, networkPolicy and grafanaDashboard "
            "need metrics.enabled=true",
            "if": {"properties": {"enabled": {"const": False}}, "required": ["enabled"]},
            "then": {
                "properties": {
                    key: {"properties": {"enabled": {"const": False}}}
                    for key in (
                        "serviceMonitor",
                        "prometheusRule",
                        "networkPolicy",
                        "grafanaDashboard",
                    )
                }
            },
        },
    ),
    (
        ("Metrics",),
        {
            "description": "metrics.serviceMonitor.enabled=true needs metrics.access "
            "kubernetes or open: with localhost no Service reaches /metrics",
            "if": {"properties": {"access": {"const": "localhost"}}, "required": ["access"]},
            "then": {
                "properties": {"serviceMonitor": {"properties": {"enabled": {"const": False}}}}
            },
        },
    ),
    (
        ("Metrics",),
        {
            "description": "metrics.scrapers is only read with metrics.access=kubernetes: "
            "the other modes do not check who scrapes, so the list would be ignored",
            "if": {"properties": {"access": {"const": "kubernetes"}}, "required": ["access"]},
            "else": {"properties": {"scrapers": {"maxItems": 0}}},
        },
    ),
    (
        ("Tls",),
        {
            "description": "tls.source=secret needs tls.secret.name: the Secret holding the "
            "certificate",
            "if": {"properties": {"source": {"const": "secret"}}, "required": ["source"]},
            "then": {
                "properties": {
                    "secret": {"properties": {"name": {"minLength": 1}}, "required": ["name"]}
                },
                "required": ["secret"],
            },
        },
    ),
    (
        ("ServiceAccount",),
        {
            "description": "serviceAccount.create=false needs serviceAccount.name: the "
            "existing account the controller runs as",
            "if": {"properties": {"create": {"const": False}}, "required": ["create"]},
            "then": {"properties": {"name": {"minLength": 1}}, "required": ["name"]},
        },
    ),
    (
        ("ReporterRbac",),
        {
            "description": "reporterRbac.enabled=true needs at least one entry in "
            "reporterRbac.bindings: it grants reporting rights to those service accounts only",
            "if": {"properties": {"enabled": {"const": True}}, "required": ["enabled"]},
            "then": {"properties": {"bindings": {"minItems": 1}}, "required": ["bindings"]},
        },
    ),
]


# ChartValues._webhook_from_a_secret_needs_its_ca, for Helm.
_WEBHOOK_FROM_A_SECRET_NEEDS_ITS_CA: dict[str, Any] = {
    "description": "tls.secret.caBundle is required when webhook.enabled=true and "
    "tls.source=secret: the apiserver must trust the webhook's certificate",
    "if": {
        "properties": {
            "webhook": {"properties": {"enabled": {"const": True}}, "required": ["enabled"]},
            "tls": {"properties": {"source": {"const": "secret"}}, "required": ["source"]},
        },
        "required": ["webhook", "tls"],
    },
    "then": {
        "properties": {
            "tls": {
                "properties": {
                    "secret": {
                        "properties": {"caBundle": {"minLength": 1}},
                        "required": ["caBundle"],
                    }
                },
                "required": ["secret"],
            }
        }
    },
}


def value_comments(values_yaml: str) -> dict[tuple[str, ...], str]:
    """The ``# --`` comment of each key in values.yaml, by key path.

    A comment block starts at ``# --`` and runs until the key it documents; it is the
    one place a value is described (the schema's descriptions come from here).
    """
    comments: dict[tuple[str, ...], str] = {}
    stack: list[tuple[int, str]] = []
    pending: list[str] | None = None
    for raw in values_yaml.splitlines():
        line = raw.strip()
        if line.startswith("# --"):
            pending = [line[4:].strip()]
            continue
        if line.startswith("#"):
            if pending is not None:
                pending.append(line[1:].strip())
            continue
        if not line or line.startswith("-") or ":" not in line:
            pending = None if not line else pending
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        key = line.split(":", 1)[0].strip()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, key))
        if pending is not None:
            comments[tuple(k for _, k in stack)] = " ".join(pending)
        pending = None
    return comments


def _strip_titles(node: Any) -> Any:
    """Drop pydantic's generated titles ("Podannotations"): descriptions say more."""
    if isinstance(node, dict):
        return {
            k: _strip_titles(v)
            for k, v in node.items()
            if not (k == "title" and isinstance(v, str))
        }
    if isinstance(node, list):
        return [_strip_titles(item) for item in node]
    return node


def _inline_refs(node: Any, defs: dict[str, Any]) -> Any:
    """Replace every ``$ref`` by a copy of its definition (the chart's models are not
    recursive), so each key gets its own description: ``actions.*.enabled`` share a model
    but not a meaning."""
    if isinstance(node, dict):
        if "$ref" in node:
            target = defs[node["$ref"].rsplit("/", 1)[1]]
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            return {**_inline_refs(target, defs), **_inline_refs(siblings, defs)}
        return {k: _inline_refs(v, defs) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline_refs(item, defs) for item in node]
    return node


def _describe(
    node: dict[str, Any],
    path: tuple[str, ...],
    comments: dict[tuple[str, ...], str],
) -> None:
    """Copy each values.yaml comment onto its property."""
    for name, prop in node.get("properties", {}).items():
        key = (*path, name)
        if key in comments:
            prop["description"] = comments[key]
        if key[0] != "policy":
            _describe(prop, key, comments)


def _ladder_needs_granted_action(action: str) -> dict[str, Any]:
    """In enforce mode, a ladder step of a policy that does not lower its own mode needs
    ``actions.<action>.enabled``: without it the controller has no RBAC for the step."""
    step_disabled = {
        "properties": {
            "ladder": {"properties": {action: {"properties": {"enabled": {"const": False}}}}}
        }
    }
    return {
        "description": f"ladder.{action}.enabled=true in enforce mode needs "
        f"actions.{action}.enabled=true: without it the chart grants the controller no RBAC "
        "for the step, and every such action would fail (or lower this policy's mode)",
        "if": {
            "properties": {
                "mode": {"const": "enforce"},
                "actions": {"properties": {action: {"properties": {"enabled": {"const": False}}}}},
            },
            "required": ["mode", "actions"],
        },
        "then": {
            "properties": {
                "policy": {
                    "properties": {
                        "policies": {
                            "additionalProperties": {
                                "if": {
                                    "properties": {"mode": {"enum": ["observe", "dry-run"]}},
                                    "required": ["mode"],
                                },
                                "else": step_disabled,
                            }
                        }
                    }
                }
            }
        },
    }


def _rewrite_refs(node: Any, old_prefix: str, new_prefix: str) -> Any:
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str) and value.startswith(old_prefix):
                out[key] = new_prefix + value[len(old_prefix) :]
            else:
                out[key] = _rewrite_refs(value, old_prefix, new_prefix)
        return out
    if isinstance(node, list):
        return [_rewrite_refs(item, old_prefix, new_prefix) for item in node]
    return node


def embed_policy_schema(schema: dict[str, Any], policy_schema: dict[str, Any]) -> dict[str, Any]:
    """Put the controller's policy schema under ``properties.policy``.

    Its ``$defs`` move to the root (prefixed ``Policy.``) because ``$ref`` resolves
    against the document root.
    """
    policy = dict(policy_schema)
    for key in ("$schema", "$id", "title"):
        policy.pop(key, None)
    # The chart writes the header and the mode itself (from the top-level `mode`).
    policy["properties"] = {
        k: v for k, v in policy["properties"].items() if k not in _CHART_OWNED_POLICY_KEYS
    }
    if "required" in policy:
        policy["required"] = [k for k in policy["required"] if k not in _CHART_OWNED_POLICY_KEYS]
    policy["description"] = (
        "Body of the controller's policy document (pacekeeper.controller.core.policy)."
    )
    policy_defs = policy.pop("$defs", {})
    policy = _rewrite_refs(policy, "#/$defs/", "#/$defs/Policy.")
    defs = schema.setdefault("$defs", {})
    for name, definition in policy_defs.items():
        defs[f"Policy.{name}"] = _rewrite_refs(definition, "#/$defs/", "#/$defs/Policy.")
    schema["properties"]["policy"] = policy
    return schema


def _enabled(step: str, *, by_default: bool) -> dict[str, Any]:
    """The ladder step is enabled; absent counts as its default."""
    enabled = {"properties": {"enabled": {"const": True}}}
    if by_default:
        return {"properties": {step: enabled}}
    return {"properties": {step: {**enabled, "required": ["enabled"]}}, "required": [step]}


def _policy_rules() -> dict[str, list[dict[str, Any]]]:
    """The policy models' validators that JSON schema can state, by definition name.

    What it cannot (``thresholds.recover`` above ``act``, ``defaultPolicy`` naming a
    policy that is not defined, the enforce-mode budget refusals) is refused at install
    by the validation hook (templates/policy/validation-job.yaml), which runs the
    controller's own loader.
    """
    defaults = Ladder()
    field = {name: to_camel(name) for name in Ladder.model_fields}
    by_default = {field[name]: step.enabled for name, step in defaults}
    ladder = [
        {
            "description": f"ladder.{kind.value}.enabled=true needs its prerequisite "
            f"ladder.{needs.value}.enabled=true: {PREREQUISITE_WHY[kind]}",
            "if": _enabled(kind.value, by_default=by_default[kind.value]),
            "then": _enabled(needs.value, by_default=by_default[needs.value]),
        }
        for kind, needs in PREREQUISITES.items()
    ]
    section_kinds = [ScoreKind.SECTION_RELATIVE.value, ScoreKind.SECTION_INDIVIDUAL.value]
    score = {
        "description": "score.section is required with kind sectionRelative or "
        "sectionIndividual (it names the section that judges the rank) and refused with the "
        "other kinds, which never read it",
        "if": {"properties": {"kind": {"enum": section_kinds}}, "required": ["kind"]},
        "then": {
            "properties": {"section": {"type": "string", "pattern": r"\S"}},
            "required": ["section"],
        },
        "else": {"properties": {"section": {"type": "null"}}},
    }
    return {
        "Policy.Ladder": ladder,
        "Policy.ScoreSelector": [score],
        "Policy.NodeSelector": [
            {
                "description": "matchLabels is empty and would match every node",
                "properties": {"matchLabels": {"minProperties": 1}},
            }
        ],
    }


def _document_rules() -> list[dict[str, Any]]:
    """The document's own: at least one policy, and without a ``defaultPolicy`` (or with
    ``default``) one named ``default``."""
    default = PolicyDocument.model_fields["default_policy"].default
    return [
        {
            "description": "policies is empty; define at least one policy (jobs need one to "
            "be judged by)",
            "properties": {"policies": {"minProperties": 1}},
        },
        {
            "description": f"without a defaultPolicy (or with {default!r}) a policy named "
            f"{default!r} must exist: jobs without a pacekeeper.dev/policy annotation use it",
            "if": {"properties": {"defaultPolicy": {"const": default}}},
            "then": {"properties": {"policies": {"required": [default]}}},
        },
    ]


def build_schema(policy_schema: dict[str, Any]) -> dict[str, Any]:
    schema = ChartValues.model_json_schema(by_alias=True, mode="validation")
    for path, rule in _CROSS_FIELD_RULES:
        target = schema["$defs"][path[0]]
        target.setdefault("allOf", []).append(rule)
    defs = schema.pop("$defs")
    schema = _inline_refs(schema, defs)
    schema = embed_policy_schema(schema, policy_schema)
    for name, rules in _policy_rules().items():
        schema["$defs"][name].setdefault("allOf", []).extend(rules)
    schema["properties"]["policy"].setdefault("allOf", []).extend(_document_rules())
    schema["allOf"] = [_ladder_needs_granted_action(to_camel(a)) for a in Actions.model_fields]
    schema["allOf"].append(_WEBHOOK_FROM_A_SECRET_NEEDS_ITS_CA)
    # Helm validates the merged values, so every default is present: the top-level
    # keys the chart needs are required (a null override that deletes one fails here).
    schema["required"] = sorted({"mode", "controller", "actions", "metrics", "policy"})
    schema = dict(_strip_titles(schema))
    _describe(schema, (), value_comments(VALUES_PATH.read_text()))
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "pacekeeper chart values"
    schema["description"] = "GENERATED by charts/pacekeeper/values_schema.py; do not edit."
    return schema


def render_schema() -> str:
    schema = build_schema(policy_json_schema())
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when the file is stale")
    args = parser.parse_args(argv)
    wanted = render_schema()
    current = SCHEMA_PATH.read_text() if SCHEMA_PATH.exists() else ""
    if args.check:
        if current != wanted:
            print(
                f"{SCHEMA_PATH} is stale: run python {Path(__file__).as_posix()}",
                file=sys.stderr,
            )
            return 1
        return 0
    if current != wanted:
        SCHEMA_PATH.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
