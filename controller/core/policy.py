"""Remediation policies: the YAML document, validated at the boundary by pydantic.

A ``PolicyDocument`` (``apiVersion: pacekeeper.dev/v1alpha1``, ``kind: RemediationPolicies``)
holds named policies plus the cluster-wide safety settings (cluster budget, rate limit,
circuit breaker, opt-outs) and the controller's mode. Jobs pick a policy by name with the
``pacekeeper.dev/policy`` annotation; the rest get ``defaultPolicy``.

Dangerous or contradictory documents are refused with ``PolicyError`` whose message names
the file and the field: ``policy 'gpu': thresholds.act=1.5 is outside [0, 1]``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal, Self

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

API_VERSION: Literal["pacekeeper.dev/v1alpha1"] = "pacekeeper.dev/v1alpha1"
KIND: Literal["RemediationPolicies"] = "RemediationPolicies"


class Mode(StrEnum):
    """How far the controller may go. Ordered: observe < dry-run < enforce."""

    OBSERVE = "observe"
    DRY_RUN = "dry-run"
    ENFORCE = "enforce"

    @property
    def level(self) -> int:
        return _MODE_LEVEL[self]

    @staticmethod
    def lowest(*modes: Mode | None) -> Mode:
        """The most cautious of the modes given (``None`` = not set at that level)."""
        present = [m for m in modes if m is not None]
        return min(present, key=lambda m: m.level) if present else Mode.OBSERVE


_MODE_LEVEL = {Mode.OBSERVE: 0, Mode.DRY_RUN: 1, Mode.ENFORCE: 2}


class ScoreKind(StrEnum):
    GPU_RELATIVE = "gpuRelative"
    GPU_INDIVIDUAL = "gpuIndividual"
    SECTION_RELATIVE = "sectionRelative"
    SECTION_INDIVIDUAL = "sectionIndividual"
    WORST = "worst"


class ActionKind(StrEnum):
    """The ladder's steps, in escalation order."""

    NOTIFY = "notify"
    RESTART_RANK = "restartRank"
    TAINT_NODE = "taintNode"
    DRAIN_NODE = "drainNode"
    CORDON_NODE = "cordonNode"


LADDER_ORDER: tuple[ActionKind, ...] = tuple(ActionKind)
NODE_ACTIONS = frozenset({ActionKind.TAINT_NODE, ActionKind.DRAIN_NODE, ActionKind.CORDON_NODE})
"""Hardware actions: never taken for workload imbalance or a job-wide slowdown."""
DISRUPTIVE_ACTIONS = NODE_ACTIONS | {ActionKind.RESTART_RANK}
"""Actions that budgets, rate limits and the breaker govern (notify and undo are free)."""

PREREQUISITES: dict[ActionKind, ActionKind] = {
    ActionKind.RESTART_RANK: ActionKind.NOTIFY,
    ActionKind.TAINT_NODE: ActionKind.NOTIFY,
    # Draining without our NoSchedule taint lets the job's replacement pods land right
    # back on the suspect node; cordoning is the escalation of the taint, not a shortcut.
    ActionKind.DRAIN_NODE: ActionKind.TAINT_NODE,
    ActionKind.CORDON_NODE: ActionKind.TAINT_NODE,
}


# --- field types ------------------------------------------------------------------


def _unit_interval(v: float) -> float:
    if not (0.0 <= v <= 1.0) or math.isnan(v):
        raise ValueError("is outside [0, 1]")
    return v


def _percent(v: float) -> float:
    if not (0.0 <= v <= 100.0) or math.isnan(v):
        raise ValueError("is outside [0, 100]")
    return v


def _positive_seconds(v: float) -> float:
    if not math.isfinite(v) or v <= 0:
        raise ValueError("must be a positive number of seconds")
    return v


def _non_negative_seconds(v: float) -> float:
    if not math.isfinite(v) or v < 0:
        raise ValueError("must be a non-negative number of seconds")
    return v


def _non_empty(v: str) -> str:
    if not v.strip():
        raise ValueError("must not be empty")
    return v


