"""The enforce-mode safety rules of ``policy_safety`` at their edges: node budgets as counts
and percentages (rounding, the one-node floor, the smaller of two), which zero budgets are
typos, and each risky setting exactly from the value its constant names, with the message
a person reads. The document-level tests (test_policy_validation.py) show a risky policy
is refused; these pin which values are risky and what the refusal says."""

from __future__ import annotations

import pytest

from pacekeeper.controller.core import policy_safety as ps
from pacekeeper.controller.core.policy import ActionKind, Breaker, ClusterSafety
from pacekeeper.controller.core.policy_safety import (
    EnforcedPolicy,
    JobBudgets,
    NodeBudget,
    UnsafeRisk,
    UnsafeSetting,
)
from pacekeeper.controller.core.policy_types import TaintEffect

NOTIFY, RESTART, TAINT, DRAIN = (
    ActionKind.NOTIFY,
    ActionKind.RESTART_RANK,
    ActionKind.TAINT_NODE,
    ActionKind.DRAIN_NODE,
)
BUDGETED = ClusterSafety()


def enforced(
    *steps: ActionKind,
    name: str = "p",
    budgets: JobBudgets | None = None,
    **kw: object,
) -> EnforcedPolicy:
    return EnforcedPolicy(name, frozenset(steps), budgets or JobBudgets(), **kw)  # type: ignore[arg-type]


def risks(found: list[UnsafeSetting]) -> list[UnsafeRisk]:
    return [s.risk for s in found]


# --- node budgets ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("budget", "total", "limit"),
    [
        (NodeBudget(max_nodes=3), 100, 3),
        (NodeBudget(max_nodes=0), 100, 0),
        (NodeBudget(max_percent=5.0), 100, 5),
        (NodeBudget(max_percent=5.0), 39, 1),  # 1.95 rounds down
        (NodeBudget(max_percent=5.0), 40, 2),
        (NodeBudget(max_percent=5.0), 10, 1),  # 0.5: at least one node above zero percent
        (NodeBudget(max_percent=5.0), 0, 1),
        (NodeBudget(max_percent=0.0), 100, 0),  # zero percent is zero, not one
        (NodeBudget(max_percent=100.0), 7, 7),
        (NodeBudget(max_percent=50.0), 3, 1),
        (NodeBudget(max_nodes=2, max_percent=50.0), 10, 2),  # the smaller wins
        (NodeBudget(max_nodes=7, max_percent=50.0), 10, 5),
        (NodeBudget(max_nodes=7, max_percent=0.0), 10, 0),
        (NodeBudget(), 10, None),
    ],
)
def test_node_budget_limit(budget: NodeBudget, total: int, limit: int | None) -> None:
    assert budget.limit(total) == limit


@pytest.mark.parametrize(
    ("budget", "zero", "unlimited", "every"),
    [
        (NodeBudget(), False, True, True),
        (NodeBudget(max_nodes=0), True, False, False),
        (NodeBudget(max_nodes=1), False, False, False),
        (NodeBudget(max_percent=0.0), True, False, False),
        (NodeBudget(max_percent=0.5), False, False, False),
        (NodeBudget(max_percent=99.9), False, False, False),
        (NodeBudget(max_percent=100.0), False, False, True),
        (NodeBudget(max_nodes=5000, max_percent=100.0), False, False, False),
    ],
)
def test_node_budget_shapes(budget: NodeBudget, zero: bool, unlimited: bool, every: bool) -> None:
    assert budget.is_zero() is zero
    assert budget.is_unlimited() is unlimited
    assert budget.allows_every_node() is every


# --- zero budgets: typos, refused outright --------------------------------------------


def test_zero_node_budgets_refused_only_for_node_steps() -> None:
    zero = JobBudgets(nodes=NodeBudget(max_nodes=0))
    cluster = ClusterSafety(nodes=NodeBudget(max_percent=0.0))
    assert ps.zero_budget_problems(enforced(NOTIFY, RESTART, budgets=zero), cluster) == []
    assert ps.zero_budget_problems(enforced(NOTIFY, TAINT, name="q", budgets=zero), cluster) == [
        "policy 'q': budgets.nodes is zero in enforce mode; every node action would be "
        "refused (disable the node steps or raise the budget)",
        "cluster.nodes is zero in enforce mode while policy 'q' enables node actions: "
        "every node action would be refused (raise it or disable the node steps)",
    ]


def test_zero_rate_budgets_refused_only_for_disruptive_steps() -> None:
    zero = JobBudgets(actions_per_hour=0)
    cluster = ClusterSafety(actions_per_hour=0)
    assert ps.zero_budget_problems(enforced(NOTIFY, budgets=zero), cluster) == []
    assert ps.zero_budget_problems(enforced(NOTIFY, RESTART, name="q", budgets=zero), cluster) == [
        "policy 'q': budgets.actionsPerHour=0 in enforce mode refuses every action "
        "(null means unlimited; disable the steps instead)",
        "cluster.actionsPerHour=0 in enforce mode refuses every action "
        "(null means unlimited; disable the steps instead)",
    ]


