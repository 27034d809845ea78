"""How many pods a PodDisruptionBudget lets the eviction subresource take, right now.

A real cluster's disruption controller keeps `status.disruptionsAllowed` current; the
harness has no controllers, so it computes the same figure from the pods at the moment
of each eviction.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .selectors import label_selector_matches

# Pods in these phases are evicted without consulting any budget (as the API server does).
PHASES_IGNORING_BUDGETS = frozenset({"Pending", "Succeeded", "Failed"})


@dataclass(frozen=True, slots=True)
class Budget:
    name: str
    expected: int
    healthy: int
    desired_healthy: int

    @property
    def disruptions_allowed(self) -> int:
        return max(0, self.healthy - self.desired_healthy)


def _is_healthy(pod: Mapping[str, Any]) -> bool:
    if pod.get("metadata", {}).get("deletionTimestamp"):
        return False
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return True  # no Ready condition recorded: a Running pod counts as healthy


def _scaled(value: int | str, expected: int) -> int:
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * expected / 100)
    return int(value)


def evaluate(pdb: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> Budget:
    """The budget of `pdb` over `pods` (all pods of the PDB's namespace)."""
    spec = pdb.get("spec") or {}
    selected = [
        pod
        for pod in pods
        if label_selector_matches(spec.get("selector"), pod.get("metadata", {}).get("labels") or {})
    ]
    # The pods a budget expects never drop below what it recorded before (see
    # ApiServer._record_budget): an evicted, unreplaced pod still counts as missing.
    expected = max(len(selected), int((pdb.get("status") or {}).get("expectedPods") or 0))
    healthy = sum(1 for pod in selected if _is_healthy(pod))
    if spec.get("minAvailable") is not None:
        desired = _scaled(spec["minAvailable"], expected)
    elif spec.get("maxUnavailable") is not None:
        desired = max(0, expected - _scaled(spec["maxUnavailable"], expected))
    else:
        desired = expected  # neither set: no voluntary disruption allowed
    return Budget(pdb["metadata"]["name"], expected, healthy, desired)


def selects(pdb: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    spec = pdb.get("spec") or {}
    return label_selector_matches(spec.get("selector"), pod.get("metadata", {}).get("labels") or {})