@dataclass(frozen=True, slots=True)
class _JsonBounds:
    """The range an AfterValidator checks, also stated in the JSON schema: Helm's values
    schema is generated from these models, and without it an install would accept
    ``thresholds.act: 1.5`` that the controller then refuses at start-up. The
    validators keep the messages (``is outside [0, 1]``)."""

    bounds: tuple[tuple[str, Any], ...]

    def __get_pydantic_json_schema__(self, schema: Any, handler: Any) -> dict[str, Any]:
        out: dict[str, Any] = handler(schema)
        return {**dict(self.bounds), **out}


def _bounds(**kw: Any) -> _JsonBounds:
    return _JsonBounds(tuple(kw.items()))


UnitInterval = Annotated[float, AfterValidator(_unit_interval), _bounds(minimum=0, maximum=1)]
Percent = Annotated[float, AfterValidator(_percent), _bounds(minimum=0, maximum=100)]
PositiveSeconds = Annotated[float, AfterValidator(_positive_seconds), _bounds(exclusiveMinimum=0)]
Seconds = Annotated[float, AfterValidator(_non_negative_seconds), _bounds(minimum=0)]
Name = Annotated[str, AfterValidator(_non_empty), _bounds(pattern=r"\S")]


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        extra="forbid",
        use_attribute_docstrings=True,
    )


# --- one policy --------------------------------------------------------------------


class ScoreSelector(_Model):
    """Which score a rank is judged by."""

    kind: ScoreKind = ScoreKind.WORST
    """gpuRelative | gpuIndividual | sectionRelative | sectionIndividual | worst (lowest of all)."""
    section: str | None = None
    """Section name; required for sectionRelative/sectionIndividual, refused otherwise."""

    @model_validator(mode="after")
    def _section_matches_kind(self) -> Self:
        needs = self.kind in (ScoreKind.SECTION_RELATIVE, ScoreKind.SECTION_INDIVIDUAL)
        if needs and not (self.section and self.section.strip()):
            raise ValueError(f"section is required when kind is {self.kind.value}")
        if not needs and self.section is not None:
            raise ValueError(f"section={self.section!r} is only allowed with a section score kind")
        return self


class Thresholds(_Model):
    """Scores are 1.0 for as fast as the reference, lower for slower."""

    act: UnitInterval = 0.7
    """A score strictly below this counts as slow."""
    recover: UnitInterval = 0.85
    """A score at or above this counts as recovered; must be above ``act`` (hysteresis)."""

    @model_validator(mode="after")
    def _hysteresis(self) -> Self:
        if self.recover <= self.act:
            raise ValueError(f"@recover={self.recover:g} must be above @act={self.act:g}")
        return self


class Persistence(_Model):
    """How long a rank must stay below ``thresholds.act`` before anything is done."""

    consecutive_reports: int | None = Field(default=3, ge=1)
    """Reports in a row below the threshold (null: not used)."""
    below_for_s: PositiveSeconds | None = None
    """Seconds continuously below the threshold (null: not used)."""
    require: Literal["all", "any"] = "all"
    """With both set: all = both must hold, any = either suffices."""
    min_samples: int = Field(default=1, ge=0)
    """Timed samples a rank needs in a report for its score to count (fewer: Unknown)."""
    max_report_age_s: PositiveSeconds = 300.0
    """A job whose newest report is older than this is Unknown: never acts, never clears."""
    max_clock_skew_s: Seconds = 60.0
    """Reports stamped further than this in the future are refused as malformed."""

    @model_validator(mode="after")
    def _some_rule(self) -> Self:
        if self.consecutive_reports is None and self.below_for_s is None:
            raise ValueError("consecutiveReports or belowForS must be set")
        return self


class Warmup(_Model):
    """Scores are unreliable while a job compiles, loads data or regroups."""

    after_job_start_s: Seconds = 300.0
    """Reports from the first seconds of a job are ignored (compilation, data loading)."""
    after_action_s: Seconds = 300.0
    """Reports from the seconds after we restarted or drained a job's pods are ignored."""


class Recovery(_Model):
    """A node recovers when every rank of the job on it scores at or above
    ``thresholds.recover`` for long enough; then our marks on it are undone."""

    consecutive_reports: int = Field(default=3, ge=1)
    """Reports in a row with every rank of the node at or above ``thresholds.recover``."""
    hold_s: Seconds = 600.0
    """And for at least this long, before our marks are undone."""
    release_after_s: PositiveSeconds | None = None
    """Undo marks on a node the job has left after this long (null: keep for a human)."""


