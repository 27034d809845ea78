"""The words a policy document is written in: its closed vocabularies (modes, score kinds,
ladder actions) and the bounded, strictly typed scalars every policy model is built from.

Separate from ``policy.py`` because the budget models (``policy_safety.py``) and the
policy models both build on them, and the engine's modules use the vocabulary without
the models. Public names are re-exported by ``policy.py``, where users import them.

Numbers and booleans are strict: YAML ``3`` is an int and ``3.0`` a float, but ``"3"``
and ``"yes"`` are strings and are refused where a number or a boolean belongs (an int is
still accepted where a float belongs).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, Strict
from pydantic.alias_generators import to_camel


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


class Reference(StrEnum):
    """What a relative score is measured against."""

    PEER_MEDIAN = "peerMedian"
    """The median of the rank's peers (the ranks doing the same work), with their spread."""
    BEST = "best"
    """The fastest rank of the job, as the score arrives (NVRx's reference)."""


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
PREREQUISITE_WHY: dict[ActionKind, str] = {
    ActionKind.RESTART_RANK: "every disruptive step is announced first (Event, condition), "
    "so that people see why before their job is touched",
    ActionKind.TAINT_NODE: "every disruptive step is announced first (Event, condition), "
    "so that people see why before their job is touched",
    ActionKind.DRAIN_NODE: "without our taint the drained pods' replacements are scheduled "
    "right back onto the suspect node",
    ActionKind.CORDON_NODE: "cordoning is the escalation of our taint, not a shortcut past it",
}
"""Why each prerequisite exists, in the words a refusal gives."""


class TaintEffect(StrEnum):
    """The effect of our taint (Kubernetes' three)."""

    NO_SCHEDULE = "NoSchedule"
    """Keeps new pods off the node; running pods stay (the default)."""
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    """The scheduler avoids the node when it can; nothing else changes."""
    NO_EXECUTE = "NoExecute"
    """Also evicts every running pod that does not tolerate it, of every job on the node,
    with no budget and no PodDisruptionBudget; needs acknowledgeUnsafe: [noExecuteTaint]."""


# --- field types ------------------------------------------------------------------

MAX_CLOCK_SKEW_S = 300.0
"""Upper bound of ``persistence.maxClockSkewS`` (see its docstring for why)."""
MAX_SECONDS = 365 * 86400.0
"""Upper bound of every other duration: a year. Longer is a typo or an attempt to make a
limit never apply (``1e300`` seconds), and the engine adds these to clock times."""
MAX_REPORTS = 1000
"""Upper bound of a count of reports in a row: at one report a minute, most of a day."""
MAX_SAMPLES = 1_000_000_000
"""Upper bound of a count of timed samples in one report."""
MAX_NODES = 100_000
"""Upper bound of a count of nodes: Kubernetes supports 5,000, the largest managed
clusters some 65,000. Null, not a huge number, says "no limit"."""
MAX_ACTIONS = 1_000_000
"""Upper bound of a count of actions (per hour, or for the breaker); null says "no
limit" where a field allows it."""


def _unit_interval(v: float) -> float:
    if not (0.0 <= v <= 1.0) or math.isnan(v):
        raise ValueError("is outside [0, 1]")
    return v


def _percent(v: float) -> float:
    if not (0.0 <= v <= 100.0) or math.isnan(v):
        raise ValueError("is outside [0, 100]")
    return v


def _positive_seconds(v: float) -> float:
    if not (0 < v <= MAX_SECONDS):  # NaN fails every comparison
        raise ValueError(
            f"must be a positive number of seconds, at most {MAX_SECONDS:.0f} (a year)"
        )
    return v


def _non_negative_seconds(v: float) -> float:
    if not (0 <= v <= MAX_SECONDS):
        raise ValueError(
            f"must be a non-negative number of seconds, at most {MAX_SECONDS:.0f} (a year)"
        )
    return v


def _clock_skew(v: float) -> float:
    if not (0.0 <= v <= MAX_CLOCK_SKEW_S) or math.isnan(v):
        raise ValueError(f"is outside [0, {MAX_CLOCK_SKEW_S:g}] seconds")
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


def _at_most(limit: int) -> Callable[[int], int]:
    # A validator of its own rather than Field(le=...): with both bounds in Field, a value
    # below the floor would be told "is outside [1, 1000]" instead of "must be ≥ 1".
    def check(v: int) -> int:
        if v > limit:
            raise ValueError(f"must be ≤ {limit}")
        return v

    return check


# Strict: a YAML string ("3", "yes") is refused where a number or a boolean belongs.
# Strict floats still take ints (``belowForS: 600``).
Int = Annotated[int, Strict()]
# The floor sits inside the type, before the cap's validator: a Field(ge=...) on a
# nullable field of such a type reaches the JSON schema as a bare "ge", not "minimum".
ReportCount = Annotated[
    int, Strict(), Field(ge=1), AfterValidator(_at_most(MAX_REPORTS)), _bounds(maximum=MAX_REPORTS)
]
SampleCount = Annotated[
    int, Strict(), Field(ge=0), AfterValidator(_at_most(MAX_SAMPLES)), _bounds(maximum=MAX_SAMPLES)
]
NodeCount = Annotated[
    int, Strict(), Field(ge=0), AfterValidator(_at_most(MAX_NODES)), _bounds(maximum=MAX_NODES)
]
ActionCount = Annotated[
    int, Strict(), Field(ge=0), AfterValidator(_at_most(MAX_ACTIONS)), _bounds(maximum=MAX_ACTIONS)
]
Bool = Annotated[bool, Strict()]
UnitInterval = Annotated[
    float, Strict(), AfterValidator(_unit_interval), _bounds(minimum=0, maximum=1)
]
Percent = Annotated[float, Strict(), AfterValidator(_percent), _bounds(minimum=0, maximum=100)]
PositiveSeconds = Annotated[
    float,
    Strict(),
    AfterValidator(_positive_seconds),
    _bounds(exclusiveMinimum=0, maximum=MAX_SECONDS),
]
Seconds = Annotated[
    float,
    Strict(),
    AfterValidator(_non_negative_seconds),
    _bounds(minimum=0, maximum=MAX_SECONDS),
]
ClockSkewSeconds = Annotated[
    float, Strict(), AfterValidator(_clock_skew), _bounds(minimum=0, maximum=MAX_CLOCK_SKEW_S)
]
Name = Annotated[str, AfterValidator(_non_empty), _bounds(pattern=r"\S")]


class PolicyModel(BaseModel):
    """Base of every policy model: camelCase keys, frozen, unknown keys refused, field
    docstrings as descriptions (the generated reference and JSON Schema use them)."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        extra="forbid",
        use_attribute_docstrings=True,
    )
