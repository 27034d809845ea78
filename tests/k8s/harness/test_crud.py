"""Create, read, replace, patch and delete through the official sync client."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

from .objects import node, pod


def test_create_answers_201_and_returns_the_stored_object(core_v1: Any) -> None:
    body = pod("p1")
    del body["metadata"]["namespace"]  # the URL names it; the server fills it in
    created, status, _ = core_v1.create_namespaced_pod_with_http_info("default", body)

    assert status == 201
    assert created.metadata.namespace == "default"
    assert created.metadata.uid
    assert created.metadata.resource_version
    assert core_v1.read_namespaced_pod("p1", "default").metadata.uid == created.metadata.uid


def test_duplicate_create_is_refused_with_409_already_exists(core_v1: Any) -> None:
    core_v1.create_node(node("n1"))
    with pytest.raises(ApiException) as caught:
        core_v1.create_node(node("n1"))
    assert caught.value.status == 409
    assert json.loads(caught.value.body)["reason"] == "AlreadyExists"


def test_version_is_served_with_and_without_trailing_slash(
    k8s_api_client: Any, k8s_url: str
) -> None:
    info = kubernetes.client.VersionApi(k8s_api_client).get_code()
    assert (info.major, info.minor) == ("1", "33")
    with urllib.request.urlopen(f"{k8s_url}/version") as plain:
        assert json.loads(plain.read())["gitVersion"] == info.git_version


def test_namespaces_can_be_listed_created_and_read(core_v1: Any) -> None:
    core_v1.create_namespace({"metadata": {"name": "team-a"}})
    names = [ns.metadata.name for ns in core_v1.list_namespace().items]
    assert names == ["default", "team-a"]
    assert core_v1.read_namespace("team-a").metadata.name == "team-a"


def test_put_replaces_the_object_and_bumps_the_resource_version(core_v1: Any) -> None:
    created = core_v1.create_node(node("n1", labels={"a": "1"}))
    current = core_v1.read_node("n1")
    current.metadata.labels = {"b": "2"}
    replaced = core_v1.replace_node("n1", current)

    assert replaced.metadata.labels == {"b": "2"}
    assert int(replaced.metadata.resource_version) > int(created.metadata.resource_version)
    assert core_v1.read_node("n1").metadata.labels == {"b": "2"}


def test_status_subresource_alone_changes_status(core_v1: Any) -> None:
    core_v1.create_node(node("n1"))
    core_v1.patch_node("n1", {"status": {"phase": "Ignored"}, "metadata": {"labels": {"x": "y"}}})
    core_v1.patch_node_status(
        "n1", {"status": {"phase": "Running"}, "spec": {"unschedulable": True}}
    )

    stored = core_v1.read_node("n1")
    assert stored.status.phase == "Running"
    assert stored.metadata.labels == {"x": "y"}
    assert not stored.spec.unschedulable


def test_patch_that_changes_nothing_keeps_the_resource_version(core_v1: Any) -> None:
    core_v1.create_node(node("n1", labels={"a": "1"}))
    before = core_v1.read_node("n1").metadata.resource_version
    after = core_v1.patch_node("n1", {"metadata": {"labels": {"a": "1"}}})
    assert after.metadata.resource_version == before


def test_delete_waits_for_finalizers_before_removing(core_v1: Any) -> None:
    body = pod("p1")
    body["metadata"]["finalizers"] = ["example.com/hold"]
    core_v1.create_namespaced_pod("default", body)

    core_v1.delete_namespaced_pod("p1", "default")
    marked = core_v1.read_namespaced_pod("p1", "default")
    assert marked.metadata.deletion_timestamp is not None

    core_v1.patch_namespaced_pod("p1", "default", {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as caught:
        core_v1.read_namespaced_pod("p1", "default")
    assert caught.value.status == 404


async def test_asyncio_client_creates_and_lists(k8s_aio_api_client: Any) -> None:
    from kubernetes import aio

    api = aio.client.CoreV1Api(k8s_aio_api_client)
    created = await api.create_namespaced_pod("default", pod("p1"))
    listed = await api.list_namespaced_pod("default")
    assert created.metadata.uid == listed.items[0].metadata.uid


def test_dynamic_client_discovers_builtins_and_applied_crds(
    k8s_server: Any, k8s_api_client: Any
) -> None:
    from kubernetes.dynamic import DynamicClient

    from .objects import crd

    k8s_server.apply(crd("example.pacekeeper.dev", "Widget", "widgets"))
    dynamic = DynamicClient(k8s_api_client)
    widgets = dynamic.resources.get(api_version="example.pacekeeper.dev/v1alpha1", kind="Widget")
    widgets.create(
        body={"apiVersion": widgets.group_version, "kind": "Widget", "metadata": {"name": "w1"}},
        namespace="default",
    )
    dynamic.resources.get(api_version="v1", kind="Node").create(body={"metadata": {"name": "n1"}})

    assert k8s_server.read("example.pacekeeper.dev/v1alpha1", "Widget", "w1", "default")
    assert k8s_server.read("v1", "Node", "n1")


def test_custom_objects_status_patch_reaches_only_status(
    k8s_server: Any, k8s_api_client: Any
) -> None:
    from .objects import crd

    k8s_server.apply(crd("example.pacekeeper.dev", "Widget", "widgets"))
    api = kubernetes.client.CustomObjectsApi(k8s_api_client)
    args = ("example.pacekeeper.dev", "v1alpha1", "default", "widgets")
    api.create_namespaced_custom_object(*args, {"metadata": {"name": "w1"}, "spec": {"n": 1}})
    api.patch_namespaced_custom_object_status(
        *args, "w1", {"status": {"worst": 0.5}, "spec": {"n": 2}}
    )
    stored = api.get_namespaced_custom_object(*args, "w1")
    assert stored["status"] == {"worst": 0.5}
    assert stored["spec"] == {"n": 1}