class LadderStep(_Model):
    """One step of the ladder (every step has these fields)."""

    enabled: bool = False
    """Take this step (its prerequisite must be enabled too)."""
    timeout_s: PositiveSeconds = 900.0
    """Wait this long after the step for an effect before repeating or escalating."""
    max_attempts: int = Field(default=1, ge=1, le=10)
    """Times this step may be taken in one episode before escalating."""


class Ladder(_Model):
    """Escalation order: notify -> restartRank -> taintNode -> drainNode -> cordonNode."""

    notify: LadderStep = LadderStep(enabled=True, timeout_s=600.0)
    """Event, condition, metric and log line; no budget."""
    restart_rank: LadderStep = LadderStep(max_attempts=2)
    """Evict (or delete) the slow rank's pod / restart the Ray worker. Needs notify."""
    taint_node: LadderStep = LadderStep()
    """Our NoSchedule taint on the node. Needs notify."""
    drain_node: LadderStep = LadderStep(timeout_s=1800.0)
    """Evict the job's pods from the node (honours PodDisruptionBudgets). Needs taintNode."""
    cordon_node: LadderStep = LadderStep(timeout_s=1800.0)
    """Mark the node unschedulable for everyone. Needs taintNode."""

    def step(self, kind: ActionKind) -> LadderStep:
        return getattr(self, _LADDER_FIELD[kind])  # type: ignore[no-any-return]

    def enabled_steps(self) -> tuple[ActionKind, ...]:
        return tuple(k for k in LADDER_ORDER if self.step(k).enabled)

    @model_validator(mode="after")
    def _prerequisites(self) -> Self:
        for kind, needs in PREREQUISITES.items():
            if self.step(kind).enabled and not self.step(needs).enabled:
                raise ValueError(
                    f"@{kind.value}.enabled=true needs its prerequisite @{needs.value}.enabled=true"
                )
        return self


_LADDER_FIELD = {
    ActionKind.NOTIFY: "notify",
    ActionKind.RESTART_RANK: "restart_rank",
    ActionKind.TAINT_NODE: "taint_node",
    ActionKind.DRAIN_NODE: "drain_node",
    ActionKind.CORDON_NODE: "cordon_node",
}


class NodeBudget(_Model):
    """Nodes that may carry our marks at once. null = unlimited; both set: the smaller wins."""

    max_nodes: int | None = Field(default=None, ge=0)
    """Nodes at most (null: no count limit)."""
    max_percent: Percent | None = None
    """Percent of the nodes (of the job, or of the cluster); rounds down, but at least 1
    node when above zero."""

    def limit(self, total_nodes: int) -> int | None:
        limits: list[int] = []
        if self.max_nodes is not None:
            limits.append(self.max_nodes)
        if self.max_percent is not None:
            by_pct = math.floor(self.max_percent * total_nodes / 100.0)
            limits.append(max(1, by_pct) if self.max_percent > 0 else 0)
        return min(limits) if limits else None

    def is_zero(self) -> bool:
        return self.max_nodes == 0 or self.max_percent == 0


class JobBudgets(_Model):
    """Limits on disruptive actions for one job."""

    nodes: NodeBudget = NodeBudget(max_nodes=1)
    """Nodes of one job that may carry our marks at once."""
    actions_per_hour: int | None = Field(default=3, ge=0)
    """Disruptive actions (restart, taint, drain, cordon) for one job per rolling hour."""
    between_actions_s: Seconds = 300.0
    """Minimum gap between two disruptive actions on one job."""


class Cooldowns(_Model):
    """Quiet periods during which no node action is taken on a node."""

    node_after_undo_s: Seconds = 3600.0
    """After we undo our marks on a node, leave it alone this long (no flapping)."""
    node_after_human_s: Seconds = 86400.0
    """After someone else removes our mark (a human uncordon), leave the node alone."""


