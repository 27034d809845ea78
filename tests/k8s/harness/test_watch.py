"""Watch streams: namespaced events, selectors, resuming, expiry and server timeouts."""

from __future__ import annotations

from typing import Any

import kubernetes
import pytest

from .clients import client_configuration
from .objects import pod
from .running import RunningServer


def _collect(core_v1: Any, count: int, **kwargs: Any) -> list[tuple[str, str, str]]:
    events: list[tuple[str, str, str]] = []
    watch = kubernetes.watch.Watch()
    for event in watch.stream(core_v1.list_namespaced_pod, "default", timeout_seconds=5, **kwargs):
        obj = event["object"]
        events.append((event["type"], obj.metadata.namespace, obj.metadata.name))
        if len(events) == count:
            watch.stop()
    return events


def test_watch_delivers_events_of_objects_created_without_a_namespace_in_the_body(
    core_v1: Any,
) -> None:
    start = core_v1.list_namespaced_pod("default").metadata.resource_version
    body = pod("p1")
    del body["metadata"]["namespace"]
    core_v1.create_namespaced_pod("default", body)
    core_v1.patch_namespaced_pod("p1", "default", {"metadata": {"labels": {"x": "1"}}})
    core_v1.delete_namespaced_pod("p1", "default")

    events = _collect(core_v1, 3, resource_version=start)
    assert events == [
        ("ADDED", "default", "p1"),
        ("MODIFIED", "default", "p1"),
        ("DELETED", "default", "p1"),
    ]


def test_watch_without_resource_version_starts_with_current_objects(core_v1: Any) -> None:
    core_v1.create_namespaced_pod("default", pod("p1"))
    core_v1.create_namespaced_pod("other", pod("p2", namespace="other"))
    assert _collect(core_v1, 1) == [("ADDED", "default", "p1")]


def test_watch_honours_label_and_field_selectors(core_v1: Any) -> None:
    start = core_v1.list_namespaced_pod("default").metadata.resource_version
    core_v1.create_namespaced_pod("default", pod("a", labels={"job": "j1"}))
    core_v1.create_namespaced_pod("default", pod("b", labels={"job": "j2"}))
    core_v1.create_namespaced_pod("default", pod("c", labels={"job": "j1"}))

    by_label = _collect(core_v1, 2, resource_version=start, label_selector="job=j1")
    assert [name for _, _, name in by_label] == ["a", "c"]
    by_name = _collect(core_v1, 1, resource_version=start, field_selector="metadata.name=b")
    assert [name for _, _, name in by_name] == ["b"]


def test_watch_from_a_trimmed_resource_version_answers_410_expired() -> None:
    # A short event log, so that trimming is reachable with a handful of writes.
    with RunningServer(event_log_size=3) as server:
        api_client = kubernetes.client.ApiClient(client_configuration(server.url))
        core_v1 = kubernetes.client.CoreV1Api(api_client)
        start = core_v1.list_namespaced_pod("default").metadata.resource_version
        for index in range(5):
            core_v1.create_namespaced_pod("default", pod(f"p{index}"))
        with pytest.raises(kubernetes.client.exceptions.ApiException) as caught:
            _collect(core_v1, 1, resource_version=start)
        api_client.close()
    assert caught.value.status == 410


def test_watch_ends_when_the_server_side_timeout_passes(
    core_v1: Any, k8s_server: RunningServer
) -> None:
    watch = kubernetes.watch.Watch()
    events = list(watch.stream(core_v1.list_namespaced_pod, "default", timeout_seconds=1))
    assert events == []
    (record,) = k8s_server.history.find(verb="watch")
    assert record.query["timeoutSeconds"] == "1"
    assert record.status == 200
