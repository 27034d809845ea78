"""The namespaced Role training jobs need to publish their StragglerReport."""

from __future__ import annotations

from chart_cases import FEATURES
from chart_render import RELEASE, render


def _rules(role: dict[str, object]) -> list[object]:
    rules = role["rules"]
    assert isinstance(rules, list)
    return rules


def test_each_binding_gets_a_role_for_its_service_account_and_reports_only() -> None:
    objects = render(FEATURES["reporter-rbac"])
    roles = {
        (o["metadata"]["namespace"], o["metadata"]["name"]): o
        for o in objects
        if o["kind"] == "Role"
    }
    llama = roles[("team-a", f"{RELEASE}-pacekeeper-reporter-llama")]
    # Get its report, patch its status: no create (issue 40), no patch of spec.control.
    assert _rules(llama) == [
        {"apiGroups": ["pacekeeper.dev"], "resources": ["stragglerreports"],
         "resourceNames": ["llama"], "verbs": ["get"]},
        {"apiGroups": ["pacekeeper.dev"], "resources": ["stragglerreports/status"],
         "resourceNames": ["llama"], "verbs": ["patch"]},
    ]  # fmt: skip
    team_b = roles[("team-b", f"{RELEASE}-pacekeeper-reporter-trainers")]
    assert all("resourceNames" not in r for r in _rules(team_b))  # type: ignore[operator]
    bindings = [o for o in objects if o["kind"] == "RoleBinding" and "reporter" in str(o)]
    subjects = sorted(
        (b["metadata"]["namespace"], s["name"]) for b in bindings for s in b["subjects"]
    )
    assert subjects == [("team-a", "llama"), ("team-b", "trainers")]
    assert "default" not in {name for _, name in subjects}


def test_binding_the_default_service_account_warns_in_the_notes() -> None:
    from chart_render import notes

    values = {
        "reporterRbac": {
            "enabled": True,
            "bindings": [{"namespace": "ml", "serviceAccount": "default"}],
        }
    }
    assert "WARNING: ml/default" in notes(values)
    assert "WARNING" not in notes(FEATURES["reporter-rbac"])


def test_reporter_rbac_is_off_by_default() -> None:
    assert not [o for o in render() if "reporter" in o["metadata"]["name"]]
