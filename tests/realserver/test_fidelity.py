"""Twins of tests/k8s/harness/test_fidelity.py: the same cases, built with the harness's own
object builders, against the real kube-apiserver. Where the stand-in follows the real
server rather than the textbook, both must pass; a difference shows up as a failing
pair, not as a harness test that passes on a lie."""

from __future__ import annotations

import importlib
import json
import secrets
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from cluster import RealCluster
from kubernetes.client.exceptions import ApiException
from processes import wait_until

HARNESS = Path(__file__).resolve().parents[1] / "k8s" / "harness"
MERGE = "application/merge-patch+json"


def _harness_objects() -> Any:
    """harness/objects.py without the harness package's __init__ (which starts nothing,
    but imports the emulator): a bare package module stands in for it."""
    name = "_harness_for_twins"
    if name not in sys.modules:
        package = types.ModuleType(name)
        package.__path__ = [str(HARNESS)]
        sys.modules[name] = package
    return importlib.import_module(f"{name}.objects")


objects = _harness_objects()


@pytest.fixture
def core_v1(real_cluster: RealCluster) -> Any:
    return kubernetes.client.CoreV1Api(real_cluster.admin)


@pytest.fixture
def node_name(core_v1: Any) -> Iterator[str]:
    """A node name of this test's own (nodes are cluster-wide); deleted afterwards."""
    name = f"fidelity-{secrets.token_hex(3)}"
    yield name
    try:
        core_v1.delete_node(name)
    except ApiException as error:
        if error.status != 404:
            raise


@pytest.fixture
def pod_namespace(real_cluster: RealCluster, real_namespace: str, core_v1: Any) -> str:
    """`real_namespace` once its default ServiceAccount has its token: until then the
    ServiceAccount admission plugin refuses pods that mount it, as the harness's do."""

    def token_ready() -> bool:
        account = core_v1.read_namespaced_service_account("default", real_namespace)
        return bool(account.secrets)

    wait_until(token_ready, timeout_s=30, what="default token", watched=real_cluster.processes)
    return real_namespace


def _gone(core_v1: Any, name: str, namespace: str) -> bool:
    try:
        core_v1.read_namespaced_pod(name, namespace)
    except ApiException as error:
        if error.status == 404:
            return True
        raise
    return False


def test_a_merge_patch_drops_nulls_inside_objects_in_arrays(core_v1: Any, node_name: str) -> None:
    core_v1.create_node(objects.node(node_name))
    patch = {"metadata": {"annotations": {"a": "1"}},
             "spec": {"taints": [{"key": "k", "effect": "NoSchedule", "value": None}]}}  # fmt: skip
    core_v1.patch_node(node_name, patch, _content_type=MERGE)
    stored = json.loads(core_v1.read_node(node_name, _preload_content=False).data)
    # The list is replaced whole (the not-ready taint admission added is gone too).
    assert stored["spec"]["taints"] == [{"key": "k", "effect": "NoSchedule"}]


def test_a_deleted_pod_bound_to_a_node_stays_terminating_until_grace_zero(
    core_v1: Any, pod_namespace: str
) -> None:
    core_v1.create_namespaced_pod(
        pod_namespace, objects.pod("bound", namespace=pod_namespace, node_name="n1")
    )
    core_v1.delete_namespaced_pod("bound", pod_namespace)
    meta = core_v1.read_namespaced_pod("bound", pod_namespace).metadata
    assert meta.deletion_timestamp is not None
    assert meta.deletion_grace_period_seconds == 30
    core_v1.delete_namespaced_pod("bound", pod_namespace, grace_period_seconds=0)
    assert _gone(core_v1, "bound", pod_namespace), "still there after a delete with grace 0"


def test_a_pod_no_node_took_is_deleted_at_once(core_v1: Any, pod_namespace: str) -> None:
    core_v1.create_namespaced_pod(
        pod_namespace,
        objects.pod("pending", namespace=pod_namespace, node_name=None, phase="Pending"),
    )
    core_v1.delete_namespaced_pod("pending", pod_namespace)
    assert _gone(core_v1, "pending", pod_namespace), "an unscheduled pod is deleted at once"
