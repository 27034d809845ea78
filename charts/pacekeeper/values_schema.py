"""The chart's values as pydantic models, and the generator of values.schema.json.

Helm checks every install and upgrade against values.schema.json, so a bad value fails
before anything reaches the cluster, with a message naming the key. The schema is
generated, never edited: the chart-level keys come from the models below and the
``policy`` key from ``pacekeeper.controller.core.policy.policy_json_schema()``, so the chart
and the controller cannot disagree about what a valid policy is.

    python charts/pacekeeper/values_schema.py           # rewrite values.schema.json
    python charts/pacekeeper/values_schema.py --check   # exit 1 when the file is stale

Cross-field rules (replicas need leader election, ...) are written twice on purpose: as
pydantic validators for Python callers and as JSON-schema ``if``/``then`` blocks for Helm,
and tests/chart checks that both refuse the same values.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel, to_snake

from pacekeeper.controller.core.policy import (
    API_VERSION,
    KIND,
    PREREQUISITES,
    Ladder,
    PolicyDocument,
    ScoreKind,
    parse_policy_document,
    policy_json_schema,
)

SCHEMA_PATH = Path(__file__).with_name("values.schema.json")
VALUES_PATH = Path(__file__).with_name("values.yaml")

Mode = Literal["observe", "dry-run", "enforce"]
PullPolicy = Literal["Always", "IfNotPresent", "Never"]
# Kubernetes resource quantities: "500m", "0.5", "128Mi", "1Gi", 2.
Quantity = (
    Annotated[
        str,
        Field(pattern=r"^[+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+|[numkMGTPE]i?|Ki)?$"),
    ]
    | Annotated[int, Field(ge=0)]
    | Annotated[float, Field(ge=0)]
)
DnsLabel = Annotated[
    str, Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
]
StringMap = dict[str, str]


class _Values(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class Image(_Values):
    repository: str = Field(default="localhost/pacekeeper-controller", min_length=1)
    tag: str = Field(default="", description="Image tag. Empty: the chart's appVersion.")
    digest: str = Field(default="", pattern=r"^(sha256:[0-9a-f]{64})?$")
    pull_policy: PullPolicy = "IfNotPresent"


class ResourceList(_Values):
    cpu: Quantity | None = None
    memory: Quantity | None = None
    ephemeral_storage: Quantity | None = Field(default=None, alias="ephemeral-storage")


class Resources(_Values):
    """Requests are required: an unrequested controller is the first pod evicted."""

    requests: ResourceList
    limits: ResourceList | None = None


class LeaderElection(_Values):
    enabled: bool = Field(default=True, description="Elect one active replica through a Lease.")


class Logging(_Values):
    format: Literal["json", "text"] = "json"
    level: Literal["debug", "info", "warning", "error"] = "info"


class Controller(_Values):
    replicas: int = Field(
        default=1, ge=1, description="Controller pods; > 1 needs leader election."
    )
    image: Image = Image()
    image_pull_secrets: list[dict[str, str]] = []
    resources: Resources
    security_context: dict[str, Any] = Field(description="Container securityContext.")
    pod_security_context: dict[str, Any] = Field(description="Pod securityContext.")
    leader_election: LeaderElection = LeaderElection()
    logging: Logging = Logging()
    workers: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description="Reconciles in flight at once, never two of one job; null: the "
        "controller's default (4).",
    )
    pod_annotations: StringMap = {}
    pod_labels: StringMap = {}
    priority_class_name: str = ""
    node_selector: StringMap = {}
    tolerations: list[dict[str, Any]] = []
    affinity: dict[str, Any] = {}

    @model_validator(mode="after")
    def _replicas_need_leader_election(self) -> Self:
        if self.replicas > 1 and not self.leader_election.enabled:
            raise ValueError(
                f"controller.replicas={self.replicas} needs controller.leaderElection.enabled="
                "true: two active controllers would act twice"
            )
        return self


class Toggle(_Values):
    enabled: bool


class Actions(_Values):
    notify: Toggle = Toggle(enabled=True)
    restart_rank: Toggle = Toggle(enabled=False)
    taint_node: Toggle = Toggle(enabled=False)
    cordon_node: Toggle = Toggle(enabled=False)
    drain_node: Toggle = Toggle(enabled=False)


class ServiceAccount(_Values):
    create: bool = True
    name: str = Field(default="", max_length=253)
    annotations: StringMap = {}

    @model_validator(mode="after")
    def _existing_needs_name(self) -> Self:
        if not self.create and not self.name:
            raise ValueError("serviceAccount.name is required when serviceAccount.create=false")
        return self


class ServiceMonitor(_Values):
    enabled: bool = False
    interval: str = Field(default="30s", pattern=r"^([0-9]+(ms|s|m|h|d|w|y))+$")
    labels: StringMap = {}


class PrometheusRule(_Values):
    enabled: bool = False
    labels: StringMap = {}


class GrafanaDashboard(_Values):
    enabled: bool = False
    labels: StringMap = {"grafana_dashboard": "1"}
    namespace: str = Field(default="", max_length=63)


class MetricsNetworkPolicy(_Values):
    enabled: bool = False
    from_: list[dict[str, Any]] = Field(default=[], alias="from")


class Metrics(_Values):
    enabled: bool = True
    port: int = Field(default=8080, ge=1024, le=65535)
    service_monitor: ServiceMonitor = ServiceMonitor()
    prometheus_rule: PrometheusRule = PrometheusRule()
    network_policy: MetricsNetworkPolicy = MetricsNetworkPolicy()
    grafana_dashboard: GrafanaDashboard = GrafanaDashboard()

    @model_validator(mode="after")
    def _monitoring_needs_metrics(self) -> Self:
        if not self.enabled:
            for key, part in (
                ("serviceMonitor", self.service_monitor),
                ("prometheusRule", self.prometheus_rule),
                ("networkPolicy", self.network_policy),
                ("grafanaDashboard", self.grafana_dashboard),
            ):
                if part.enabled:
                    raise ValueError(f"metrics.{key}.enabled=true needs metrics.enabled=true")
        return self


class PodDisruptionBudget(_Values):
    enabled: bool = False
    min_available: Annotated[int, Field(ge=0)] | Annotated[str, Field(pattern=r"^[0-9]{1,3}%$")] = 1


DnsSubdomain = Annotated[
    str,
    Field(
        min_length=1,
        max_length=253,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
    ),
]


class ReporterBinding(_Values):
    """The training pods of one ServiceAccount: what they may report into."""

    namespace: DnsLabel
    service_account: DnsSubdomain
    """The ServiceAccount the job's pods run as; give each job (or team) its own, since
    RBAC cannot tell two jobs of one ServiceAccount apart."""
    reports: list[DnsSubdomain] = []
    """StragglerReports (one per job, named after it) whose status these pods may patch;
    empty: every report of the namespace."""


class ReporterRbac(_Values):
    enabled: bool = False
    bindings: list[ReporterBinding] = []

    @model_validator(mode="after")
    def _enabled_needs_bindings(self) -> Self:
        if self.enabled and not self.bindings:
            raise ValueError("reporterRbac.bindings is empty while reporterRbac.enabled=true")
        seen: set[tuple[str, str]] = set()
        for i, b in enumerate(self.bindings):
            key = (b.namespace, b.service_account)
            if key in seen:
                raise ValueError(
                    f"reporterRbac.bindings[{i}]: serviceAccount {b.service_account!r} in "
                    f"namespace {b.namespace!r} is listed twice"
                )
            seen.add(key)
        return self


class PolicyValidation(_Values):
    enabled: bool = True
    timeout_s: int = Field(default=300, ge=10, le=3600)


class TestImage(_Values):
    repository: str = Field(default="busybox", min_length=1)
    tag: str = Field(default="1.37", min_length=1)
    pull_policy: PullPolicy = "IfNotPresent"


class Tests(_Values):
    image: TestImage = TestImage()


class ChartValues(_Values):
    """Top level of values.yaml."""

    mode: Mode = Field(default="observe", description="observe | dry-run | enforce.")
    name_override: str = Field(default="", max_length=40)
    fullname_override: str = Field(default="", max_length=52)
    controller: Controller
    policy: dict[str, Any] = Field(
        default_factory=dict, description="Policy document body; its schema is the controller's."
    )
    policy_validation: PolicyValidation = PolicyValidation()
    actions: Actions = Actions()
    service_account: ServiceAccount = ServiceAccount()
    metrics: Metrics = Metrics()
    pod_disruption_budget: PodDisruptionBudget = PodDisruptionBudget()
    reporter_rbac: ReporterRbac = ReporterRbac()
    tests: Tests = Tests()
    # Parent charts pass `global` to every subchart.
    global_: dict[str, Any] | None = Field(default=None, alias="global")

    def policy_document(self) -> PolicyDocument:
        """The document the chart renders into the policy ConfigMap, validated."""
        owned = sorted(_CHART_OWNED_POLICY_KEYS & set(self.policy))
        if owned:
            raise ValueError(
                f"policy.{owned[0]} is set by the chart (use the top-level value instead)"
            )
        data = {**self.policy, "apiVersion": API_VERSION, "kind": KIND, "mode": self.mode}
        return parse_policy_document(data, "values.policy")

    @model_validator(mode="after")
    def _policy_within_granted_actions(self) -> Self:
        document = self.policy_document()
        if self.mode != "enforce":
            return self
        granted = {name for name, toggle in self.actions if toggle.enabled}
        for name, policy in document.policies.items():
            if policy.mode is not None and policy.mode.value != "enforce":
                continue
            for step in policy.ladder.enabled_steps():
                if to_snake(step.value) not in granted:
                    raise ValueError(
                        f"policy.policies.{name}.ladder.{step.value}.enabled=true in enforce "
                        f"mode needs actions.{step.value}.enabled=true (its RBAC)"
                    )
        return self


# The model validators above, restated as JSON schema for Helm. Each entry is
# (where in the schema, the if/then block).
_CROSS_FIELD_RULES: list[tuple[tuple[str, ...], dict[str, Any]]] = [
    (
        ("Controller",),
        {
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
        ("ServiceAccount",),
        {
            "if": {"properties": {"create": {"const": False}}, "required": ["create"]},
            "then": {"properties": {"name": {"minLength": 1}}, "required": ["name"]},
        },
    ),
    (
        ("ReporterRbac",),
        {
            "if": {"properties": {"enabled": {"const": True}}, "required": ["enabled"]},
            "then": {"properties": {"bindings": {"minItems": 1}}, "required": ["bindings"]},
        },
    ),
]


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


_CHART_OWNED_POLICY_KEYS = frozenset({"apiVersion", "kind", "mode"})


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
            "if": _enabled(kind.value, by_default=by_default[kind.value]),
            "then": _enabled(needs.value, by_default=by_default[needs.value]),
        }
        for kind, needs in PREREQUISITES.items()
    ]
    section_kinds = [ScoreKind.SECTION_RELATIVE.value, ScoreKind.SECTION_INDIVIDUAL.value]
    score = {
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
        "Policy.NodeSelector": [{"properties": {"matchLabels": {"minProperties": 1}}}],
    }


def _document_rules() -> list[dict[str, Any]]:
    """The document's own: at least one policy, and without a ``defaultPolicy`` (or with
    ``default``) one named ``default``."""
    default = PolicyDocument.model_fields["default_policy"].default
    return [
        {"properties": {"policies": {"minProperties": 1}}},
        {
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
