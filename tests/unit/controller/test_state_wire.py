"""Persisted state reads back whole, also from a store that drops nulls.

The real API server's merge patch drops ``null`` members of objects at any depth, inside
arrays too; a state field without a default then failed validation on every reconcile,
forever (a history entry of a healthy report has ``worstRank: null``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pacekeeper.controller.core.ids import JobKey, NodeName, Rank
from pacekeeper.controller.core.observations import MarkKind
from pacekeeper.controller.core.policy import ActionKind
from pacekeeper.controller.core.state import (
    ActionStamp,
    ClusterState,
    HistoryEntry,
    JobState,
    LadderState,
    MarkRecord,
    NodeState,
    State,
    Streak,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def pruned(value: Any) -> Any:
    """What the API server keeps of a merged object: no null member anywhere."""
    if isinstance(value, dict):
        return {k: pruned(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [pruned(v) for v in value]
    return value


times = st.integers(0, 10**6).map(lambda s: T0 + timedelta(seconds=s))
maybe_times = st.none() | times
nodes = st.sampled_from(["n0", "n1", "n-2"]).map(NodeName)
jobs = st.sampled_from(["ml/a", "ml/b", "ray:01000000"]).map(JobKey)
actions = st.sampled_from(list(ActionKind))

ladders = st.builds(
    LadderState, started_at=times, step=st.none() | actions, attempts=st.integers(0, 5),
    last_action_at=maybe_times, simulated=st.booleans(), recover_count=st.integers(0, 3),
    recovering_since=maybe_times,
)  # fmt: skip
job_states = st.builds(
    JobState,
    first_seen_at=times, last_report_at=maybe_times, last_disruptive_at=maybe_times,
    regrouped_at=maybe_times,
    streaks=st.dictionaries(st.integers(0, 64).map(Rank),
                            st.builds(Streak, count=st.integers(1, 9), since=times, node=nodes),
                            max_size=3),
    history=st.lists(st.builds(HistoryEntry, at=times, worst_rank=st.none() | st.integers(0, 64),
                               below=st.lists(st.integers(0, 64), max_size=3).map(tuple)),
                     max_size=4).map(tuple),
    ladders=st.dictionaries(nodes, ladders, max_size=2),
)  # fmt: skip
marks = st.builds(
    MarkRecord, applied_at=times, holders=st.lists(jobs, min_size=1, max_size=2).map(tuple),
    policy=st.sampled_from(["gpu", "default"]), action_key=st.text(min_size=1, max_size=8),
    seen=st.booleans(), simulated=st.booleans(),
)  # fmt: skip
cluster_states = st.builds(
    ClusterState,
    nodes=st.dictionaries(nodes, st.builds(
        NodeState, marks=st.dictionaries(st.sampled_from(list(MarkKind)), marks, max_size=2),
        cooldown_until=maybe_times, cooldown_cause=st.none() | st.just("undo")), max_size=2),
    stamps=st.lists(st.builds(ActionStamp, at=times, job=jobs, simulated=st.booleans()),
                    max_size=3).map(tuple),
    breaker_demand=st.dictionaries(st.text(min_size=1, max_size=6), times, max_size=2),
    breaker_open_until=maybe_times,
)  # fmt: skip
states = st.builds(State, jobs=st.dictionaries(jobs, job_states, max_size=2),
                   cluster=cluster_states)  # fmt: skip


@given(states)
def test_every_state_reads_back_after_its_nulls_are_dropped(state: State) -> None:
    assert State.from_dict(pruned(state.to_dict())) == state


def test_a_healthy_reports_history_entry_survives_the_servers_merge_patch() -> None:
    state = State(jobs={JobKey("ml/a"): JobState(first_seen_at=T0, history=(
        HistoryEntry(at=T0, worst_rank=None, below=()),))})  # fmt: skip
    wire = state.to_dict()
    assert wire["jobs"]["ml/a"]["history"][0]["worstRank"] is None
    assert State.from_dict(pruned(wire)) == state
