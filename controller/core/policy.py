"""Remediation policies: the YAML document, validated at the boundary by pydantic.

A ``PolicyDocument`` (``apiVersion: pacekeeper.dev/v1alpha1``, ``kind: RemediationPolicies``)
holds named policies plus the cluster-wide safety settings (cluster budget, rate limit,
circuit breaker, opt-outs) and the controller's mode. Jobs pick a policy by name with the
``pacekeeper.dev/policy`` annotation; the rest get ``defaultPolicy``.

Dangerous or contradictory documents are refused with ``PolicyError`` whose message names
the file and the field: ``policy 'gpu': thresholds.act=1.5 is outside [0, 1]``. Risky
enforce settings accepted on purpose (``acknowledgeUnsafe``) come back from
``PolicyDocument.warnings()`` for the CLI to print and the operator to log.

This module is where users import every policy name from. The vocabulary and field types
live in ``policy_types.py``, budgets, breaker and the enforce-mode rules in
``policy_safety.py``, the YAML reader in ``policy_yaml.py``, the error messages in
``policy_errors.py``; all are re-exported here.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import Field, Strict, ValidationError, model_validator

# Relative on purpose: mypy checks this folder as ``controller.core.*``, where an absolute
# ``pacekeeper.`` import is an unresolved Any and the models could not subclass PolicyModel.
from .policy_errors import PolicyError, describe_errors, policy_error
from .policy_file import read_policy_bytes
from .policy_hardware import (
    Calibration,
    Confirm,
    HardwareMemorySettings,
    HardwareUse,
    ProbeCheck,
)
from .policy_ladder import Ladder, LadderStep, TaintStep
from .policy_safety import (
    BREAKER_NEVER_OPENS_AT,
    Breaker,
    ClusterSafety,
    EnforcedPolicy,
    JobBudgets,
    NodeBudget,
    UnsafeRisk,
    UnsafeSetting,
    unsafe_settings,
    zero_budget_problems,
)
from .policy_sequential import DisruptionSafety
from .policy_tail import TailRule, ladder_problem, selector_problem
from .policy_types import (
    DISRUPTIVE_ACTIONS,
    LADDER_ORDER,
    MAX_CLOCK_SKEW_S,
    MAX_NODES,
    NODE_ACTIONS,
    PREREQUISITE_WHY,
    PREREQUISITES,
    ActionKind,
    Bool,
    ClockSkewSeconds,
    Int,
    Mode,
    Name,
    Percent,
    PolicyModel,
    PositiveSeconds,
    Reference,
    ReportCount,
    SampleCount,
    ScoreKind,
    Seconds,
    TaintEffect,
    UnitInterval,
)
from .policy_yaml import MAX_POLICY_BYTES, read_policy_yaml

__all__ = [
    "API_VERSION",
    "BREAKER_NEVER_OPENS_AT",
    "DISRUPTIVE_ACTIONS",
    "KIND",
    "LADDER_ORDER",
    "MAX_CLOCK_SKEW_S",
    "MAX_POLICY_BYTES",
    "NODE_ACTIONS",
    "PREREQUISITES",
    "PREREQUISITE_WHY",
    "ActionKind",
    "Attribution",
    "Breaker",
    "Calibration",
    "ClusterSafety",
    "Cooldowns",
    "DisruptionSafety",
    "HardwareMemorySettings",
    "HardwareUse",
    "JobBudgets",
    "Ladder",
    "LadderStep",
    "Mode",
    "Name",
    "NodeBudget",
    "NodeSelector",
    "OptOuts",
    "Percent",
    "Persistence",
    "Policy",
    "PolicyDocument",
    "PolicyError",
    "PositiveSeconds",
    "Recovery",
    "Reference",
    "ScoreKind",
    "ScoreSelector",
    "Seconds",
    "TailRule",
    "TaintEffect",
    "TaintStep",
    "Thresholds",
    "UnitInterval",
    "UnsafeRisk",
    "UnsafeSetting",
    "Warmup",
    "describe_errors",
    "load_policy_document",
    "load_policy_file",
    "parse_policy_document",
    "policy_json_schema",
    "read_policy_bytes",
]

API_VERSION: Literal["pacekeeper.dev/v1alpha1"] = "pacekeeper.dev/v1alpha1"
KIND: Literal["RemediationPolicies"] = "RemediationPolicies"


# --- one policy --------------------------------------------------------------------


class ScoreSelector(PolicyModel):
    """Which score a rank is judged by."""

    kind: ScoreKind = ScoreKind.WORST
    """gpuRelative | gpuIndividual | sectionRelative | sectionIndividual | worst (lowest of all)."""
    section: str | None = None
    """Section name; required for sectionRelative/sectionIndividual, refused otherwise."""
    reference: Reference = Reference.PEER_MEDIAN
    """peerMedian: each score against the median of the ranks doing the same work (same
    group, else same coordinates but the replica ones, else the whole job); individual
    scores stay against the rank's own baseline, divided by the peers' median of them |
    best: the scores as reported (relative ones against the job's fastest rank)."""
    min_deviations: Annotated[float, Strict(), Field(ge=0, le=100)] | None = 3.0
    """peerMedian only: a rank is slow only when also this many robust spreads (1.4826 x
    the peers' median absolute deviation) below its peers' median (null: no such test)."""
    host_side: Bool = False
    """gpuRelative/gpuIndividual with peerMedian: also judge each rank by its host side,
    its section times less their waits against its peers', the part its GPU explains
    taken out (``host_side``); only where its GPU is not slow and at least two ranks of
    its node, half of those listed, are slow so (a host is shared: one rank slower is the
    job's own work, rank 0's logging). A slow data loader or a busy CPU then counts
    against the node, never its GPU."""
    host_side_one_rank: Bool = False
    """With hostSide: a rank alone on its node counts too when its host side became slow
    (also against its own past) and its GPU is fine: its process is the finding
    (``restartRank``), never the node (``policy_tail``)."""
    host_side_act: UnitInterval | None = None
    """With hostSide: a host score strictly below this counts as slow (null:
    ``thresholds.act``). Host scores have the GPU's part taken out, so no spread of
    same-model GPUs widens them: a policy acting on GPUs at 0.75 can judge host time at
    0.9 (0.2 s more on a 1.6 s section). A rank so found is judged as a score of
    ``thresholds.act x host / hostSideAct``."""
    tail: TailRule | None = None
    """Also judge each rank by its tail statistic against its peers' (``TailRule``): a
    rank slow a few windows in fifteen, which every window's median hides (null: not)."""

    @model_validator(mode="after")
    def _section_matches_kind(self) -> Self:
        needs = self.kind in (ScoreKind.SECTION_RELATIVE, ScoreKind.SECTION_INDIVIDUAL)
        if needs and not (self.section and self.section.strip()):
            raise ValueError(
                f"section is required when kind is {self.kind.value}: it names the section "
                "whose score judges the rank"
            )
        if not needs and self.section is not None:
            raise ValueError(
                f"section={self.section!r} is only allowed with a section score kind "
                f"(sectionRelative, sectionIndividual): kind {self.kind.value} never reads it, "
                "so the section named would be silently ignored"
            )
        gpu = self.kind in (ScoreKind.GPU_RELATIVE, ScoreKind.GPU_INDIVIDUAL)
        if self.host_side and not (gpu and self.reference is Reference.PEER_MEDIAN):
            raise ValueError(
                "hostSide needs kind gpuRelative or gpuIndividual and reference peerMedian "
                f"(got kind {self.kind.value}, reference {self.reference.value}): the other "
                "kinds judge the sections themselves"
            )
        problem = selector_problem(
            reference_peers=self.reference is Reference.PEER_MEDIAN,
            host_side=self.host_side,
            one_rank=self.host_side_one_rank or self.host_side_act is not None,
            tail=self.tail,
        )
        if problem:
            raise ValueError(problem)
        return self


class Thresholds(PolicyModel):
    """Scores are 1.0 for as fast as the reference, lower for slower."""

    act: UnitInterval = 0.7
    """A score strictly below this counts as slow."""
    recover: UnitInterval = 0.85
    """A score at or above this counts as recovered; must be above ``act`` (hysteresis)."""

    @model_validator(mode="after")
    def _hysteresis(self) -> Self:
        if self.recover <= self.act:
            raise ValueError(
                f"@recover={self.recover:g} must be above @act={self.act:g}: the gap between "
                "them keeps a score that hovers at the threshold from marking and unmarking "
                "the node every report"
            )
        return self


class Persistence(PolicyModel):
    """How long a rank must stay below ``thresholds.act`` before anything is done."""

    consecutive_reports: ReportCount | None = 3
    """Reports in a row below the threshold (null: not used)."""
    below_for_s: PositiveSeconds | None = None
    """Seconds continuously below the threshold (null: not used)."""
    require: Literal["all", "any"] = "all"
    """With both set: all = both must hold, any = either suffices."""
    min_samples: SampleCount = 1
    """Timed samples a rank needs in a report for its score to count (fewer: Unknown)."""
    max_report_age_s: PositiveSeconds = 300.0
    """A job whose newest report is older than this is Unknown: never acts, never clears."""
    max_clock_skew_s: ClockSkewSeconds = 60.0
    """Reports stamped further than this in the future are refused as malformed. At most
    300 s: synced clocks differ by milliseconds, and a report accepted from further ahead
    would stay the job's newest (hiding a job that stopped reporting) for that long."""

    @model_validator(mode="after")
    def _some_rule(self) -> Self:
        if self.consecutive_reports is None and self.below_for_s is None:
            raise ValueError(
                "consecutiveReports or belowForS must be set: with both null nothing says how "
                "long a rank must stay slow before anything is done"
            )
        return self


class Warmup(PolicyModel):
    """Scores are unreliable while a job compiles, loads data or regroups."""

    after_job_start_s: Seconds = 300.0
    """Reports from the first seconds of a job are ignored (compilation, data loading)."""
    after_action_s: Seconds = 300.0
    """Reports from the seconds after we restarted or drained a job's pods are ignored."""


class Recovery(PolicyModel):
    """A node recovers when every rank of the job on it scores at or above
    ``thresholds.recover`` for long enough; then our marks on it are undone."""

    consecutive_reports: ReportCount = 3
    """Reports in a row with every rank of the node at or above ``thresholds.recover``."""
    hold_s: Seconds = 600.0
    """And for at least this long, before our marks are undone."""
    release_after_s: PositiveSeconds | None = None
    """Undo marks on a node the job has left after this long (null: keep for a human)."""


class Cooldowns(PolicyModel):
    """Quiet periods during which no node action is taken on a node."""

    node_after_undo_s: Seconds = 3600.0
    """After we undo our marks on a node, leave it alone this long (no flapping)."""
    node_after_human_s: Seconds = 86400.0
    """After someone else removes our mark (a human uncordon), leave the node alone."""


class Attribution(PolicyModel):
    """How slowness is attributed; the job-wide and imbalance cases never touch nodes."""

    job_wide_fraction: UnitInterval = 0.5
    """This share of measured ranks below the threshold at once is a job-wide slowdown."""
    structural_node_fraction: UnitInterval = 0.2
    """This share of the job's nodes slow at once (and at least structuralMinNodes) is the
    workload (e.g. the last pipeline stage), not hardware."""
    structural_min_nodes: Int = Field(default=3, ge=2, le=MAX_NODES)
    """Fewest slow nodes at once for the structural rule to apply."""
    imbalance_history: Int = Field(default=8, ge=2, le=64)
    """Reports of history kept to see whether the slowest rank keeps moving."""
    imbalance_min_distinct: Int = Field(default=3, ge=2, le=64)
    """Distinct slowest ranks in that history that make the job count as imbalanced."""
    imbalance_min_below_fraction: UnitInterval = 0.8
    """In an imbalanced job a rank is still a fault when it was slow in this share of the
    history's reports (or when it stayed the slowest three reports or more, longer than
    any rank before it: docs/controller.md)."""
    victim_min_wait_share: UnitInterval = 0.05
    """A rank that waits in communication for at least this share of the window, and whose
    own work (the time it does not wait) is no slower than its peers', is a victim of the
    rank it waits for: never a suspect. Needs reports carrying waitShare."""

    @model_validator(mode="after")
    def _distinct_fits(self) -> Self:
        if self.imbalance_min_distinct > self.imbalance_history:
            raise ValueError(
                f"imbalanceMinDistinct={self.imbalance_min_distinct} cannot exceed "
                f"imbalanceHistory={self.imbalance_history}: that history never holds so many "
                "distinct slowest ranks, so no job would ever count as imbalanced"
            )
        if self.job_wide_fraction == 0:
            raise ValueError("jobWideFraction=0 would call every report a job-wide slowdown")
        return self


class Policy(PolicyModel):
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
    hardware: HardwareUse = HardwareUse()
    """How the memory of each GPU (calibration, history) enters judgement and recovery."""
    confirm: Confirm = Confirm.NONE
    """none | probe: node actions (taint, drain, cordon) only once the job's confirmation
    probe singled out the node's slow ranks; the decisions record the probe's figures."""
    probe: ProbeCheck = ProbeCheck()
    """How ``confirm: probe`` asks and judges."""
    safety: DisruptionSafety = DisruptionSafety()
    """The false-disruption rate the disruptive steps are held to (docs/decision-rule.md)."""

    @model_validator(mode="after")
    def _lone_rank_is_restarted(self) -> Self:
        problem = ladder_problem(
            one_rank=self.score.host_side_one_rank, restart_rank=self.ladder.restart_rank.enabled
        )
        if problem:
            raise ValueError(problem)
        return self


# --- cluster-wide safety and the document -------------------------------------------


class NodeSelector(PolicyModel):
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


class OptOuts(PolicyModel):
    """What the controller never acts on (decisions are still recorded, as OptedOut)."""

    nodes: list[Name] = Field(default_factory=list)
    """Node names."""
    node_selectors: list[NodeSelector] = Field(default_factory=list)
    """Nodes matching any of these label selectors."""
    namespaces: list[Name] = Field(default_factory=list)
    """Every job in these namespaces."""
    jobs: list[Name] = Field(default_factory=list)
    """Job keys (``namespace/name``, ``ray:<id>``) or bare job names."""


class PolicyDocument(PolicyModel):
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
    hardware_memory: HardwareMemorySettings = HardwareMemorySettings()
    """What the controller remembers of every GPU across jobs and restarts."""
    acknowledge_unsafe: list[UnsafeRisk] = Field(default_factory=list)
    """Risky enforce-mode settings accepted on purpose, each still warned about:
    unlimitedBudgets (every budget on an enforced policy's enabled steps is null),
    fullClusterBudget (cluster.nodes lets every node carry our marks),
    breakerNeverOpens (cluster.breaker.maxActions >= 5000),
    noExecuteTaint (a taintNode step with effect NoExecute evicts every untolerating pod),
    emptyLadder (an enforced policy enables no step, not even notify),
    hairTrigger (thresholds.act >= 0.95 and one report enough to act),
    instantEscalation (an enabled step's timeoutS under 1 s)."""

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if not self.policies:
            raise ValueError(
                "policies is empty; define at least one policy (jobs need one to be judged by)"
            )
        problems = default_policy_problems(self.default_policy, list(self.policies))
        enforced = self._enforced()
        for p in enforced:
            problems += zero_budget_problems(p, self.cluster)
        problems += [
            s.refusal()
            for s in unsafe_settings(enforced, self.cluster)
            if s.risk not in self.acknowledge_unsafe
        ]
        if problems:
            raise ValueError("\n".join(dict.fromkeys(problems)))
        return self

    def policy_for(self, name: str | None) -> tuple[str, Policy] | None:
        key = name or self.default_policy
        p = self.policies.get(key)
        return None if p is None else (key, p)

    def unsafe_settings(self) -> list[UnsafeSetting]:
        """The risky enforce-mode settings in this document (all acknowledged, or it
        would not have validated)."""
        return unsafe_settings(self._enforced(), self.cluster)

    def warnings(self) -> list[str]:
        """What validation accepted but a person should hear about, one line each: every
        acknowledged risk, and acknowledgements nothing needs (they would let a later
        edit through unseen). The CLI prints them; the operator logs them."""
        found = self.unsafe_settings()
        out = [s.warning() for s in found]
        present = {s.risk for s in found}
        out += [
            f"acknowledgeUnsafe lists {risk} but nothing in this document needs it; remove "
            "it so that a later change is not accepted unseen"
            for risk in dict.fromkeys(self.acknowledge_unsafe)
            if risk not in present
        ]
        return out

    def _enforced(self) -> list[EnforcedPolicy]:
        return [
            EnforcedPolicy(
                name,
                frozenset(p.ladder.enabled_steps()),
                p.budgets,
                p.ladder.taint_node.effect,
                act=p.thresholds.act,
                one_report_rule=_one_report_rule(p.persistence),
                step_timeouts=tuple(
                    (k, p.ladder.step(k).timeout_s) for k in p.ladder.enabled_steps()
                ),
            )
            for name, p in self.policies.items()
            if Mode.lowest(self.mode, p.mode) is Mode.ENFORCE
        ]


def _one_report_rule(p: Persistence) -> str | None:
    """The fields that let a single report below the threshold decide, or None. belowForS
    alone needs two reports at least (it measures between them)."""
    if p.consecutive_reports != 1:
        return None
    if p.below_for_s is None:
        return "persistence.consecutiveReports=1"
    if p.require == "any":
        return "persistence.consecutiveReports=1 and require=any"
    return None


# --- loading ------------------------------------------------------------------------


def load_policy_document(text: str | bytes, source: str = "<policy>") -> PolicyDocument:
    """Parse YAML (or JSON) text or UTF-8 bytes into a validated document, or raise
    ``PolicyError`` naming ``source`` (size, encoding, syntax, duplicate keys, fields)."""
    data = read_policy_yaml(text, source)
    if data is None:
        # An empty file (or one of comments only) is a truncated write, a wrong path or a
        # ConfigMap key that went missing far more often than a wish for every default.
        raise PolicyError(
            f"{source}: is empty (no YAML document); write at least "
            f"'apiVersion: {API_VERSION}' and 'kind: {KIND}', or '{{}}' for every default"
        )
    if not isinstance(data, dict):
        raise PolicyError(f"{source}: the document must be a mapping, got {type(data).__name__}")
    return parse_policy_document(data, source)


def parse_policy_document(data: dict[str, Any], source: str = "<policy>") -> PolicyDocument:
    """The validated document, or ``PolicyError`` listing every problem, one a line."""
    try:
        return PolicyDocument.model_validate(data)
    except ValidationError as e:
        problems = describe_errors(e, PolicyDocument)
        # The document's own rules run only once every field is valid; the one that needs
        # nothing but names is checked on the raw data, so that it is not a second round.
        if not any(p.startswith("defaultPolicy") for p in problems):
            problems += _raw_default_policy_problems(data)
        raise policy_error(source, problems) from e


def default_policy_problems(default: str, names: list[str]) -> list[str]:
    if default in names:
        return []
    text = (
        f"defaultPolicy={default!r} is not in policies ({', '.join(sorted(names))}): jobs "
        "without a pacekeeper.dev/policy annotation would have no policy"
    )
    close = difflib.get_close_matches(default, names, n=1, cutoff=0.6)
    if close:
        text += f"; did you mean {close[0]!r}?"
    return [text]


def _raw_default_policy_problems(data: dict[str, Any]) -> list[str]:
    policies = data.get("policies")
    default = data.get("defaultPolicy", PolicyDocument.model_fields["default_policy"].default)
    if not isinstance(policies, dict) or not policies or not isinstance(default, str):
        return []
    return default_policy_problems(default, [str(k) for k in policies])


def load_policy_file(path: str | Path) -> PolicyDocument:
    """The validated document in the file at ``path``, or ``PolicyError`` naming it."""
    p = Path(path)
    return load_policy_document(read_policy_bytes(p), str(p))


def policy_json_schema() -> dict[str, Any]:
    """JSON Schema of the policy document (camelCase, as written in YAML and Helm values)."""
    schema = PolicyDocument.model_json_schema(by_alias=True, mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://pacekeeper.dev/schemas/v1alpha1/remediation-policies.json"
    return schema