def test_budgets_of_one_are_no_typo() -> None:
    one = JobBudgets(nodes=NodeBudget(max_nodes=1), actions_per_hour=1)
    cluster = ClusterSafety(nodes=NodeBudget(max_nodes=1), actions_per_hour=1)
    assert ps.zero_budget_problems(enforced(NOTIFY, RESTART, TAINT, budgets=one), cluster) == []


def test_each_zero_budget_is_named_on_its_own() -> None:
    steps = (NOTIFY, RESTART, TAINT)
    only_job_rate = ps.zero_budget_problems(
        enforced(*steps, budgets=JobBudgets(actions_per_hour=0)), BUDGETED
    )
    assert len(only_job_rate) == 1 and "budgets.actionsPerHour=0" in only_job_rate[0]
    only_cluster_rate = ps.zero_budget_problems(enforced(*steps), ClusterSafety(actions_per_hour=0))
    assert len(only_cluster_rate) == 1 and only_cluster_rate[0].startswith("cluster.actions")
    only_cluster_nodes = ps.zero_budget_problems(
        enforced(*steps), ClusterSafety(nodes=NodeBudget(max_nodes=0))
    )
    assert len(only_cluster_nodes) == 1 and only_cluster_nodes[0].startswith("cluster.nodes")


# --- risky settings, refused unless acknowledged --------------------------------------

UNLIMITED_JOB = JobBudgets(nodes=NodeBudget(), actions_per_hour=None)
UNLIMITED_CLUSTER = ClusterSafety(nodes=NodeBudget(), actions_per_hour=None)


def test_unlimited_budgets_of_a_node_policy_name_all_four() -> None:
    found = ps.unsafe_settings(
        [enforced(NOTIFY, TAINT, name="q", budgets=UNLIMITED_JOB)], UNLIMITED_CLUSTER
    )
    unlimited = [s for s in found if s.risk is UnsafeRisk.UNLIMITED_BUDGETS]
    assert unlimited == [
        UnsafeSetting(
            UnsafeRisk.UNLIMITED_BUDGETS,
            "policy 'q': budgets.actionsPerHour, cluster.actionsPerHour, budgets.nodes and "
            "cluster.nodes are all null in enforce mode: no budget limits its disruptive actions",
            "set one of them",
        )
    ]


def test_unlimited_budgets_of_a_restart_policy_name_the_two_rates() -> None:
    found = ps.unsafe_settings(
        [enforced(NOTIFY, RESTART, name="q", budgets=UNLIMITED_JOB)], UNLIMITED_CLUSTER
    )
    assert found == [
        UnsafeSetting(
            UnsafeRisk.UNLIMITED_BUDGETS,
            "policy 'q': budgets.actionsPerHour and cluster.actionsPerHour are both null in "
            "enforce mode: no budget limits its disruptive actions",
            "set one of them",
        )
    ]


@pytest.mark.parametrize(
    ("job", "cluster"),
    [
        (JobBudgets(nodes=NodeBudget(), actions_per_hour=1), UNLIMITED_CLUSTER),
        (UNLIMITED_JOB, ClusterSafety(nodes=NodeBudget(), actions_per_hour=1)),
        (JobBudgets(nodes=NodeBudget(max_nodes=1), actions_per_hour=None), UNLIMITED_CLUSTER),
    ],
)
def test_one_budget_set_is_enough(job: JobBudgets, cluster: ClusterSafety) -> None:
    found = ps.unsafe_settings([enforced(NOTIFY, TAINT, budgets=job)], cluster)
    assert UnsafeRisk.UNLIMITED_BUDGETS not in risks(found)


def test_cluster_node_budget_counts_for_a_node_policy() -> None:
    cluster = ClusterSafety(nodes=NodeBudget(max_nodes=3), actions_per_hour=None)
    found = ps.unsafe_settings([enforced(NOTIFY, TAINT, budgets=UNLIMITED_JOB)], cluster)
    assert UnsafeRisk.UNLIMITED_BUDGETS not in risks(found)


def test_unlimited_budgets_of_a_notify_policy_are_no_risk() -> None:
    assert ps.unsafe_settings([enforced(NOTIFY, budgets=UNLIMITED_JOB)], UNLIMITED_CLUSTER) == []


def test_full_cluster_budget_only_with_node_steps() -> None:
    full = ClusterSafety(nodes=NodeBudget(max_percent=100.0))
    assert ps.unsafe_settings([enforced(NOTIFY, RESTART)], full) == []
    found = ps.unsafe_settings([enforced(NOTIFY, TAINT, name="q")], full)
    assert found == [
        UnsafeSetting(
            UnsafeRisk.FULL_CLUSTER_BUDGET,
            "cluster.nodes with maxNodes=null and maxPercent=100 lets policy 'q' mark every "
            "node of the cluster at once in enforce mode",
            "lower maxPercent or set maxNodes",
        )
    ]
    null = ps.unsafe_settings(
        [enforced(NOTIFY, TAINT, name="a"), enforced(NOTIFY, DRAIN, TAINT, name="b")],
        ClusterSafety(nodes=NodeBudget()),
    )
    assert null[0].message.startswith(
        "cluster.nodes with maxNodes=null and maxPercent=null lets policies 'a', 'b' mark"
    )


