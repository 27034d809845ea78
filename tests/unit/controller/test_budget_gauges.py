"""The budget gauges an operator's alerts read: used and limit per scope, and no limit
sample for an unlimited scope."""

from __future__ import annotations

from pacekeeper.controller.runtime.metrics import ControllerMetrics


def _sample(m: ControllerMetrics, name: str, scope: str) -> float | None:
    return m.registry.get_sample_value(name, {"scope": scope})


def test_used_and_limit_per_scope_and_no_limit_when_unlimited() -> None:
    m = ControllerMetrics()
    m.show_budgets({"cluster.nodes": (2, 5), "cluster.actionsPerHour": (3, None)})
    assert _sample(m, "pacekeeper_budget_used", "cluster.nodes") == 2
    assert _sample(m, "pacekeeper_budget_limit", "cluster.nodes") == 5
    assert _sample(m, "pacekeeper_budget_used", "cluster.actionsPerHour") == 3
    assert _sample(m, "pacekeeper_budget_limit", "cluster.actionsPerHour") is None
    # A policy reload that lifts the node limit takes its sample away.
    m.show_budgets({"cluster.nodes": (2, None), "cluster.actionsPerHour": (4, 10)})
    assert _sample(m, "pacekeeper_budget_limit", "cluster.nodes") is None
    assert _sample(m, "pacekeeper_budget_limit", "cluster.actionsPerHour") == 10
    assert _sample(m, "pacekeeper_budget_used", "cluster.actionsPerHour") == 4
