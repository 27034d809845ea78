"""Shared by the Ray controller tests: a test-sized policy and a fake clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from pacekeeper.controller.core.policy import PolicyDocument, parse_policy_document

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def ray_policy(ladder: dict[str, Any], mode: str = "enforce") -> PolicyDocument:
    """Acts after one report below 0.75, no warm-up, one-minute step timeouts."""
    return parse_policy_document(
        {
            "apiVersion": "pacekeeper.dev/v1alpha1",
            "kind": "RemediationPolicies",
            "mode": mode,
            "cluster": {
                "nodes": {"maxNodes": 10},
                "actionsPerHour": 100,
                "breaker": {"maxActions": 100},
            },
            "policies": {
                "default": {
                    "thresholds": {"act": 0.75, "recover": 0.9},
                    "persistence": {"consecutiveReports": 1, "maxReportAgeS": 300},
                    "warmup": {"afterJobStartS": 0, "afterActionS": 0},
                    "ladder": ladder,
                    "budgets": {
                        "nodes": {"maxNodes": 2},
                        "actionsPerHour": 100,
                        "betweenActionsS": 0,
                    },
                }
            },
        },
        "ray-test",
    )


class Clock:
    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float = 60.0) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now
