"""The escalation ladder: which step comes next for a persistently slow subject.

notify -> restartRank -> taintNode -> drainNode -> cordonNode; disabled steps are skipped,
each step waits ``timeoutS`` for an effect, is repeated up to ``maxAttempts`` times, then
the next enabled step follows. When every rank of a node is slow, restarting one rank
is pointless and the ladder skips ``restartRank``; so it does when the slow rank's GPU is
remembered slow in another job (``hardware_memory``): the hardware, not the rank. A
lone rank slow on its host side alone (``score.hostSideOneRank``: its GPU and its
node's other ranks fine) is its process, which no node step mends: its ladder stops
at ``restartRank``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from pacekeeper.controller.core.attribution import Finding
from pacekeeper.controller.core.policy import LADDER_ORDER, NODE_ACTIONS, ActionKind, Ladder
from pacekeeper.controller.core.state import LadderState


@dataclass(frozen=True, slots=True)
class Take:
    step: ActionKind
    attempt: int


@dataclass(frozen=True, slots=True)
class Wait:
    step: ActionKind
    until: datetime


@dataclass(frozen=True, slots=True)
class Exhausted:
    step: ActionKind | None


Move = Take | Wait | Exhausted


def applicable_steps(
    ladder: Ladder, finding: Finding, *, hardware: bool = False, process: bool = False
) -> tuple[ActionKind, ...]:
    """``process``: the finding is a rank's process (a lone host-side stall), no node step."""
    steps: tuple[ActionKind, ...] = ladder.enabled_steps()
    if finding is Finding.NODE or hardware:
        steps = tuple(s for s in steps if s is not ActionKind.RESTART_RANK)
    if process:
        steps = tuple(s for s in steps if s not in NODE_ACTIONS)
    return steps


def next_move(
    state: LadderState | None,
    ladder: Ladder,
    finding: Finding,
    now: datetime,
    *,
    hardware: bool = False,
    process: bool = False,
) -> Move:
    """The next move for a subject that is (still) persistently below the threshold;
    ``hardware``: its GPU is known slow elsewhere, so no rank restart; ``process``: a
    lone rank's host side, so no node step."""
    steps = applicable_steps(ladder, finding, hardware=hardware, process=process)
    if state is None or state.step is None:
        return Take(steps[0], 1) if steps else Exhausted(None)
    current = state.step
    cfg = ladder.step(current)
    if state.last_action_at is not None:
        until = state.last_action_at + timedelta(seconds=cfg.timeout_s)
        if now < until:
            return Wait(current, until)
    if current in steps and state.attempts < cfg.max_attempts:
        return Take(current, state.attempts + 1)
    later = [s for s in steps if LADDER_ORDER.index(s) > LADDER_ORDER.index(current)]
    return Take(later[0], 1) if later else Exhausted(current)
