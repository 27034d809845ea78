"""The pods/eviction subresource and PodDisruptionBudget refusals (429)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from .objects import pdb, pod
from .running import RunningServer


def _evict(core_v1: Any, name: str) -> None:
    core_v1.create_namespaced_pod_eviction(
        name, "default", {"metadata": {"name": name, "namespace": "default"}}
    )


def _pod_names(k8s_server: RunningServer) -> list[str]:
    return [obj["metadata"]["name"] for obj in k8s_server.list("v1", "Pod", "default")]


def test_eviction_without_a_budget_deletes_the_pod(core_v1: Any, k8s_server: RunningServer) -> None:
    k8s_server.apply(pod("p1"))
    _evict(core_v1, "p1")
    assert _pod_names(k8s_server) == []
    (eviction,) = k8s_server.history.find(subresource="eviction")
    assert (eviction.verb, eviction.status) == ("create", 201)


def test_eviction_that_would_break_min_available_is_429(
    core_v1: Any, k8s_server: RunningServer
) -> None:
    k8s_server.apply(pdb("train", {"job": "j1"}, min_available=2))
    k8s_server.apply(pod("p1", labels={"job": "j1"}))
    k8s_server.apply(pod("p2", labels={"job": "j1"}))

    with pytest.raises(ApiException) as caught:
        _evict(core_v1, "p1")
    assert caught.value.status == 429
    status = json.loads(caught.value.body)
    assert status["reason"] == "TooManyRequests"
    assert status["details"]["causes"][0]["reason"] == "DisruptionBudget"
    assert _pod_names(k8s_server) == ["p1", "p2"]


def test_max_unavailable_allows_one_eviction_then_refuses(
    core_v1: Any, k8s_server: RunningServer
) -> None:
    k8s_server.apply(pdb("train", {"job": "j1"}, max_unavailable=1))
    for name in ("p1", "p2", "p3"):
        k8s_server.apply(pod(name, labels={"job": "j1"}))

    _evict(core_v1, "p1")
    with pytest.raises(ApiException) as caught:
        _evict(core_v1, "p2")
    assert caught.value.status == 429
    assert _pod_names(k8s_server) == ["p2", "p3"]


def test_unready_pods_do_not_count_as_healthy(core_v1: Any, k8s_server: RunningServer) -> None:
    k8s_server.apply(pdb("train", {"job": "j1"}, min_available="50%"))
    k8s_server.apply(pod("p1", labels={"job": "j1"}))
    k8s_server.apply(pod("p2", labels={"job": "j1"}, ready=False))
    with pytest.raises(ApiException) as caught:
        _evict(core_v1, "p1")
    assert caught.value.status == 429


def test_pending_pods_are_evicted_regardless_of_budget(
    core_v1: Any, k8s_server: RunningServer
) -> None:
    k8s_server.apply(pdb("train", {"job": "j1"}, min_available=5))
    k8s_server.apply(pod("p1", labels={"job": "j1"}, phase="Pending"))
    _evict(core_v1, "p1")
    assert _pod_names(k8s_server) == []


def test_evicting_a_missing_pod_is_404(core_v1: Any) -> None:
    with pytest.raises(ApiException) as caught:
        _evict(core_v1, "ghost")
    assert caught.value.status == 404


def test_two_budgets_over_one_pod_is_500(core_v1: Any, k8s_server: RunningServer) -> None:
    k8s_server.apply(pdb("a", {"job": "j1"}, max_unavailable=1))
    k8s_server.apply(pdb("b", {"job": "j1"}, max_unavailable=1))
    k8s_server.apply(pod("p1", labels={"job": "j1"}))
    with pytest.raises(ApiException) as caught:
        _evict(core_v1, "p1")
    assert caught.value.status == 500


def test_a_replaced_pod_restores_the_budget(core_v1: Any, k8s_server: RunningServer) -> None:
    k8s_server.apply(pdb("train", {"job": "j1"}, max_unavailable=1))
    for name in ("p1", "p2", "p3"):
        k8s_server.apply(pod(name, labels={"job": "j1"}))
    _evict(core_v1, "p1")
    k8s_server.apply(pod("p1-restarted", labels={"job": "j1"}))

    _evict(core_v1, "p2")
    assert _pod_names(k8s_server) == ["p1-restarted", "p3"]
    status = k8s_server.read("policy/v1", "PodDisruptionBudget", "train", "default")["status"]
    assert (status["expectedPods"], status["disruptionsAllowed"]) == (3, 0)
