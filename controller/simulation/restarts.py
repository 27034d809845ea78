"""Job restarts: new incarnations with fresh detector state on the same, still slow, GPUs.

A training job restarts after a crash, a preemption, or because the controller's
ladder restarted one of its ranks (``restartRank`` evicts the rank's pod; torchrun's
agents then restart every worker). What changes, as in a real torchrun job:

* every rank's detector starts empty: ``RecentBest`` baselines, NVRx's minima too;
* the report sequence starts again at 0 and the incarnation becomes ``<base>.r<n>``
  (``detector.identity.elastic_incarnation``); the job's identity stays;
* the job is down for ``downtime_windows`` report windows (no reports) while the
  workers restart and load the checkpoint;
* the operator's view of when this incarnation started (its oldest live pod,
  ``runtime.reconcile``) stays where it was for a restart in place, and moves to the
  restart for a resubmitted job (all pods new).

What does not change: the hardware. The slow GPU is as slow after the restart, and
the simulator does not reschedule ranks, so the restarted rank lands on the same node.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from pacekeeper.controller.core.decisions import Decision, Verdict
from pacekeeper.controller.core.policy import ActionKind


class RestartKind(StrEnum):
    IN_PLACE = "in-place"
    """torchrun restarts its workers in the same pods (also what the operator sees after
    a ``restartRank``: one new pod, the oldest unchanged)."""
    RESUBMITTED = "resubmitted"
    """Every pod is new: the controller's view of the incarnation's start moves."""


@dataclass(frozen=True, slots=True)
class Restarts:
    """When the simulated job restarts."""

    at_s: tuple[float, ...] = ()
    """Restart times (job clock, seconds; rounded down to a report window). One that
    falls while the job is already down is part of that restart."""
    on_restart_rank: bool = False
    """Also restart when the controller takes a ``restartRank`` (enforce mode only: a
    would-be action in observe or dry-run restarts nothing)."""
    downtime_windows: int = 1
    """Report windows without a report while the job restarts (assumption: ~1 min to
    restart the workers and load the checkpoint)."""
    kind: RestartKind = RestartKind.IN_PLACE

    def __post_init__(self) -> None:
        if any(t < 0 for t in self.at_s):
            raise ValueError(f"restart times must be >= 0, got {self.at_s}")
        if self.downtime_windows < 0:
            raise ValueError(f"downtime_windows must be >= 0, got {self.downtime_windows}")

    @property
    def any(self) -> bool:
        return bool(self.at_s) or self.on_restart_rank

    def due(self, window_start_s: float, window_end_s: float) -> bool:
        """A scheduled restart falls in this window (it replaces the window's report)."""
        return any(window_start_s <= t < window_end_s for t in self.at_s)

    def triggered_by(self, decisions: Iterable[Decision]) -> bool:
        """The controller restarted a rank (a taken action, not a would-be one)."""
        return self.on_restart_rank and any(
            d.verdict is Verdict.ACT and d.action is ActionKind.RESTART_RANK for d in decisions
        )


NO_RESTARTS = Restarts()
