"""One ``decide`` call in progress: the working copies it mutates and the one place its
decisions are recorded.

``engine.decide`` builds a ``Run`` from the frozen ``State`` it was given, the mark,
per-job and budget modules change the run's copies and record decisions through it,
and the engine freezes the result into an ``Outcome``. Separate from those modules so
that each of them can share the run without importing the others (and without the
engine: ``Outcome`` is built there).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from pacekeeper.controller.core.decisions import (
    JOB_SUBJECT,
    Decision,
    Reason,
    Verdict,
    node_subject,
)
from pacekeeper.controller.core.ids import JobKey, NodeName
from pacekeeper.controller.core.observations import ClusterView, JobView
from pacekeeper.controller.core.policy import ActionKind, Mode, Policy, PolicyDocument
from pacekeeper.controller.core.state import JobState, State


@dataclass(slots=True)
class JobRun:
    """One job within the call: its view, resolved policy and mode, and working state."""

    view: JobView
    policy_name: str
    policy: Policy
    mode: Mode
    state: JobState
    decisions: list[Decision] = field(default_factory=list)
    sources: Mapping[str, str] = field(default_factory=dict)
    """``policySource`` / ``modeSource`` when the job's own annotation chose them: every
    decision about the job carries them as evidence."""

    @property
    def enforce(self) -> bool:
        return self.mode is Mode.ENFORCE

    def close_ladder(self, node: NodeName) -> None:
        ladders = dict(self.state.ladders)
        ladders.pop(node, None)
        self.state = replace(self.state, ladders=ladders)


class Run:
    """Working copies for one ``decide`` call (mutated here, frozen on the way out)."""

    def __init__(
        self, doc: PolicyDocument, now: datetime, state: State, cluster_view: ClusterView
    ) -> None:
        self.doc = doc
        self.now = now
        self.view = cluster_view
        self.cluster = state.cluster
        self.hardware = state.hardware
        self.jobs: dict[JobKey, JobState] = dict(state.jobs)
        self.decisions: list[Decision] = []
        self.rechecks: list[datetime] = []

    def record(  # noqa: PLR0917 (a decision record has this many parts)
        self,
        ctx: JobRun | None,
        job: JobKey,
        subject: str,
        verdict: Verdict,
        action: ActionKind | None,
        reason: Reason,
        evidence: Mapping[str, Any] | None = None,
        *,
        policy: str = "",
        mode: Mode | None = None,
    ) -> Decision:
        d = Decision(
            job=job,
            subject=subject,
            verdict=verdict,
            action=action,
            reason=reason,
            evidence={**(ctx.sources if ctx else {}), **(evidence or {})},
            policy=ctx.policy_name if ctx else policy,
            mode=ctx.mode if ctx else (mode or self.doc.mode),
            decided_at=self.now,
        )
        self.decisions.append(d)
        if ctx is not None:
            ctx.decisions.append(d)
        return d

    def job_hold(self, ctx: JobRun, reason: Reason, evidence: Mapping[str, Any]) -> None:
        self.record(ctx, ctx.view.key, JOB_SUBJECT, Verdict.HOLD, None, reason, evidence)

    def node_hold(
        self,
        ctx: JobRun,
        node: NodeName,
        action: ActionKind | None,
        reason: Reason,
        evidence: Mapping[str, Any],
    ) -> None:
        self.record(ctx, ctx.view.key, node_subject(node), Verdict.HOLD, action, reason, evidence)