class Attribution(_Model):
    """How slowness is attributed; the job-wide and imbalance cases never touch nodes."""

    job_wide_fraction: UnitInterval = 0.5
    """This share of measured ranks below the threshold at once is a job-wide slowdown."""
    structural_node_fraction: UnitInterval = 0.2
    """This share of the job's nodes slow at once (and at least structuralMinNodes) is the
    workload (e.g. the last pipeline stage), not hardware."""
    structural_min_nodes: int = Field(default=3, ge=2)
    """Fewest slow nodes at once for the structural rule to apply."""
    imbalance_history: int = Field(default=8, ge=2, le=64)
    """Reports of history kept to see whether the slowest rank keeps moving."""
    imbalance_min_distinct: int = Field(default=3, ge=2)
    """Distinct slowest ranks in that history that make the job count as imbalanced."""
    imbalance_min_below_fraction: UnitInterval = 0.8
    """In an imbalanced job a rank is still a fault when it was slow in this share of the
    history's reports."""

    @model_validator(mode="after")
    def _distinct_fits(self) -> Self:
        if self.imbalance_min_distinct > self.imbalance_history:
            raise ValueError(
                f"imbalanceMinDistinct={self.imbalance_min_distinct} cannot exceed "
                f"imbalanceHistory={self.imbalance_history}"
            )
        if self.job_wide_fraction == 0:
            raise ValueError("jobWideFraction=0 would call every report a job-wide slowdown")
        return self


class Policy(_Model):
    """One named remediation policy."""

    mode: Mode | None = None
    """Lowers the document's mode for jobs using this policy (null: the document's)."""
    score: ScoreSelector = ScoreSelector()
    """Which score judges a rank."""
    thresholds: Thresholds = Thresholds()
    """When a score counts as slow, and when as recovered."""
    persistence: Persistence = Persistence()
    """How long slow must last, and what data counts."""
    warmup: Warmup = Warmup()
    """Reports ignored after a job starts and after our own disruptive actions."""
    recovery: Recovery = Recovery()
    """When our marks are undone."""
    attribution: Attribution = Attribution()
    """Rank, node, job-wide or workload: only the first two lead to actions."""
    ladder: Ladder = Ladder()
    """The actions, in escalation order."""
    budgets: JobBudgets = JobBudgets()
    """Limits for one job."""
    cooldowns: Cooldowns = Cooldowns()
    """Quiet periods on a node after an undo or a human's override."""


# --- cluster-wide safety and the document -------------------------------------------


class Breaker(_Model):
    """Trips when too many distinct (job, node) subjects want a disruptive action in a
    window: a storm is more likely our bug or a fleet event than many broken GPUs. While
    open it refuses new disruptive actions; it never blocks undo or notify."""

    max_actions: int = Field(default=10, ge=1)
    """Trips when more distinct (job, node) subjects than this want an action..."""
    window_s: PositiveSeconds = 900.0
    """...within this many seconds."""
    open_s: PositiveSeconds = 3600.0
    """Stays open this long after tripping."""


class ClusterSafety(_Model):
    """Limits over all jobs (they cannot live in one policy: a storm spans policies)."""

    nodes: NodeBudget = NodeBudget(max_nodes=2, max_percent=5.0)
    """Nodes in the whole cluster that may carry our marks at once."""
    actions_per_hour: int | None = Field(default=6, ge=0)
    """Disruptive actions in the whole cluster per rolling hour."""
    breaker: Breaker = Breaker()
    """The circuit breaker."""


class NodeSelector(_Model):
    """A label selector for nodes."""

    match_labels: dict[Name, str]
    """All of these labels must match; an empty selector is refused (it matches every node)."""

    @model_validator(mode="after")
    def _not_empty(self) -> Self:
        if not self.match_labels:
            raise ValueError("matchLabels is empty and would match every node")
        return self

    def matches(self, labels: dict[str, str] | Any) -> bool:
        return all(labels.get(k) == v for k, v in self.match_labels.items())


class OptOuts(_Model):
    """What the controller never acts on (decisions are still recorded, as OptedOut)."""

    nodes: list[Name] = Field(default_factory=list)
    """Node names."""
    node_selectors: list[NodeSelector] = Field(default_factory=list)
    """Nodes matching any of these label selectors."""
    namespaces: list[Name] = Field(default_factory=list)
    """Every job in these namespaces."""
    jobs: list[Name] = Field(default_factory=list)
    """Job keys (``namespace/name``, ``ray:<id>``) or bare job names."""


