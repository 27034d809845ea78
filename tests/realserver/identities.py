"""The ServiceAccount identities that `real_cluster` issues static tokens for.

Tokens are fixed when kube-apiserver starts (its token file is read once), so every
identity a test of this tier authenticates as is listed here, before the session starts.
Tests bind them to Roles in their own namespaces; the identity's namespace need not exist.

The operator scenarios (`test_operator_e2e*.py`) run as the chart's own ServiceAccount
(`OPERATOR`: release `pk` in `pacekeeper-system`, as tests/chart/chart_render.py renders
it) and their training pods as a ServiceAccount of the job's namespace. The chart's
reporter RoleBinding names that account in the job's namespace, so each scenario has a
namespace of its own, fixed here, and its accounts.
"""

from __future__ import annotations

from cluster import ServiceAccountIdentity

IDENTITY_NAMESPACE = "pk-identities"
NO_ROLE = ServiceAccountIdentity(IDENTITY_NAMESPACE, "no-role")
ONE_REPORT = ServiceAccountIdentity(IDENTITY_NAMESPACE, "one-report")

CHART_NAMESPACE = "pacekeeper-system"
STATE_NAMESPACE = f"{CHART_NAMESPACE}-state"
"""The chart's default state namespace (`state.namespace`): the controller's state
ConfigMaps, shared by the scenarios like the chart namespace (each World deletes the maps
it made)."""
OPERATOR = ServiceAccountIdentity(CHART_NAMESPACE, "pk-pacekeeper")
"""The chart's controller ServiceAccount (`<release>-pacekeeper`)."""

TRAINER = "trainer"
"""The ServiceAccount a scenario's training pods run as, in the scenario's namespace."""
INTRUDER = "intruder"
"""A second job's ServiceAccount in the trust scenario's namespace."""

E2E_NAMESPACES = (
    "e2e-ladder",
    "e2e-human",
    "e2e-recovery",
    "e2e-storm",
    "e2e-stale",
    "e2e-sigkill",
    "e2e-evict",
    "e2e-gc",
    "e2e-trust",
    "e2e-birth",
    "e2e-marks",
    "e2e-state",
    "e2e-upgrade",
)
TRUST_NAMESPACE = "e2e-trust"
BIRTH_NAMESPACE = "e2e-birth"
"""Each scenario with an intruder has its own namespace: a World deletes its namespace
without waiting, and a second scenario in the same one meets `NamespaceTerminating`."""


SERVICE_ACCOUNTS = (
    NO_ROLE,
    ONE_REPORT,
    OPERATOR,
    *(ServiceAccountIdentity(ns, TRAINER) for ns in E2E_NAMESPACES),
    *(ServiceAccountIdentity(ns, INTRUDER) for ns in (TRUST_NAMESPACE, BIRTH_NAMESPACE)),
)