def test_no_execute_taint_only_when_the_taint_step_is_enabled() -> None:
    assert (
        ps.unsafe_settings(
            [enforced(NOTIFY, RESTART, taint_effect=TaintEffect.NO_EXECUTE)], BUDGETED
        )
        == []
    )
    assert (
        ps.unsafe_settings(
            [enforced(NOTIFY, TAINT, taint_effect=TaintEffect.PREFER_NO_SCHEDULE)], BUDGETED
        )
        == []
    )
    found = ps.unsafe_settings(
        [enforced(NOTIFY, TAINT, name="q", taint_effect=TaintEffect.NO_EXECUTE)], BUDGETED
    )
    assert risks(found) == [UnsafeRisk.NO_EXECUTE_TAINT]
    assert found[0].message.startswith("ladder.taintNode.effect=NoExecute in policy 'q' evicts")
    assert found[0].remedy == "use NoSchedule, the default, and the budgeted drainNode step"


def test_empty_ladder() -> None:
    assert ps.unsafe_settings([enforced(NOTIFY)], BUDGETED) == []
    found = ps.unsafe_settings([enforced(name="q")], BUDGETED)
    assert risks(found) == [UnsafeRisk.EMPTY_LADDER]
    assert found[0].message.startswith("policy 'q' enables no ladder step in enforce mode")
    assert found[0].remedy == "enable ladder.notify at least, or give the policy mode: observe"


ONE = "persistence.consecutiveReports=1"


def test_hair_trigger_from_its_threshold() -> None:
    at = enforced(NOTIFY, RESTART, name="q", act=ps.HAIR_TRIGGER_ACT, one_report_rule=ONE)
    found = ps.unsafe_settings([at], BUDGETED)
    assert found == [
        UnsafeSetting(
            UnsafeRisk.HAIR_TRIGGER,
            f"policy 'q': thresholds.act=0.95 with {ONE} in enforce mode: one report with a "
            "rank 5% behind its reference starts disruptive actions, and healthy GPUs of one "
            "model differ by more than that",
            "lower thresholds.act below 0.95 or require more reports in a row",
        )
    ]
    below = enforced(NOTIFY, RESTART, act=0.9499, one_report_rule=ONE)
    assert ps.unsafe_settings([below], BUDGETED) == []


def test_hair_trigger_needs_one_report_and_a_disruptive_step() -> None:
    more_reports = enforced(NOTIFY, RESTART, act=0.99, one_report_rule=None)
    notify_only = enforced(NOTIFY, act=0.99, one_report_rule=ONE)
    assert ps.unsafe_settings([more_reports, notify_only], BUDGETED) == []


def test_instant_escalation_below_its_floor() -> None:
    short = enforced(
        NOTIFY,
        RESTART,
        name="q",
        step_timeouts=((NOTIFY, 0.5), (RESTART, ps.MIN_STEP_TIMEOUT_S)),
    )
    found = ps.unsafe_settings([short], BUDGETED)
    assert found == [
        UnsafeSetting(
            UnsafeRisk.INSTANT_ESCALATION,
            "policy 'q': ladder.notify.timeoutS=0.5 in enforce mode: no action shows an effect "
            "in under 1 s (a restarted rank or a drained node takes minutes), so the ladder "
            "escalates on every report whatever the last step did",
            "give each enabled step the time its action needs to show",
        )
    ]
    at_floor = enforced(NOTIFY, RESTART, step_timeouts=((NOTIFY, 1.0), (RESTART, 1.0)))
    assert ps.unsafe_settings([at_floor], BUDGETED) == []
    notify_only = enforced(NOTIFY, step_timeouts=((NOTIFY, 0.1),))
    assert ps.unsafe_settings([notify_only], BUDGETED) == []


def test_breaker_never_opens_from_the_largest_cluster() -> None:
    never = ClusterSafety(breaker=Breaker(max_actions=ps.BREAKER_NEVER_OPENS_AT))
    found = ps.unsafe_settings([enforced(NOTIFY, RESTART, name="q")], never)
    assert found == [
        UnsafeSetting(
            UnsafeRisk.BREAKER_NEVER_OPENS,
            "cluster.breaker.maxActions=5000 can never trip: a Kubernetes cluster has at most "
            "5000 nodes, so nothing stops a storm of actions by policy 'q' in enforce mode",
            "lower it below 5000",
        )
    ]
    trips = ClusterSafety(breaker=Breaker(max_actions=ps.BREAKER_NEVER_OPENS_AT - 1))
    assert ps.unsafe_settings([enforced(NOTIFY, RESTART)], trips) == []
    assert ps.unsafe_settings([enforced(NOTIFY)], never) == []


def test_refusal_and_warning_name_the_risk() -> None:
    s = UnsafeSetting(UnsafeRisk.HAIR_TRIGGER, "the message", "the remedy")
    assert s.refusal() == (
        "the message (the remedy, or accept the risk with acknowledgeUnsafe: [hairTrigger])"
    )
    assert s.warning() == "the message; accepted by acknowledgeUnsafe: hairTrigger"
