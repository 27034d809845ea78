"""Injected faults: errors, delays and timeouts on the next N matching requests."""

from __future__ import annotations

import time
from typing import Any

import pytest
import urllib3
from kubernetes.client.exceptions import ApiException

from .faults import Fault
from .objects import node
from .running import RunningServer
from .waiting import eventually


def test_injected_500s_fail_the_next_n_matching_requests_only(
    core_v1: Any, k8s_server: RunningServer
) -> None:
    k8s_server.apply(node("n1"))
    k8s_server.inject(Fault(status=500, times=2, verb="patch", plural="nodes"))

    for _ in range(2):
        with pytest.raises(ApiException) as caught:
            core_v1.patch_node("n1", {"spec": {"unschedulable": True}})
        assert caught.value.status == 500
    assert not core_v1.read_node("n1").spec.unschedulable  # a failed request changes nothing
    core_v1.patch_node("n1", {"spec": {"unschedulable": True}})

    patches = k8s_server.history.find(verb="patch", name="n1")
    assert [(r.status, r.fault) for r in patches] == [(500, True), (500, True), (200, False)]
    assert core_v1.read_node("n1").spec.unschedulable


def test_injected_409_on_create_leaves_nothing_behind(
    core_v1: Any, k8s_server: RunningServer
) -> None:
    k8s_server.inject(Fault(status=409, reason="Conflict", path=r"/nodes$", method="POST"))
    with pytest.raises(ApiException) as caught:
        core_v1.create_node(node("n1"))
    assert caught.value.status == 409
    assert k8s_server.read("v1", "Node", "n1") is None


def test_injected_429_carries_retry_after(core_v1: Any, k8s_server: RunningServer) -> None:
    k8s_server.apply(node("n1"))
    k8s_server.inject(Fault(status=429, retry_after_s=7, verb="get"))
    with pytest.raises(ApiException) as caught:
        core_v1.read_node("n1")
    assert caught.value.status == 429
    assert caught.value.headers["Retry-After"] == "7"


def test_a_delay_past_the_client_timeout_times_out_yet_the_write_lands(
    core_v1: Any, k8s_server: RunningServer
) -> None:
    k8s_server.apply(node("n1"))
    k8s_server.inject(Fault(status=None, delay_s=0.5, verb="patch"))
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        core_v1.patch_node("n1", {"spec": {"unschedulable": True}}, _request_timeout=0.1)

    # The server finishes the write after the client gave up: the case callers must survive.
    (record,) = k8s_server.history.find(verb="patch")
    assert eventually(lambda: record.status) == 200
    assert core_v1.read_node("n1").spec.unschedulable


def test_a_delayed_error_answers_after_the_delay(core_v1: Any, k8s_server: RunningServer) -> None:
    k8s_server.apply(node("n1"))
    k8s_server.inject(Fault(status=503, delay_s=0.2, verb="get"))
    started = time.monotonic()
    with pytest.raises(ApiException) as caught:
        core_v1.read_node("n1")
    assert caught.value.status == 503
    assert time.monotonic() - started >= 0.2


def test_request_history_records_verbs_paths_and_bodies(
    core_v1: Any, k8s_server: RunningServer
) -> None:
    core_v1.create_node(node("n1"))
    core_v1.patch_node("n1", {"metadata": {"labels": {"a": "1"}}})
    writes = k8s_server.history.writes()
    assert [(r.verb, r.path, r.status) for r in writes[-2:]] == [
        ("create", "/api/v1/nodes", 201),
        ("patch", "/api/v1/nodes/n1", 200),
    ]
    assert writes[-1].body == {"metadata": {"labels": {"a": "1"}}}
    assert writes[-1].content_type == "application/strategic-merge-patch+json"


def test_a_write_landing_just_before_ours_makes_our_stale_write_conflict(
    core_v1: Any, k8s_server: RunningServer
) -> None:
    k8s_server.apply(node("n1"))
    read = core_v1.read_node("n1")

    def someone_else_labels(server: Any) -> None:
        current = server.read("v1", "Node", "n1")
        current["metadata"]["labels"] = {"by": "human"}
        server.apply(current)

    k8s_server.inject(Fault(status=None, verb="patch", before=someone_else_labels))
    with pytest.raises(ApiException) as caught:
        core_v1.patch_node(
            "n1",
            {
                "metadata": {"resourceVersion": read.metadata.resource_version},
                "spec": {"unschedulable": True},
            },
        )
    assert caught.value.status == 409
    stored = core_v1.read_node("n1")
    assert stored.metadata.labels == {"by": "human"}
    assert not stored.spec.unschedulable


def test_skip_lets_the_first_matching_requests_through(
    core_v1: Any, k8s_server: RunningServer
) -> None:
    k8s_server.apply(node("n1"))
    k8s_server.inject(Fault(status=500, skip=2, verb="get"))
    core_v1.read_node("n1")
    core_v1.read_node("n1")
    with pytest.raises(ApiException):
        core_v1.read_node("n1")
    core_v1.read_node("n1")
    assert [r.status for r in k8s_server.history.find(verb="get")] == [200, 200, 500, 200]
