"""The escalation ladder's next move at its edges: the wait ends at the instant
``timeoutS`` names, a step repeats exactly ``maxAttempts`` times, disabled steps and the
rank restart (for a node finding, or a GPU known slow elsewhere) are skipped, and the top
of the ladder is exhausted rather than wrapped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pacekeeper.controller.core.attribution import Finding
from pacekeeper.controller.core.ladder import Exhausted, Take, Wait, applicable_steps, next_move
from pacekeeper.controller.core.policy import ActionKind
from pacekeeper.controller.core.policy_ladder import Ladder, LadderStep, TaintStep
from pacekeeper.controller.core.state import LadderState

T0 = datetime(2026, 1, 1, 12, tzinfo=UTC)
TICK = timedelta(microseconds=1)
NOTIFY, RESTART, TAINT, DRAIN, CORDON = (
    ActionKind.NOTIFY,
    ActionKind.RESTART_RANK,
    ActionKind.TAINT_NODE,
    ActionKind.DRAIN_NODE,
    ActionKind.CORDON_NODE,
)

FULL = Ladder(
    notify=LadderStep(enabled=True, timeout_s=60.0),
    restart_rank=LadderStep(enabled=True, timeout_s=120.0, max_attempts=2),
    taint_node=TaintStep(enabled=True, timeout_s=300.0),
    drain_node=LadderStep(enabled=True, timeout_s=600.0),
    cordon_node=LadderStep(enabled=True, timeout_s=900.0, max_attempts=3),
)


def at(step: ActionKind, attempts: int, last: datetime | None = T0) -> LadderState:
    return LadderState(started_at=T0, step=step, attempts=attempts, last_action_at=last)


def test_applicable_steps_skip_the_rank_restart_for_a_node_or_known_hardware() -> None:
    assert applicable_steps(FULL, Finding.RANK) == (NOTIFY, RESTART, TAINT, DRAIN, CORDON)
    assert applicable_steps(FULL, Finding.NODE) == (NOTIFY, TAINT, DRAIN, CORDON)
    assert applicable_steps(FULL, Finding.RANK, hardware=True) == (NOTIFY, TAINT, DRAIN, CORDON)
    assert applicable_steps(Ladder(), Finding.RANK) == (NOTIFY,)


def test_first_move_is_the_lowest_applicable_step() -> None:
    assert next_move(None, FULL, Finding.RANK, T0) == Take(NOTIFY, 1)
    fresh = LadderState(started_at=T0)
    assert next_move(fresh, FULL, Finding.RANK, T0) == Take(NOTIFY, 1)
    no_notify = Ladder(notify=LadderStep(enabled=False))
    assert next_move(None, no_notify, Finding.RANK, T0) == Exhausted(None)
    assert next_move(fresh, no_notify, Finding.NODE, T0) == Exhausted(None)


def test_a_step_waits_its_timeout_and_not_a_moment_longer() -> None:
    state = at(NOTIFY, 1)
    until = T0 + timedelta(seconds=60)
    assert next_move(state, FULL, Finding.RANK, until - TICK) == Wait(NOTIFY, until)
    assert next_move(state, FULL, Finding.RANK, until) == Take(RESTART, 1)


def test_each_step_waits_its_own_timeout() -> None:
    state = at(TAINT, 1)
    until = T0 + timedelta(seconds=300)
    assert next_move(state, FULL, Finding.RANK, until - TICK) == Wait(TAINT, until)
    assert next_move(state, FULL, Finding.RANK, until) == Take(DRAIN, 1)


def test_without_a_last_action_there_is_nothing_to_wait_for() -> None:
    assert next_move(at(NOTIFY, 1, last=None), FULL, Finding.RANK, T0) == Take(RESTART, 1)


def test_a_step_repeats_up_to_its_max_attempts_then_escalates() -> None:
    later = T0 + timedelta(hours=1)
    assert next_move(at(RESTART, 1), FULL, Finding.RANK, later) == Take(RESTART, 2)
    assert next_move(at(RESTART, 2), FULL, Finding.RANK, later) == Take(TAINT, 1)
    assert next_move(at(CORDON, 2), FULL, Finding.RANK, later) == Take(CORDON, 3)


def test_the_top_of_the_ladder_is_exhausted() -> None:
    later = T0 + timedelta(hours=1)
    assert next_move(at(CORDON, 3), FULL, Finding.RANK, later) == Exhausted(CORDON)
    short = Ladder(
        notify=LadderStep(enabled=True, timeout_s=60.0),
        restart_rank=LadderStep(enabled=True, timeout_s=60.0, max_attempts=1),
    )
    assert next_move(at(RESTART, 1), short, Finding.RANK, later) == Exhausted(RESTART)


def test_a_disabled_step_is_skipped_on_the_way_up() -> None:
    ladder = Ladder(
        notify=LadderStep(enabled=True, timeout_s=60.0),
        taint_node=TaintStep(enabled=True, timeout_s=60.0),
        cordon_node=LadderStep(enabled=True, timeout_s=60.0),
    )
    later = T0 + timedelta(hours=1)
    assert next_move(at(NOTIFY, 1), ladder, Finding.RANK, later) == Take(TAINT, 1)
    assert next_move(at(TAINT, 1), ladder, Finding.RANK, later) == Take(CORDON, 1)


def test_a_restart_step_no_longer_applicable_escalates_at_once() -> None:
    # The rank restart had attempts left, but the GPU is now known slow elsewhere (or
    # every rank of the node is slow): no further restart, straight to the node step.
    later = T0 + timedelta(hours=1)
    state = at(RESTART, 1)
    assert next_move(state, FULL, Finding.RANK, later, hardware=True) == Take(TAINT, 1)
    assert next_move(state, FULL, Finding.NODE, later) == Take(TAINT, 1)
    # Its timeout still holds while it runs.
    until = T0 + timedelta(seconds=120)
    assert next_move(state, FULL, Finding.NODE, until - TICK) == Wait(RESTART, until)


def test_a_lone_ranks_process_finding_stops_at_the_rank_restart() -> None:
    assert applicable_steps(FULL, Finding.RANK, process=True) == (NOTIFY, RESTART)
    later = T0 + timedelta(hours=1)
    assert next_move(at(RESTART, 1), FULL, Finding.RANK, later, process=True) == Take(RESTART, 2)
    assert next_move(at(RESTART, 2), FULL, Finding.RANK, later, process=True) == Exhausted(RESTART)