class PolicyDocument(_Model):
    """The versioned policy document (the Helm chart renders it into a ConfigMap)."""

    api_version: Literal["pacekeeper.dev/v1alpha1"] = API_VERSION
    """Version of this document's schema."""
    kind: Literal["RemediationPolicies"] = KIND
    """Always RemediationPolicies."""
    mode: Mode = Mode.OBSERVE
    """observe (default): record decisions only | dry-run: also validate actions without
    applying them | enforce: act. A policy or a job annotation can only lower it."""
    default_policy: Name = "default"
    """Policy for jobs without a ``pacekeeper.dev/policy`` annotation; must exist."""
    policies: dict[Name, Policy] = Field(default_factory=lambda: {"default": Policy()})
    """Named policies; a job picks one with the ``pacekeeper.dev/policy`` annotation."""
    cluster: ClusterSafety = ClusterSafety()
    """Limits over all jobs together."""
    opt_outs: OptOuts = OptOuts()
    """Nodes, namespaces and jobs never acted on."""

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if not self.policies:
            raise ValueError("policies is empty; define at least one policy")
        if self.default_policy not in self.policies:
            names = ", ".join(sorted(self.policies))
            raise ValueError(f"defaultPolicy={self.default_policy!r} is not in policies ({names})")
        for name, p in self.policies.items():
            if Mode.lowest(self.mode, p.mode) is not Mode.ENFORCE:
                continue
            _refuse_zero_budgets(name, p, self.cluster)
        return self

    def policy_for(self, name: str | None) -> tuple[str, Policy] | None:
        key = name or self.default_policy
        p = self.policies.get(key)
        return None if p is None else (key, p)


def _refuse_zero_budgets(name: str, p: Policy, cluster: ClusterSafety) -> None:
    enabled = set(p.ladder.enabled_steps())
    disruptive = enabled & DISRUPTIVE_ACTIONS
    where = f"policy '{name}'"
    if enabled & NODE_ACTIONS:
        if p.budgets.nodes.is_zero():
            raise ValueError(
                f"{where}: budgets.nodes is zero in enforce mode; every node action would be "
                "refused (disable the node steps or raise the budget)"
            )
        if cluster.nodes.is_zero():
            raise ValueError(
                f"cluster.nodes is zero in enforce mode while {where} enables node actions"
            )
    if disruptive:
        if p.budgets.actions_per_hour == 0:
            raise ValueError(
                f"{where}: budgets.actionsPerHour=0 in enforce mode refuses every action"
            )
        if cluster.actions_per_hour == 0:
            raise ValueError("cluster.actionsPerHour=0 in enforce mode refuses every action")


# --- loading and errors ---------------------------------------------------------------


class PolicyError(ValueError):
    """A refused policy document; the message names the file and the field."""


def load_policy_document(text: str, source: str = "<policy>") -> PolicyDocument:
    """Parse YAML (or JSON) text into a validated document or raise ``PolicyError``."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise PolicyError(f"{source}: not valid YAML: {e}") from e
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise PolicyError(f"{source}: the document must be a mapping, got {type(data).__name__}")
    return parse_policy_document(data, source)


def parse_policy_document(data: dict[str, Any], source: str = "<policy>") -> PolicyDocument:
    try:
        return PolicyDocument.model_validate(data)
    except ValidationError as e:
        raise PolicyError(f"{source}: " + "; ".join(describe_errors(e))) from e


def load_policy_file(path: str | Path) -> PolicyDocument:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise PolicyError(f"{p}: cannot read: {e.strerror or e}") from e
    return load_policy_document(text, str(p))


def describe_errors(err: ValidationError, limit: int = 5) -> list[str]:
    """Pydantic errors as ``policy 'gpu': thresholds.act=1.5 is outside [0, 1]``."""
    out = [_describe_one(e) for e in err.errors()[:limit]]
    if err.error_count() > limit:
        out.append(f"... and {err.error_count() - limit} more")
    return out


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


def policy_json_schema() -> dict[str, Any]:
    """JSON Schema of the policy document (camelCase, as written in YAML and Helm values)."""
    schema = PolicyDocument.model_json_schema(by_alias=True, mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://pacekeeper.dev/schemas/v1alpha1/remediation-policies.json"
    return schema
