"""The real server does what the API stand-in (tests/k8s/harness) claims it does.

Each test pins one behaviour of kube-apiserver v1.20.2 that the harness or the controller
relies on: status subresource writes, merge-patch null pruning, RBAC by resourceNames,
garbage collection through ownerReferences.
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path
from typing import Any, cast

import kubernetes
import pytest
from cluster import RealCluster
from identities import NO_ROLE, ONE_REPORT

REPO_ROOT = Path(__file__).resolve().parents[2]
GROUP = "pacekeeper.dev"
VERSION = "v1alpha1"
PLURAL = "stragglerreports"
MERGE_PATCH = "application/merge-patch+json"
_WAIT_S = 60.0


def _report(name: str, namespace: str, **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "StragglerReport",
        "metadata": {"name": name, "namespace": namespace, **metadata},
        "spec": {"job": {"platform": "kubernetes", "namespace": namespace, "name": name}},
    }


def _patch_status(api_client: Any, namespace: str, name: str, status: dict[str, Any]) -> Any:
    return kubernetes.client.CustomObjectsApi(api_client).patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, PLURAL, name, {"status": status}, _content_type=MERGE_PATCH
    )


def _get_report(api_client: Any, namespace: str, name: str) -> dict[str, Any]:
    api = kubernetes.client.CustomObjectsApi(api_client)
    result = api.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    return cast(dict[str, Any], result)


def _eventually(probe: Any, what: str, timeout_s: float = _WAIT_S) -> None:
    """Bounded poll for what another process (RBAC informers, the GC) makes true."""
    deadline = time.monotonic() + timeout_s
    while not probe():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not true after {timeout_s:.0f} s")
        time.sleep(0.2)


def _harness_merge_patch() -> Any:
    # By file path: tests/k8s is not on sys.path when only this tier runs.
    path = REPO_ROOT / "tests" / "k8s" / "harness" / "patches.py"
    spec = importlib.util.spec_from_file_location("_harness_patches", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.merge_patch


def test_server_answers_version(real_cluster: RealCluster) -> None:
    version = kubernetes.client.VersionApi(real_cluster.admin).get_code()
    assert version.git_version == "v1.20.2"
    assert real_cluster.base_url.startswith("https://127.0.0.1:")
    assert Path(real_cluster.ca_path).is_file()


def test_status_subresource_is_merge_patched_and_ignored_on_create(
    real_cluster: RealCluster, real_namespace: str
) -> None:
    body = _report("job-a", real_namespace)
    body["status"] = {"worstScore": 0.1}
    (created,) = real_cluster.apply(body)
    assert "status" not in created  # create drops status for a status subresource

    _patch_status(real_cluster.admin, real_namespace, "job-a", {"worstScore": 0.5, "sequence": 3})
    _patch_status(real_cluster.admin, real_namespace, "job-a", {"sequence": 4, "worstRank": 2})

    stored = _get_report(real_cluster.admin, real_namespace, "job-a")
    assert stored["status"] == {"worstScore": 0.5, "sequence": 4, "worstRank": 2}
    assert stored["spec"] == body["spec"]


def test_merge_patch_prunes_nulls_inside_objects_in_arrays(
    real_cluster: RealCluster, real_namespace: str
) -> None:
    real_cluster.apply(_report("job-b", real_namespace))
    _patch_status(real_cluster.admin, real_namespace, "job-b", {"controller": {"keep": 1}})
    patch = {
        "controller": {
            "records": [{"x": None, "y": 1}, {"nested": {"z": None, "w": [{"v": None}]}}],
            "keep": None,
        }
    }
    _patch_status(real_cluster.admin, real_namespace, "job-b", patch)

    stored = _get_report(real_cluster.admin, real_namespace, "job-b")["status"]
    assert stored == {"controller": {"records": [{"y": 1}, {"nested": {"w": [{}]}}]}}
    # The stand-in must store the same thing for the same patch.
    assert _harness_merge_patch()({"controller": {"keep": 1}}, patch) == stored


def test_rbac_limits_status_patches_to_the_granted_object(
    real_cluster: RealCluster, real_namespace: str
) -> None:
    from kubernetes.client.exceptions import ApiException

    real_cluster.apply([_report("allowed", real_namespace), _report("other", real_namespace)])
    no_role = real_cluster.api_client(real_cluster.token_for(NO_ROLE))
    one_report = real_cluster.api_client(real_cluster.token_for(ONE_REPORT))

    with pytest.raises(ApiException) as refused:
        _patch_status(no_role, real_namespace, "allowed", {"sequence": 1})
    assert refused.value.status == 403

    real_cluster.apply(
        [
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": "patch-one-report", "namespace": real_namespace},
                "rules": [
                    {
                        "apiGroups": [GROUP],
                        "resources": [f"{PLURAL}/status"],
                        "resourceNames": ["allowed"],
                        "verbs": ["patch"],
                    }
                ],
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": "patch-one-report", "namespace": real_namespace},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": "patch-one-report",
                },
                "subjects": [
                    {
                        "kind": "ServiceAccount",
                        "name": ONE_REPORT.name,
                        "namespace": ONE_REPORT.namespace,
                    }
                ],
            },
        ]
    )

    def patched() -> bool:
        try:
            _patch_status(one_report, real_namespace, "allowed", {"sequence": 1})
        except ApiException as error:
            if error.status != 403:
                raise
            return False  # the authorizer's informer has not seen the binding yet
        return True

    _eventually(patched, "the RoleBinding grants the status patch")
    assert _get_report(real_cluster.admin, real_namespace, "allowed")["status"] == {"sequence": 1}

    with pytest.raises(ApiException) as other:
        _patch_status(one_report, real_namespace, "other", {"sequence": 1})
    assert other.value.status == 403
    with pytest.raises(ApiException) as still_refused:
        _patch_status(no_role, real_namespace, "allowed", {"sequence": 2})
    assert still_refused.value.status == 403
    assert "status" not in _get_report(real_cluster.admin, real_namespace, "other")


def test_garbage_collector_deletes_a_report_whose_owner_is_deleted(
    real_cluster: RealCluster, real_namespace: str
) -> None:
    from kubernetes.client.exceptions import ApiException

    core = kubernetes.client.CoreV1Api(real_cluster.admin)
    (owner,) = real_cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "owner", "namespace": real_namespace},
        }
    )
    owner_reference = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": owner["metadata"]["uid"],
    }
    real_cluster.apply(_report("owned", real_namespace, ownerReferences=[owner_reference]))
    real_cluster.apply(_report("unowned", real_namespace))

    core.delete_namespaced_config_map("owner", real_namespace)

    def report_gone() -> bool:
        try:
            _get_report(real_cluster.admin, real_namespace, "owned")
        except ApiException as error:
            if error.status == 404:
                return True
            raise
        return False

    _eventually(report_gone, "the garbage collector deletes the owned report")
    assert _get_report(real_cluster.admin, real_namespace, "unowned")["metadata"]["name"]
