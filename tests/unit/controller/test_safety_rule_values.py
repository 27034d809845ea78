"""Values of ``policy_safety`` that test_safety_rule_edges.py checked only in part, found
by mutation (make mutation, issue 41): a percent node budget between zero and one percent
still lets one node through, and the NoExecute refusal says in full why the taint is
unbudgeted (a person reads that sentence to decide whether to acknowledge the risk)."""

from __future__ import annotations

import pytest

from pacekeeper.controller.core import policy_safety as ps
from pacekeeper.controller.core.policy import ActionKind, ClusterSafety
from pacekeeper.controller.core.policy_safety import (
    EnforcedPolicy,
    JobBudgets,
    NodeBudget,
    UnsafeRisk,
)
from pacekeeper.controller.core.policy_types import TaintEffect


@pytest.mark.parametrize("percent", [0.1, 0.5, 1.0])
@pytest.mark.parametrize("total", [1, 10, 99])
def test_a_percent_budget_up_to_one_percent_still_allows_one_node(
    percent: float, total: int
) -> None:
    # floor(percent * total / 100) is 0 for all of these; any percent above zero means
    # "at least one node", not "none" (only exactly zero is the refusing budget).
    budget = NodeBudget(max_percent=percent)
    assert budget.limit(total) == 1
    assert not budget.is_zero()


def test_no_execute_refusal_reads_in_full() -> None:
    policies = [
        EnforcedPolicy(
            name,
            frozenset({ActionKind.NOTIFY, ActionKind.TAINT_NODE}),
            JobBudgets(),
            taint_effect=TaintEffect.NO_EXECUTE,
        )
        for name in ("a", "b")
    ]
    found = ps.unsafe_settings(policies, ClusterSafety())
    assert [s.risk for s in found] == [UnsafeRisk.NO_EXECUTE_TAINT]
    assert found[0].message == (
        "ladder.taintNode.effect=NoExecute in policies 'a', 'b' evicts every pod on the node "
        "that does not tolerate the taint, of every job, at once: no budget, no "
        "PodDisruptionBudget, no drain step governs it (and a scheduler such as Kueue's "
        "topology-aware scheduling may evict or move whole workloads off a NoExecute-tainted "
        "node)"
    )
