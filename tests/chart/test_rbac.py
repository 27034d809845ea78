"""Least privilege: rights split by feature, no wildcards, no secrets."""

from __future__ import annotations

from typing import Any

import pytest
from chart_cases import FEATURES, actions
from chart_render import NAMESPACE, RELEASE, render

RBAC_KINDS = ("ClusterRole", "Role")


def rules(values: dict[str, Any] | None = None) -> list[tuple[str, str, dict[str, Any]]]:
    """(kind, name, rule) for every rule the release grants."""
    return [
        (o["kind"], o["metadata"]["name"], rule)
        for o in render(values)
        if o["kind"] in RBAC_KINDS
        for rule in o["rules"]
    ]


def granted(values: dict[str, Any] | None, group: str, resource: str) -> set[str]:
    return {
        verb
        for _, _, rule in rules(values)
        if group in rule.get("apiGroups", []) and resource in rule.get("resources", [])
        for verb in rule["verbs"]
    }


SCRAPE_RULE = {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}
"""The one non-resource rule: what a scraper holds (metrics.access=kubernetes)."""


@pytest.mark.parametrize("feature", sorted(FEATURES))
def test_no_rule_uses_a_wildcard_or_touches_secrets(feature: str) -> None:
    found = rules(FEATURES[feature])
    assert found
    for kind, name, rule in found:
        for field in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"):
            assert "*" not in rule.get(field, []), f"{kind}/{name} has '*' in {field}"
        if "nonResourceURLs" in rule:
            assert (kind, name, rule) == ("ClusterRole", f"{RELEASE}-pacekeeper-metrics-reader",
                                          SCRAPE_RULE)  # fmt: skip
            continue
        assert "secrets" not in rule["resources"], f"{kind}/{name}"
        if "configmaps" in rule["resources"]:
            # The state, written in its own namespace; the old state read once after an
            # upgrade (test_rbac_state.py says where each is granted).
            assert kind == "Role", f"{kind}/{name}"
            assert set(rule["verbs"]) <= {"create", "get", "update", "delete", "list"}, rule


def test_defaults_grant_no_write_on_nodes_or_pods() -> None:
    assert granted(None, "", "nodes") == {"get", "list", "watch"}
    assert granted(None, "", "pods") == {"get", "list", "watch"}
    assert granted(None, "", "pods/eviction") == set()


@pytest.mark.parametrize("action", ["taintNode", "cordonNode"])
def test_node_patch_is_granted_only_with_a_node_action(action: str) -> None:
    assert "patch" in granted({"actions": actions(action)}, "", "nodes")
    others = [a for a in ("notify", "restartRank", "drainNode")]
    assert "patch" not in granted({"actions": actions(*others)}, "", "nodes")


@pytest.mark.parametrize(
    ("enabled", "eviction", "delete"),
    [
        (("restartRank",), True, True),
        (("drainNode",), True, False),
        (("taintNode", "cordonNode", "notify"), False, False),
    ],
)
def test_pod_eviction_follows_restart_and_drain(
    enabled: tuple[str, ...], eviction: bool, delete: bool
) -> None:
    values = {"actions": actions(*enabled)}
    assert ("create" in granted(values, "", "pods/eviction")) is eviction
    assert ("delete" in granted(values, "", "pods")) is delete


def test_events_follow_notify() -> None:
    assert "create" in granted(None, "", "events")
    assert granted({"actions": actions()}, "", "events") == set()


def test_leases_are_namespaced_and_limited_to_the_leader_lease() -> None:
    objects = render()
    roles = [o for o in objects if o["kind"] == "Role"]
    (lease_role,) = [r for r in roles if "leases" in str(r["rules"])]
    assert lease_role["metadata"]["namespace"] == NAMESPACE
    lease_rules = lease_role["rules"]
    named = [r for r in lease_rules if r.get("resourceNames")]
    assert named[0]["resourceNames"] == [f"{RELEASE}-pacekeeper-leader"]
    assert {v for r in lease_rules for v in r["verbs"]} <= {
        "get",
        "watch",
        "create",
        "update",
        "patch",
    }
    assert all(o["kind"] != "ClusterRole" or "leases" not in str(o["rules"]) for o in objects), (
        "leases must not be cluster-wide"
    )
    assert granted(FEATURES["no-leader-election"], "coordination.k8s.io", "leases") == set()


def test_bindings_name_the_controller_service_account() -> None:
    objects = render(FEATURES["existing-service-account"] | FEATURES["metrics-open"])
    assert all(o["kind"] != "ServiceAccount" for o in objects)
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "platform-sa"
    bindings = [o for o in objects if o["kind"] in ("ClusterRoleBinding", "RoleBinding")]
    assert bindings
    for binding in bindings:
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "platform-sa", "namespace": NAMESPACE}
        ]


def _verbs_of(role: dict[str, Any], resource: str) -> set[str]:
    return {
        verb
        for rule in role["rules"]
        if "pacekeeper.dev" in rule.get("apiGroups", []) and resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_reports_are_created_by_the_controller_and_never_by_a_jobs_role() -> None:
    """Issue 40: `create` cannot be limited by name, so a job that may create its report may
    create another job's first. Only the controller creates (and repairs: deletes) them;
    the job's Role reads its report and patches the status subresource, never the report
    itself, whose spec.control is the controller's and humans'."""
    objects = render(FEATURES["reporter-rbac"])
    roles = [o for o in objects if o["kind"] in RBAC_KINDS]
    reporters = [o for o in roles if "reporter" in o["metadata"]["name"]]
    assert reporters
    for role in reporters:
        assert _verbs_of(role, "stragglerreports") == {"get"}, role["metadata"]["name"]
        assert _verbs_of(role, "stragglerreports/status") == {"patch"}
        assert not [r for r in role["rules"] if "pods" in r["resources"]]
    ours = [o for o in roles if o not in reporters]
    assert {"create", "delete", "patch"} <= set().union(
        *(_verbs_of(o, "stragglerreports") for o in ours)
    )
