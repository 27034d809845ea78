"""resourceVersion preconditions: stale writes are refused with 409 and change nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from .objects import node, pod


def _reason(exc: ApiException) -> str:
    return str(json.loads(exc.body)["reason"])


def test_put_with_a_stale_resource_version_is_409_conflict(core_v1: Any) -> None:
    core_v1.create_node(node("n1"))
    stale = core_v1.read_node("n1")
    core_v1.patch_node("n1", {"metadata": {"labels": {"by": "someone-else"}}})

    stale.metadata.labels = {"by": "us"}
    with pytest.raises(ApiException) as caught:
        core_v1.replace_node("n1", stale)
    assert caught.value.status == 409
    assert _reason(caught.value) == "Conflict"
    assert core_v1.read_node("n1").metadata.labels == {"by": "someone-else"}


def test_patch_carrying_a_stale_resource_version_is_409_conflict(core_v1: Any) -> None:
    created = core_v1.create_node(node("n1"))
    core_v1.patch_node("n1", {"spec": {"unschedulable": True}})

    with pytest.raises(ApiException) as caught:
        core_v1.patch_node(
            "n1",
            {
                "metadata": {"resourceVersion": created.metadata.resource_version},
                "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
            },
        )
    assert caught.value.status == 409
    assert core_v1.read_node("n1").spec.taints is None


def test_patch_carrying_the_current_resource_version_applies(core_v1: Any) -> None:
    core_v1.create_node(node("n1"))
    current = core_v1.read_node("n1").metadata.resource_version
    patched = core_v1.patch_node(
        "n1",
        {
            "metadata": {"resourceVersion": current},
            "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
        },
    )
    assert [taint.key for taint in patched.spec.taints] == ["k"]
    assert int(patched.metadata.resource_version) > int(current)


def test_json_patch_test_on_a_stale_resource_version_is_refused(core_v1: Any) -> None:
    created = core_v1.create_node(node("n1"))
    core_v1.patch_node("n1", {"metadata": {"labels": {"x": "1"}}})
    with pytest.raises(ApiException) as caught:
        core_v1.patch_node(
            "n1",
            [
                {
                    "op": "test",
                    "path": "/metadata/resourceVersion",
                    "value": created.metadata.resource_version,
                },
                {"op": "add", "path": "/spec/unschedulable", "value": True},
            ],
        )
    assert caught.value.status == 422
    assert not core_v1.read_node("n1").spec.unschedulable


def test_json_patch_appends_to_a_list(core_v1: Any) -> None:
    core_v1.create_node(node("n1", taints=[{"key": "a", "effect": "NoSchedule"}]))
    patched = core_v1.patch_node(
        "n1",
        [{"op": "add", "path": "/spec/taints/-", "value": {"key": "b", "effect": "NoSchedule"}}],
    )
    assert [taint.key for taint in patched.spec.taints] == ["a", "b"]


def test_delete_with_a_stale_resource_version_precondition_is_409(core_v1: Any) -> None:
    created = core_v1.create_namespaced_pod("default", pod("p1"))
    core_v1.patch_namespaced_pod("p1", "default", {"metadata": {"labels": {"x": "1"}}})
    with pytest.raises(ApiException) as caught:
        core_v1.delete_namespaced_pod(
            "p1",
            "default",
            body={"preconditions": {"resourceVersion": created.metadata.resource_version}},
        )
    assert caught.value.status == 409
    assert core_v1.read_namespaced_pod("p1", "default").metadata.name == "p1"
