"""What an actuator did: a closed set of outcomes, so callers and metrics can match on it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Outcome(StrEnum):
    APPLIED = "Applied"
    ALREADY_APPLIED = "AlreadyApplied"
    UNDONE = "Undone"
    ALREADY_UNDONE = "AlreadyUndone"
    NOT_OURS = "NotOurs"
    """The mark exists but carries no provenance of ours (a human's cordon): untouched."""
    EVICTED = "Evicted"
    DELETED = "Deleted"
    """Deleted directly: the policy-enabled fallback when a budget keeps blocking eviction."""
    GONE = "Gone"
    """The pod had already gone, been replaced, or begun terminating: nothing to do."""


CHANGED = frozenset({Outcome.APPLIED, Outcome.UNDONE, Outcome.EVICTED, Outcome.DELETED})


@dataclass(frozen=True, slots=True)
class ActionResult:
    outcome: Outcome
    target: str
    """`node/<name>` or `pod/<namespace>/<name>`."""
    detail: Mapping[str, Any] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return self.outcome in CHANGED


@dataclass(frozen=True, slots=True)
class DrainResult:
    node: str
    pods: tuple[ActionResult, ...]

    @property
    def evicted(self) -> tuple[str, ...]:
        return tuple(r.target for r in self.pods if r.outcome is Outcome.EVICTED)
