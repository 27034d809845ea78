"""Issue 40, least privilege: the controller writes ConfigMaps only in its state namespace,
never in the release namespace where its policy ConfigMap lives.

RBAC cannot name the hashed ``pacekeeper-job-<hash>`` maps, so the state Role must grant
writes on every ConfigMap of its namespace; the state therefore has a namespace of its
own. The release namespace keeps at most a read (``get``/``list``) for the one-off copy
of an older release's state (``state.migrate``).
"""

from __future__ import annotations

from typing import Any

import helm_python as helm
import pytest
from chart_render import NAMESPACE, RELEASE, render

STATE_NAMESPACE = f"{NAMESPACE}-state"
CONTROLLER = {"kind": "ServiceAccount", "name": f"{RELEASE}-pacekeeper", "namespace": NAMESPACE}
WRITES = {"create", "update", "patch", "delete", "deletecollection"}


def _configmap_verbs(objects: list[dict[str, Any]], namespace: str) -> set[str]:
    """Every verb on ConfigMaps that a Role bound in ``namespace`` grants."""
    bound = {
        o["roleRef"]["name"]
        for o in objects
        if o["kind"] == "RoleBinding" and o["metadata"]["namespace"] == namespace
    }
    return {
        verb
        for o in objects
        if o["kind"] == "Role" and o["metadata"]["namespace"] == namespace
        and o["metadata"]["name"] in bound
        for rule in o["rules"]
        if "" in rule["apiGroups"] and "configmaps" in rule["resources"]
        for verb in rule["verbs"]
    }  # fmt: skip


def _env(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


@pytest.mark.parametrize("migrate", [True, False])
def test_the_release_namespace_grants_no_configmap_write(migrate: bool) -> None:
    """The policy ConfigMap cannot be rewritten, deleted or replaced by the controller:
    no Role of the release namespace writes a ConfigMap. (The controller reads its policy
    from the mounted volume, through the kubelet, so it needs no verb on it at all.)"""
    objects = render({"state": {"migrate": migrate}})
    verbs = _configmap_verbs(objects, NAMESPACE)
    assert not verbs & WRITES, verbs
    assert verbs == ({"get", "list"} if migrate else set())
    # Nothing cluster-wide reaches ConfigMaps either: a job's namespace stays out of reach.
    assert not [o for o in objects if o["kind"] == "ClusterRole" and "configmaps" in str(o)]


def test_the_state_is_written_in_its_own_namespace_by_the_controller_only() -> None:
    objects = render()
    assert _configmap_verbs(objects, STATE_NAMESPACE) == {"create", "get", "update", "delete"}
    in_state = [o for o in objects if o["metadata"].get("namespace") == STATE_NAMESPACE]
    assert {o["kind"] for o in in_state} == {"Role", "RoleBinding"}
    (binding,) = [o for o in in_state if o["kind"] == "RoleBinding"]
    assert binding["subjects"] == [CONTROLLER]
    # The controller is told where: the Role's namespace is the one it writes to.
    env = _env(objects)
    assert env["PACEKEEPER_STATE_NAMESPACE"] == STATE_NAMESPACE
    assert env["PACEKEEPER_MIGRATE_STATE_FROM"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}


def test_no_jobs_role_reaches_the_state_namespace() -> None:
    objects = render(
        {"reporterRbac": {"enabled": True, "bindings": [
            {"namespace": "team-a", "serviceAccount": "llama", "reports": ["llama"]},
        ]}}
    )  # fmt: skip
    bindings = [o for o in objects if o["kind"] in ("RoleBinding", "ClusterRoleBinding")]
    for binding in bindings:
        if binding["metadata"].get("namespace") == STATE_NAMESPACE:
            assert binding["subjects"] == [CONTROLLER], binding["metadata"]["name"]
    reporters = [b for b in bindings if "reporter" in b["metadata"]["name"]]
    assert reporters
    assert all(b["metadata"]["namespace"] != STATE_NAMESPACE for b in reporters)


def test_the_state_namespace_is_created_and_kept_on_uninstall() -> None:
    (namespace,) = [o for o in render() if o["kind"] == "Namespace"]
    assert namespace["metadata"]["name"] == STATE_NAMESPACE
    assert namespace["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"


def test_a_given_state_namespace_is_used_as_it_is() -> None:
    objects = render({"state": {"namespace": "pk-memory", "createNamespace": False,
                                "migrate": False}})  # fmt: skip
    assert not [o for o in objects if o["kind"] == "Namespace"]
    assert _configmap_verbs(objects, "pk-memory") == {"create", "get", "update", "delete"}
    assert _configmap_verbs(objects, NAMESPACE) == set()
    env = _env(objects)
    assert env["PACEKEEPER_STATE_NAMESPACE"] == "pk-memory"
    assert "PACEKEEPER_MIGRATE_STATE_FROM" not in env


def test_the_state_namespace_cannot_be_the_release_namespace() -> None:
    with pytest.raises(helm.HelmError, match=r"state\.namespace=pacekeeper-system is the release"):
        render({"state": {"namespace": NAMESPACE}})
