"""The safety limits of ``budgets`` at their edges: each cooldown, window and budget refuses
up to the instant (or count) it names and no further, and every refusal says which limit
and by how much. The engine-level storms (test_engine_safety.py) show the limits hold;
these pin where each one starts and stops, so a `<` turned `<=` or a limit off by one
fails here."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from pacekeeper.controller.core import budgets as b
from pacekeeper.controller.core.decisions import Reason
from pacekeeper.controller.core.ids import JobKey, NodeName
from pacekeeper.controller.core.observations import MarkKind
from pacekeeper.controller.core.policy import ActionKind, Breaker, ClusterSafety, Policy
from pacekeeper.controller.core.policy_safety import JobBudgets, NodeBudget
from pacekeeper.controller.core.state import (
    ActionStamp,
    ClusterState,
    JobState,
    MarkRecord,
    NodeState,
)

T0 = datetime(2026, 1, 1, 12, tzinfo=UTC)
JOB = JobKey("ns/a")
OTHER = JobKey("ns/b")
N1, N2, N3 = NodeName("n1"), NodeName("n2"), NodeName("n3")
TICK = timedelta(microseconds=1)

UNLIMITED = Policy(
    budgets=JobBudgets(nodes=NodeBudget(), actions_per_hour=None, between_actions_s=0.0)
)
OPEN = ClusterSafety(nodes=NodeBudget(), actions_per_hour=None)


def req(
    *,
    step: ActionKind = ActionKind.TAINT_NODE,
    node: NodeName = N1,
    job: JobKey = JOB,
    job_state: JobState | None = None,
    policy: Policy = UNLIMITED,
    safety: ClusterSafety = OPEN,
    job_nodes: int = 4,
    cluster_nodes: int = 10,
    now: datetime = T0,
    include_simulated: bool = False,
) -> b.Request:
    return b.Request(
        step=step,
        node=node,
        job=job,
        job_state=job_state or JobState(first_seen_at=T0 - timedelta(days=1)),
        policy=policy,
        safety=safety,
        job_nodes=job_nodes,
        cluster_nodes=cluster_nodes,
        now=now,
        include_simulated=include_simulated,
    )


def mark(*holders: JobKey, simulated: bool = False) -> MarkRecord:
    return MarkRecord(
        applied_at=T0 - timedelta(hours=1),
        holders=holders,
        policy="default",
        action_key="k",
        simulated=simulated,
    )


def marked(**nodes: MarkRecord) -> ClusterState:
    return ClusterState(
        nodes={NodeName(n): NodeState(marks={MarkKind.TAINT: r}) for n, r in nodes.items()}
    )


def stamps(*ages_jobs: tuple[timedelta, JobKey], simulated: bool = False) -> ClusterState:
    return ClusterState(
        stamps=tuple(ActionStamp(at=T0 - age, job=j, simulated=simulated) for age, j in ages_jobs)
    )


# --- the node's cooldown ------------------------------------------------------------


def cooled(until: datetime, cause: str = "afterUndo") -> ClusterState:
    return ClusterState(nodes={N1: NodeState(cooldown_until=until, cooldown_cause=cause)})


def test_node_cooldown_refuses_until_its_end_and_names_cause_and_end() -> None:
    until = T0 + timedelta(minutes=5)
    refusal = b.check(req(now=until - TICK), cooled(until))
    assert refusal == b.Refusal(Reason.COOLDOWN, {"cause": "afterUndo", "until": until.isoformat()})
    assert refusal.until == until


def test_node_cooldown_ends_at_its_instant() -> None:
    until = T0 + timedelta(minutes=5)
    assert b.check(req(now=until), cooled(until)) is None


@pytest.mark.parametrize("step", [ActionKind.RESTART_RANK, ActionKind.NOTIFY])
def test_node_cooldown_does_not_hold_a_step_that_is_no_node_action(step: ActionKind) -> None:
    assert b.check(req(step=step), cooled(T0 + timedelta(hours=1))) is None


def test_a_cooldown_on_another_node_does_not_hold_this_one() -> None:
    assert b.check(req(node=N2), cooled(T0 + timedelta(hours=1))) is None


# --- the job's gap between actions ----------------------------------------------------


def gapped(gap_s: float) -> Policy:
    return Policy(
        budgets=JobBudgets(nodes=NodeBudget(), actions_per_hour=None, between_actions_s=gap_s)
    )


def last_acted(at: datetime) -> JobState:
    return JobState(first_seen_at=T0 - timedelta(days=1), last_disruptive_at=at)


@pytest.mark.parametrize("step", [ActionKind.RESTART_RANK, ActionKind.TAINT_NODE])
def test_gap_between_actions_refuses_until_it_has_passed(step: ActionKind) -> None:
    last = T0 - timedelta(seconds=300) + TICK
    refusal = b.check(
        req(step=step, policy=gapped(300), job_state=last_acted(last)), ClusterState()
    )
    until = last + timedelta(seconds=300)
    assert refusal == b.Refusal(
        Reason.COOLDOWN, {"cause": "betweenActions", "until": until.isoformat()}
    )
    assert refusal.until == until


def test_gap_between_actions_ends_at_its_instant() -> None:
    last = T0 - timedelta(seconds=300)
    assert b.check(req(policy=gapped(300), job_state=last_acted(last)), ClusterState()) is None


def test_no_gap_without_an_earlier_action() -> None:
    assert b.check(req(policy=gapped(300)), ClusterState()) is None


# --- the breaker ------------------------------------------------------------------------


def test_open_breaker_refuses_until_it_closes_with_the_demand_it_saw() -> None:
    until = T0 + timedelta(minutes=10)
    cluster = ClusterState(
        breaker_open_until=until, breaker_demand={"a|n1": T0, "b|n2": T0, "c|n3": T0}
    )
    refusal = b.check(req(now=until - TICK), cluster)
    assert refusal == b.Refusal(Reason.BREAKER_OPEN, {"until": until.isoformat(), "demand": 3})
    assert refusal.until == until
    assert b.check(req(now=until), cluster) is None


def test_open_breaker_refuses_a_rank_restart_too() -> None:
    cluster = ClusterState(breaker_open_until=T0 + timedelta(minutes=1))
    refusal = b.check(req(step=ActionKind.RESTART_RANK), cluster)
    assert refusal is not None and refusal.reason is Reason.BREAKER_OPEN


def test_trip_needs_more_subjects_than_max_actions() -> None:
    cfg = Breaker(max_actions=2, window_s=60.0, open_s=600.0)
    c = b.with_demand(ClusterState(), "a|n1", cfg, T0)
    c = b.with_demand(c, "b|n1", cfg, T0)
    assert c.breaker_open_until is None  # two subjects: at the limit, not past it
    c = b.with_demand(c, "b|n1", cfg, T0 + timedelta(seconds=1))
    assert c.breaker_open_until is None  # the same subject again is no new demand
    assert c.breaker_demand == {"a|n1": T0, "b|n1": T0}  # first time kept
    later = T0 + timedelta(seconds=5)
    c = b.with_demand(c, "c|n2", cfg, later)
    assert c.breaker_open_until == later + timedelta(seconds=600)


def test_demand_older_than_the_window_is_forgotten_at_the_window_edge() -> None:
    cfg = Breaker(max_actions=1, window_s=60.0, open_s=600.0)
    c = b.with_demand(ClusterState(), "a|n1", cfg, T0)
    # Exactly one window later the first demand has left it: one subject, no trip.
    edge = b.with_demand(c, "b|n1", cfg, T0 + timedelta(seconds=60))
    assert edge.breaker_demand == {"b|n1": T0 + timedelta(seconds=60)}
    assert edge.breaker_open_until is None
    # A moment earlier both are within it: two subjects > 1 trips.
    inside = b.with_demand(c, "b|n1", cfg, T0 + timedelta(seconds=60) - TICK)
    assert set(inside.breaker_demand) == {"a|n1", "b|n1"}
    assert inside.breaker_open_until == T0 + timedelta(seconds=660) - TICK


def test_an_open_breaker_is_not_extended_by_new_demand() -> None:
    cfg = Breaker(max_actions=1, window_s=900.0, open_s=600.0)
    until = T0 + timedelta(seconds=30)
    c = ClusterState(breaker_demand={"a|n1": T0, "b|n1": T0}, breaker_open_until=until)
    assert b.with_demand(c, "c|n1", cfg, T0 + timedelta(seconds=1)).breaker_open_until == until
    # Once it has closed, a storm still going trips it anew.
    again = b.with_demand(c, "d|n1", cfg, until)
    assert again.breaker_open_until == until + timedelta(seconds=600)


def test_demand_is_bounded_to_four_times_max_actions_keeping_the_newest() -> None:
    cfg = Breaker(max_actions=2, window_s=3600.0, open_s=60.0)
    c = ClusterState()
    for i in range(9):
        c = b.with_demand(c, f"j{i}|n", cfg, T0 + timedelta(seconds=i))
    assert len(c.breaker_demand) == 8
    assert "j0|n" not in c.breaker_demand and "j8|n" in c.breaker_demand
    c = b.with_demand(ClusterState(), "x|n", cfg, T0)
    for i in range(7):
        c = b.with_demand(c, f"j{i}|n", cfg, T0 + timedelta(seconds=i + 1))
    assert len(c.breaker_demand) == 8 and "x|n" in c.breaker_demand


def test_admit_counts_the_demand_of_job_and_node_even_when_refused() -> None:
    cluster = ClusterState(breaker_open_until=T0 + timedelta(minutes=1))
    got = b.admit(req(job=JOB, node=N2), cluster)
    assert got.cluster.breaker_demand == {f"{JOB}|{N2}": T0}
    assert got.refusal is not None and got.refusal.reason is Reason.BREAKER_OPEN
    assert got.evidence == {}


def test_admit_trips_the_breaker_on_the_demand_it_counts() -> None:
    safety = ClusterSafety(
        nodes=NodeBudget(), actions_per_hour=None, breaker=Breaker(max_actions=1, open_s=60.0)
    )
    cluster = ClusterState(breaker_demand={"ns/b|n1": T0})
    got = b.admit(req(safety=safety), cluster)
    assert got.cluster.breaker_open_until == T0 + timedelta(seconds=60)
    assert got.refusal is not None and got.refusal.reason is Reason.BREAKER_OPEN


def test_admit_lets_through_with_the_budgets_used_and_their_limits() -> None:
    policy = Policy(budgets=JobBudgets(nodes=NodeBudget(max_nodes=3), between_actions_s=0.0))
    safety = ClusterSafety(nodes=NodeBudget(max_percent=50.0), actions_per_hour=None)
    cluster = marked(n2=mark(JOB), n3=mark(OTHER))
    got = b.admit(req(policy=policy, safety=safety, cluster_nodes=10), cluster)
    assert got.refusal is None
    assert got.evidence == {
        "jobNodesMarked": 1,
        "jobNodesLimit": 3,
        "clusterNodesMarked": 2,
        "clusterNodesLimit": 5,
    }


# --- rolling-hour rate limits -------------------------------------------------------


def test_cluster_rate_limit_refuses_at_the_limit_and_not_below() -> None:
    safety = ClusterSafety(nodes=NodeBudget(), actions_per_hour=2)
    one = stamps((timedelta(minutes=5), OTHER))
    assert b.check(req(safety=safety), one) is None
    two = stamps((timedelta(minutes=5), OTHER), (timedelta(minutes=50), OTHER))
    assert b.check(req(safety=safety), two) == b.Refusal(
        Reason.BUDGET_EXHAUSTED, {"budget": "cluster.actionsPerHour", "used": 2, "limit": 2}
    )


def test_a_stamp_one_hour_old_has_left_the_rate_window() -> None:
    safety = ClusterSafety(nodes=NodeBudget(), actions_per_hour=1)
    assert b.check(req(safety=safety), stamps((b.RATE_WINDOW, OTHER))) is None
    inside = stamps((b.RATE_WINDOW - TICK, OTHER))
    assert b.check(req(safety=safety), inside) is not None


def test_job_rate_limit_counts_only_the_jobs_own_actions() -> None:
    policy = Policy(
        budgets=JobBudgets(nodes=NodeBudget(), actions_per_hour=2, between_actions_s=0.0)
    )
    others = stamps(*[(timedelta(minutes=i), OTHER) for i in range(1, 6)])
    assert b.check(req(policy=policy), others) is None
    mine = stamps((timedelta(minutes=1), JOB), (timedelta(minutes=2), JOB))
    assert b.check(req(policy=policy), mine) == b.Refusal(
        Reason.BUDGET_EXHAUSTED, {"budget": "budgets.actionsPerHour", "used": 2, "limit": 2}
    )
    one = stamps((timedelta(minutes=1), JOB), (timedelta(minutes=2), OTHER))
    assert b.check(req(policy=policy), one) is None


def test_job_rate_window_edge() -> None:
    policy = Policy(
        budgets=JobBudgets(nodes=NodeBudget(), actions_per_hour=1, between_actions_s=0.0)
    )
    assert b.check(req(policy=policy), stamps((b.RATE_WINDOW, JOB))) is None
    assert b.check(req(policy=policy), stamps((b.RATE_WINDOW - TICK, JOB))) is not None


def test_simulated_stamps_count_only_for_an_observing_job() -> None:
    safety = ClusterSafety(nodes=NodeBudget(), actions_per_hour=1)
    sim = stamps((timedelta(minutes=1), OTHER), simulated=True)
    assert b.check(req(safety=safety), sim) is None
    refusal = b.check(req(safety=safety, include_simulated=True), sim)
    assert refusal is not None and refusal.evidence["budget"] == "cluster.actionsPerHour"


def test_rate_limits_hold_a_rank_restart_too() -> None:
    safety = ClusterSafety(nodes=NodeBudget(), actions_per_hour=1)
    refusal = b.check(req(step=ActionKind.RESTART_RANK, safety=safety), stamps((TICK, OTHER)))
    assert refusal is not None and refusal.reason is Reason.BUDGET_EXHAUSTED


# --- node budgets -------------------------------------------------------------------


def job_nodes_policy(limit: int) -> Policy:
    return Policy(
        budgets=JobBudgets(
            nodes=NodeBudget(max_nodes=limit), actions_per_hour=None, between_actions_s=0.0
        )
    )


def test_job_node_budget_refuses_a_new_node_at_the_limit() -> None:
    cluster = marked(n2=mark(JOB), n3=mark(JOB))
    assert b.check(req(policy=job_nodes_policy(2)), cluster) == b.Refusal(
        Reason.BUDGET_EXHAUSTED, {"budget": "budgets.nodes", "used": 2, "limit": 2}
    )
    assert b.check(req(policy=job_nodes_policy(3)), cluster) is None


def test_job_node_budget_lets_a_node_it_already_marks_take_the_next_step() -> None:
    cluster = marked(n1=mark(JOB), n2=mark(JOB))
    assert b.check(req(policy=job_nodes_policy(2), node=N1), cluster) is None


def test_job_node_budget_ignores_other_jobs_marks() -> None:
    cluster = marked(n2=mark(OTHER), n3=mark(OTHER))
    assert b.check(req(policy=job_nodes_policy(1)), cluster) is None


def test_node_budgets_do_not_hold_a_rank_restart() -> None:
    cluster = marked(n2=mark(JOB), n3=mark(OTHER))
    tight = ClusterSafety(nodes=NodeBudget(max_nodes=1), actions_per_hour=None)
    assert b.check(req(step=ActionKind.RESTART_RANK, policy=job_nodes_policy(1)), cluster) is None
    assert b.check(req(step=ActionKind.RESTART_RANK, safety=tight), cluster) is None


def test_cluster_node_budget_refuses_a_new_node_at_the_limit() -> None:
    cluster = marked(n2=mark(OTHER), n3=mark(JobKey("ns/c")))
    at = ClusterSafety(nodes=NodeBudget(max_nodes=2), actions_per_hour=None)
    assert b.check(req(safety=at), cluster) == b.Refusal(
        Reason.BUDGET_EXHAUSTED, {"budget": "cluster.nodes", "used": 2, "limit": 2}
    )
    above = ClusterSafety(nodes=NodeBudget(max_nodes=3), actions_per_hour=None)
    assert b.check(req(safety=above), cluster) is None
    # A node that already carries a mark of ours adds nothing to the count.
    assert b.check(req(safety=at, node=N2), cluster) is None


def test_cluster_node_budget_by_percent_of_the_cluster() -> None:
    cluster = marked(n2=mark(OTHER))
    pct = ClusterSafety(nodes=NodeBudget(max_percent=20.0), actions_per_hour=None)
    assert b.check(req(safety=pct, cluster_nodes=9), cluster) is not None  # floor(1.8)=1
    assert b.check(req(safety=pct, cluster_nodes=10), cluster) is None  # 2


def test_job_node_budget_by_percent_of_the_job() -> None:
    cluster = marked(n2=mark(JOB))
    policy = Policy(
        budgets=JobBudgets(
            nodes=NodeBudget(max_percent=25.0), actions_per_hour=None, between_actions_s=0.0
        )
    )
    assert b.check(req(policy=policy, job_nodes=7, cluster_nodes=7), cluster) is not None
    assert b.check(req(policy=policy, job_nodes=8, cluster_nodes=8), cluster) is None


def test_simulated_marks_count_only_for_an_observing_job() -> None:
    cluster = marked(n2=mark(JOB, simulated=True))
    policy = job_nodes_policy(1)
    assert b.check(req(policy=policy), cluster) is None
    refusal = b.check(req(policy=policy, include_simulated=True), cluster)
    assert refusal is not None and refusal.evidence == {
        "budget": "budgets.nodes",
        "used": 1,
        "limit": 1,
    }


def test_marked_nodes_by_job_and_reality() -> None:
    cluster = ClusterState(
        nodes={
            N1: NodeState(marks={MarkKind.TAINT: mark(JOB)}),
            N2: NodeState(marks={MarkKind.CORDON: mark(OTHER, JOB)}),
            N3: NodeState(marks={MarkKind.TAINT: mark(OTHER, simulated=True)}),
        }
    )
    assert b.marked_nodes(cluster, include_simulated=False) == {N1, N2}
    assert b.marked_nodes(cluster, include_simulated=True) == {N1, N2, N3}
    assert b.marked_nodes(cluster, job=JOB, include_simulated=True) == {N1, N2}
    assert b.marked_nodes(cluster, job=OTHER, include_simulated=False) == {N2}


def test_counts_reads_a_stamp_or_a_flag() -> None:
    real, sim = ActionStamp(at=T0, job=JOB), ActionStamp(at=T0, job=JOB, simulated=True)
    assert b.counts(real, False) and b.counts(real, True)
    assert not b.counts(sim, False) and b.counts(sim, True)
    assert b.counts(False, False) and not b.counts(True, False) and b.counts(True, True)


# --- charging an action and what the operator sees ------------------------------------


def test_charge_stamps_the_action_and_starts_the_jobs_gap() -> None:
    js = JobState(first_seen_at=T0 - timedelta(days=1))
    stamp = ActionStamp(at=T0, job=JOB)
    cluster, job_state = b.charge(ClusterState(), js, stamp)
    assert cluster.stamps == (stamp,)
    assert job_state == replace(js, last_disruptive_at=T0)


def test_with_stamp_drops_stamps_an_hour_older_than_the_new_one() -> None:
    old = ActionStamp(at=T0 - b.RATE_WINDOW, job=JOB)
    young = ActionStamp(at=T0 - b.RATE_WINDOW + TICK, job=JOB)
    new = ActionStamp(at=T0, job=OTHER)
    got = b.with_stamp(ClusterState(stamps=(old, young)), new)
    assert got.stamps == (young, new)


def test_cluster_usage_counts_only_real_marks_and_stamps_in_the_window() -> None:
    cluster = ClusterState(
        nodes={
            N1: NodeState(marks={MarkKind.TAINT: mark(JOB)}),
            N2: NodeState(marks={MarkKind.TAINT: mark(OTHER, simulated=True)}),
        },
        stamps=(
            ActionStamp(at=T0 - TICK, job=JOB),
            ActionStamp(at=T0 - TICK, job=OTHER, simulated=True),
            ActionStamp(at=T0 - b.RATE_WINDOW, job=JOB),
            ActionStamp(at=T0 - b.RATE_WINDOW + TICK, job=JOB),
        ),
    )
    safety = ClusterSafety(nodes=NodeBudget(max_nodes=4, max_percent=10.0), actions_per_hour=7)
    assert b.cluster_usage(cluster, safety, 30, T0) == {
        "cluster.nodes": (1, 3),
        "cluster.actionsPerHour": (2, 7),
    }
    assert b.cluster_usage(ClusterState(), OPEN, 30, T0) == {
        "cluster.nodes": (0, None),
        "cluster.actionsPerHour": (0, None),
    }


def test_refusal_without_an_end_has_no_until() -> None:
    assert b.Refusal(Reason.BUDGET_EXHAUSTED, {"budget": "x"}).until is None
    assert b.Refusal(Reason.BUDGET_EXHAUSTED).until is None


def test_demand_bound_keeps_the_newest_by_time_not_by_name() -> None:
    cfg = Breaker(max_actions=2, window_s=3600.0, open_s=60.0)
    c = ClusterState()
    for i in range(9):  # names sort opposite to time: j9 is the oldest, j1 the newest
        c = b.with_demand(c, f"j{9 - i}|n", cfg, T0 + timedelta(seconds=i))
    assert "j9|n" not in c.breaker_demand and "j1|n" in c.breaker_demand


def test_job_percent_budget_is_read_against_the_jobs_nodes_in_the_evidence() -> None:
    policy = Policy(budgets=JobBudgets(nodes=NodeBudget(max_percent=50.0), between_actions_s=0.0))
    got = b.admit(req(policy=policy, safety=OPEN, job_nodes=6), ClusterState())
    assert got.evidence["jobNodesLimit"] == 3


def test_simulated_marks_fill_the_cluster_budget_for_an_observing_job() -> None:
    cluster = marked(n2=mark(OTHER, simulated=True))
    one = ClusterSafety(nodes=NodeBudget(max_nodes=1), actions_per_hour=None)
    assert b.check(req(safety=one), cluster) is None
    refusal = b.check(req(safety=one, include_simulated=True), cluster)
    assert refusal is not None and refusal.evidence["budget"] == "cluster.nodes"


def test_a_simulated_mark_does_not_hide_a_real_one_on_the_same_node() -> None:
    cluster = ClusterState(
        nodes={
            N1: NodeState(
                marks={MarkKind.TAINT: mark(JOB, simulated=True), MarkKind.CORDON: mark(JOB)}
            )
        }
    )
    assert b.marked_nodes(cluster, include_simulated=False) == {N1}
    assert b.marked_nodes(cluster, job=JOB, include_simulated=False) == {N1}
