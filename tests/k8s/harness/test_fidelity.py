"""Where the stand-in follows the real kube-apiserver rather than the textbook. Each case
here has a twin in tests/realserver/test_fidelity.py that runs against the real server,
so a difference shows up as a failing pair rather than as a test that passes on a lie."""

from __future__ import annotations

import json
from typing import Any

from kubernetes.client.exceptions import ApiException

from .objects import node, pod

MERGE = "application/merge-patch+json"


def test_a_merge_patch_drops_nulls_inside_objects_in_arrays(core_v1: Any) -> None:
    core_v1.create_node(node("n1"))
    patch = {"metadata": {"annotations": {"a": "1"}},
             "spec": {"taints": [{"key": "k", "effect": "NoSchedule", "value": None}]}}  # fmt: skip
    core_v1.patch_node("n1", patch, _content_type=MERGE)
    stored = json.loads(core_v1.read_node("n1", _preload_content=False).data)
    assert stored["spec"]["taints"] == [{"key": "k", "effect": "NoSchedule"}]


def test_a_deleted_pod_bound_to_a_node_stays_terminating_until_grace_zero(core_v1: Any) -> None:
    core_v1.create_namespaced_pod("default", pod("bound", node_name="n1"))
    core_v1.delete_namespaced_pod("bound", "default")
    meta = core_v1.read_namespaced_pod("bound", "default").metadata
    assert meta.deletion_timestamp is not None
    assert meta.deletion_grace_period_seconds == 30
    core_v1.delete_namespaced_pod("bound", "default", grace_period_seconds=0)
    try:
        core_v1.read_namespaced_pod("bound", "default")
        raise AssertionError("the pod is still there after a delete with grace 0")
    except ApiException as e:
        assert e.status == 404


def test_a_pod_no_node_took_is_deleted_at_once(core_v1: Any) -> None:
    core_v1.create_namespaced_pod("default", pod("pending", node_name=None, phase="Pending"))
    core_v1.delete_namespaced_pod("pending", "default")
    try:
        core_v1.read_namespaced_pod("pending", "default")
        raise AssertionError("an unscheduled pod is deleted at once")
    except ApiException as e:
        assert e.status == 404
