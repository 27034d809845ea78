"""The decision core: ``decide(window, state, policies, now) -> Outcome``.

Pure: it reads no clock, environment, file or socket and imports no Kubernetes or Ray.
The operator (per-job reconcile), the Ray-side runner and the simulator call it the same
way: build a ``Window`` of what they observed, pass the ``State`` they persisted last
time and the time, apply the act/undo decisions through their actuators, persist
``Outcome.next_state``, and call again at ``Outcome.recheck_at`` or on new data.

Calls are level-based: deciding twice on the same window decides the same and counts
nothing twice (only reports newer than the state's ``lastReportAt`` advance streaks).

This module only orchestrates one call; the parts live where they are named:
``mark_records`` (our marks against the world, placing and releasing them),
``job_window`` (which reports count), ``job_decisions`` (what they call for),
``budgets`` (the limits a disruptive step passes), all sharing one ``run.Run``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from pacekeeper.controller.core import (
    hardware_memory,
    job_decisions,
    job_window,
    mark_records,
    rank_table,
)
from pacekeeper.controller.core.decisions import Decision
from pacekeeper.controller.core.job_decisions import EVIDENCE_RANKS_CAP, REGROUPING_ACTIONS
from pacekeeper.controller.core.mark_records import CONFIRM_GRACE
from pacekeeper.controller.core.observations import Window
from pacekeeper.controller.core.policy import PolicyDocument
from pacekeeper.controller.core.run import Run
from pacekeeper.controller.core.state import State

__all__ = [
    "CONFIRM_GRACE",
    "EVIDENCE_RANKS_CAP",
    "REGROUPING_ACTIONS",
    "Outcome",
    "decide",
]


@dataclass(frozen=True, slots=True)
class Outcome:
    decisions: tuple[Decision, ...]
    next_state: State
    recheck_at: datetime | None = None
    """The earliest time a decision asked to be looked at again (a ladder timeout, the
    end of a warm-up or cooldown); None when only new data can change anything."""


def decide(window: Window, state: State, policies: PolicyDocument, now: datetime) -> Outcome:
    """Decide on every job in ``window``; jobs not in it keep their state untouched."""
    # Each report's columns are read once for the whole call (``rank_table``).
    with rank_table.reading():
        return _decide(window, state, policies, now)


def _decide(window: Window, state: State, policies: PolicyDocument, now: datetime) -> Outcome:
    run = Run(policies, now, state, window.cluster)
    run.hardware = hardware_memory.aged(run.hardware, now, policies.hardware_memory)
    mark_records.reconcile(run)
    for jv in sorted(window.jobs, key=lambda j: j.key):
        ctx = job_window.open_job(run, jv)
        if ctx is None:
            continue  # unknown policy: recorded, the job's state untouched
        if ctx.enforce:
            mark_records.drop_simulated(run, ctx)
        latest = job_window.read_window(run, ctx)
        if latest is not None:
            job_decisions.judge(run, ctx, latest)
        run.jobs[jv.key] = ctx.state
    return Outcome(
        decisions=tuple(run.decisions),
        next_state=State(jobs=run.jobs, cluster=run.cluster, hardware=run.hardware),
        recheck_at=min(run.rechecks) if run.rechecks else None,
    )
