"""The namespaced Role training jobs need to publish their StragglerReport."""

from __future__ import annotations

from chart_cases import FEATURES
from chart_render import RELEASE, render


def test_reporter_role_is_created_in_each_listed_namespace_only() -> None:
    objects = render(FEATURES["reporter-rbac"])
    roles = {o["metadata"]["namespace"]: o for o in objects if o["kind"] == "Role"}
    assert {"team-a", "team-b"} <= set(roles)
    for namespace in ("team-a", "team-b"):
        role = roles[namespace]
        assert role["metadata"]["name"] == f"{RELEASE}-pacekeeper-reporter"
        assert role["rules"] == [
            {
                "apiGroups": ["pacekeeper.dev"],
                "resources": ["stragglerreports"],
                "verbs": ["get", "create"],
            },
            {
                "apiGroups": ["pacekeeper.dev"],
                "resources": ["stragglerreports/status"],
                "verbs": ["patch"],
            },
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
        ]
    bindings = [o for o in objects if o["kind"] == "RoleBinding" and "reporter" in str(o)]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["team-a", "team-b"]
    for binding in bindings:
        namespace = binding["metadata"]["namespace"]
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "default", "namespace": namespace}
        ]


def test_reporter_rbac_is_off_by_default() -> None:
    assert not [o for o in render() if "reporter" in o["metadata"]["name"]]
