"""The escalation ladder of one policy: its steps and the order their prerequisites impose.

Split out of ``policy.py`` (which re-exports every name here) so the policy module stays
under the size limit; nothing here knows about the rest of a policy.
"""

from __future__ import annotations

from typing import Annotated, Any, Self

from pydantic import BeforeValidator, Field, model_validator

from .policy_types import (
    LADDER_ORDER,
    PREREQUISITE_WHY,
    PREREQUISITES,
    ActionKind,
    Bool,
    Int,
    PolicyModel,
    PositiveSeconds,
    TaintEffect,
)

__all__ = ["Ladder", "LadderStep", "TaintStep"]


class LadderStep(PolicyModel):
    """One step of the ladder (every step has these fields)."""

    enabled: Bool = False
    """Take this step (its prerequisite must be enabled too)."""
    timeout_s: PositiveSeconds = 900.0
    """Wait this long after the step for an effect before repeating or escalating."""
    max_attempts: Int = Field(default=1, ge=1, le=10)
    """Times this step may be taken in one episode before escalating."""


class TaintStep(LadderStep):
    """The taintNode step: a ladder step and the effect of the taint it writes."""

    effect: TaintEffect = TaintEffect.NO_SCHEDULE
    """NoSchedule (default): keeps new pods off the node, running pods stay |
    PreferNoSchedule: the scheduler avoids the node when it can | NoExecute: also evicts
    every running pod on the node that does not tolerate it, of every job, with no budget
    or PodDisruptionBudget (enforce mode needs noExecuteTaint in acknowledgeUnsafe)."""


def _as_taint_step(value: Any) -> Any:
    # A plain LadderStep (Python callers built ladders before the taint step had its own
    # model) keeps its settings and gets the default effect.
    if isinstance(value, LadderStep) and not isinstance(value, TaintStep):
        return value.model_dump()
    return value


class Ladder(PolicyModel):
    """Escalation order: notify -> restartRank -> taintNode -> drainNode -> cordonNode."""

    notify: LadderStep = LadderStep(enabled=True, timeout_s=600.0)
    """Event, condition, metric and log line; no budget."""
    restart_rank: LadderStep = LadderStep(max_attempts=2)
    """Evict (or delete) the slow rank's pod / restart the Ray worker. Needs notify."""
    taint_node: Annotated[TaintStep, BeforeValidator(_as_taint_step)] = TaintStep()
    """Our taint (key pacekeeper.dev/straggler, effect NoSchedule unless ``effect`` says
    otherwise) on the node. Needs notify."""
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
        problems = [
            f"@{kind.value}.enabled=true needs its prerequisite @{needs.value}.enabled=true: "
            + PREREQUISITE_WHY[kind]
            for kind, needs in PREREQUISITES.items()
            if self.step(kind).enabled and not self.step(needs).enabled
        ]
        if problems:
            raise ValueError("\n".join(problems))
        return self


_LADDER_FIELD = {
    ActionKind.NOTIFY: "notify",
    ActionKind.RESTART_RANK: "restart_rank",
    ActionKind.TAINT_NODE: "taint_node",
    ActionKind.DRAIN_NODE: "drain_node",
    ActionKind.CORDON_NODE: "cordon_node",
}
