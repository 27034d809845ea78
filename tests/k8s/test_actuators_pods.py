"""Rank restarts and drains through the Eviction API, against the API harness."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from harness import Fault, RunningServer
from harness.objects import pdb, pod

from pacekeeper.controller.actuators import Outcome, RetryLater
from pacekeeper.controller.actuators.events import ObjectRef
from pacekeeper.controller.actuators.kubernetes_actuators import KubernetesActuators
from pacekeeper.controller.actuators.retries import RetrySettings
from pacekeeper.controller.core.decisions import Reason
from pacekeeper.controller.core.marks import Provenance
from pacekeeper.controller.core.ranks import PodTarget

NOW = datetime(2026, 11, 30, 1, 0, tzinfo=UTC)
JOB = {"job-name": "train-a"}


def _slow(actuators: KubernetesActuators) -> Provenance:
    return actuators.provenance("default/train-a", Reason.BELOW_THRESHOLD, "gpu", NOW)


def _seed(server: RunningServer, name: str, node: str = "n1", **labels: str) -> PodTarget:
    created = server.apply(pod(name, node_name=node, labels={**JOB, **labels}))
    return PodTarget("default", name, created["metadata"]["uid"], node)


def _pods(server: RunningServer) -> list[str]:
    """Pods that still run: an evicted or deleted pod bound to a node stays Terminating
    (a deletionTimestamp) until its kubelet, absent here, finishes it."""
    return [
        p["metadata"]["name"]
        for p in server.list("v1", "Pod", "default")
        if not p["metadata"].get("deletionTimestamp")
    ]


def _terminating(server: RunningServer) -> list[str]:
    return [
        p["metadata"]["name"]
        for p in server.list("v1", "Pod", "default")
        if p["metadata"].get("deletionTimestamp")
    ]


def _evictions(server: RunningServer, status: int | None = None) -> list[Any]:
    found = server.history.find(subresource="eviction")
    return [r for r in found if status is None or r.status == status]


def _events(server: RunningServer, reason: str) -> list[dict[str, Any]]:
    return [e for e in server.list("v1", "Event") if e["reason"] == reason]


def test_restart_rank_evicts_its_pod_once_and_records_an_event(
    k8s_server: RunningServer, actuators: KubernetesActuators
) -> None:
    target = _seed(k8s_server, "train-a-3")
    _seed(k8s_server, "train-a-4")
    report = ObjectRef(
        "StragglerReport", "train-a", "default", api_version="pacekeeper.dev/v1alpha1"
    )

    result = actuators.pods.restart_rank(target, _slow(actuators), rank=3, related=report)
    again = actuators.pods.restart_rank(target, _slow(actuators), rank=3)

    assert (result.outcome, again.outcome) == (Outcome.EVICTED, Outcome.GONE)
    assert _pods(k8s_server) == ["train-a-4"]
    assert _terminating(k8s_server) == ["train-a-3"]
    k8s_server.finish_termination("train-a-3", "default")
    assert _terminating(k8s_server) == []
    (eviction,) = _evictions(k8s_server)
    assert eviction.status == 201
    assert eviction.body["deleteOptions"]["preconditions"]["uid"] == target.uid
    (event,) = _events(k8s_server, "BelowThreshold")
    assert event["involvedObject"]["uid"] == target.uid
    assert event["action"] == "restartRank"
    assert event["related"]["kind"] == "StragglerReport"
    assert "rank 3" in event["message"]


def test_a_replaced_pod_with_the_same_name_is_left_alone(
    k8s_server: RunningServer, actuators: KubernetesActuators
) -> None:
    stale = _seed(k8s_server, "train-a-0")
    k8s_server.delete("v1", "Pod", "train-a-0", "default")
    k8s_server.finish_termination("train-a-0", "default")
    fresh = _seed(k8s_server, "train-a-0")  # the Job controller restarts it

    result = actuators.pods.restart_rank(stale, _slow(actuators), rank=0)

    assert result.outcome is Outcome.GONE
    assert result.detail["replacedBy"] == fresh.uid
    assert _evictions(k8s_server) == []
    assert _pods(k8s_server) == ["train-a-0"]


def test_a_budget_refusal_backs_off_and_keeps_the_pod(
    k8s_server: RunningServer, actuators: KubernetesActuators
) -> None:
    k8s_server.apply(pdb("train-a", JOB, min_available=2))
    target = _seed(k8s_server, "train-a-0")
    _seed(k8s_server, "train-a-1")

    delays = []
    for attempt in (0, 1, 2):
        with pytest.raises(RetryLater) as caught:
            actuators.pods.restart_rank(target, _slow(actuators), rank=0, attempt=attempt)
        assert caught.value.reason == Reason.PDB_BLOCKED
        delays.append(caught.value.delay_s)

    assert delays == [10.0, 20.0, 40.0]
    assert _pods(k8s_server) == ["train-a-0", "train-a-1"]
    assert {r.status for r in _evictions(k8s_server)} == {429}
    (blocked,) = _events(k8s_server, "PdbBlocked")  # one per decision, however many tries
    assert blocked["type"] == "Warning"


def test_delete_fallback_starts_only_after_the_policys_attempts(
    k8s_server: RunningServer, k8s_api_client: Any, backoff_sleeps: list[float]
) -> None:
    actuators = KubernetesActuators(
        k8s_api_client, delete_fallback_after=2, sleep=backoff_sleeps.append
    )
    k8s_server.apply(pdb("train-a", JOB, min_available=2))
    target = _seed(k8s_server, "train-a-0")
    _seed(k8s_server, "train-a-1")

    with pytest.raises(RetryLater):
        actuators.pods.restart_rank(target, _slow(actuators), attempt=1)
    result = actuators.pods.restart_rank(target, _slow(actuators), attempt=2)

    assert result.outcome is Outcome.DELETED
    assert _pods(k8s_server) == ["train-a-1"]
    (delete,) = k8s_server.history.find(verb="delete", plural="pods")
    assert delete.body["preconditions"]["uid"] == target.uid
    assert "fallback" in _events(k8s_server, "BelowThreshold")[0]["message"]


def test_an_injected_500_on_eviction_is_retried_into_exactly_one_eviction(
    k8s_server: RunningServer, actuators: KubernetesActuators, backoff_sleeps: list[float]
) -> None:
    target = _seed(k8s_server, "train-a-0")
    k8s_server.inject(Fault(status=500, subresource="eviction"))

    result = actuators.pods.restart_rank(target, _slow(actuators))

    assert result.outcome is Outcome.EVICTED
    assert [r.status for r in _evictions(k8s_server)] == [500, 201]
    assert backoff_sleeps == [0.2]
    assert len(_events(k8s_server, "BelowThreshold")) == 1


def test_an_eviction_whose_answer_times_out_is_confirmed_not_repeated(
    k8s_server: RunningServer, k8s_api_client: Any, backoff_sleeps: list[float]
) -> None:
    actuators = KubernetesActuators(
        k8s_api_client, settings=RetrySettings(request_timeout_s=0.3), sleep=backoff_sleeps.append
    )
    target = _seed(k8s_server, "train-a-0")
    k8s_server.inject(Fault(status=None, delay_s=1.0, subresource="eviction"))

    result = actuators.pods.restart_rank(target, _slow(actuators), rank=0)

    assert result.outcome is Outcome.EVICTED
    assert len(_evictions(k8s_server)) == 1
    assert _pods(k8s_server) == []
    assert len(_events(k8s_server, "BelowThreshold")) == 1


def test_drain_evicts_only_the_jobs_pods_on_that_node(
    k8s_server: RunningServer, actuators: KubernetesActuators
) -> None:
    for name in ("train-a-0", "train-a-1"):
        _seed(k8s_server, name, node="n1")
    _seed(k8s_server, "train-a-2", node="n2")
    k8s_server.apply(pod("other-0", node_name="n1", labels={"job-name": "other"}))

    first = actuators.pods.drain_job_from_node(
        "n1", "default", "job-name=train-a", _slow(actuators)
    )
    second = actuators.pods.drain_job_from_node(
        "n1", "default", "job-name=train-a", _slow(actuators)
    )

    assert sorted(first.evicted) == ["pod/default/train-a-0", "pod/default/train-a-1"]
    assert second.pods == ()
    assert _pods(k8s_server) == ["other-0", "train-a-2"]
    assert len(_evictions(k8s_server, 201)) == 2
    node_events = [
        e for e in _events(k8s_server, "BelowThreshold") if e["involvedObject"]["kind"] == "Node"
    ]
    assert [e["action"] for e in node_events] == ["drainNode"]


def test_drain_evicts_what_it_may_and_retries_the_protected_rest(
    k8s_server: RunningServer, actuators: KubernetesActuators
) -> None:
    k8s_server.apply(pdb("guarded", {"guard": "yes"}, min_available=1))
    _seed(k8s_server, "train-a-0")
    _seed(k8s_server, "train-a-1", guard="yes")

    with pytest.raises(RetryLater) as caught:
        actuators.pods.drain_job_from_node("n1", "default", "job-name=train-a", _slow(actuators))

    assert caught.value.reason == Reason.PDB_BLOCKED
    assert "train-a-1" in caught.value.detail
    assert _pods(k8s_server) == ["train-a-1"]


def test_drain_refuses_an_empty_selector(actuators: KubernetesActuators) -> None:
    with pytest.raises(ValueError, match="non-empty label selector"):
        actuators.pods.drain_job_from_node("n1", "default", " ", _slow(actuators))


def test_notify_events_name_the_job_report_and_are_posted_once(
    k8s_server: RunningServer, actuators: KubernetesActuators
) -> None:
    from pacekeeper.controller.actuators.events import EventAction, EventType

    report = ObjectRef(
        "StragglerReport", "train-a", "default", "uid-r", api_version="pacekeeper.dev/v1alpha1"
    )
    for _ in range(2):
        assert actuators.events.record(
            report,
            _slow(actuators),
            EventAction.NOTIFY,
            "ranks 3, 17: BelowThreshold",
            event_type=EventType.WARNING,
        )
    (event,) = _events(k8s_server, "BelowThreshold")
    assert event["involvedObject"] == {
        "kind": "StragglerReport",
        "name": "train-a",
        "namespace": "default",
        "uid": "uid-r",
        "apiVersion": "pacekeeper.dev/v1alpha1",
    }
    assert event["metadata"]["annotations"]["pacekeeper.dev/job"] == "default/train-a"
    assert event["action"] == "notify"
    assert actuators.events.failures == 0


def test_an_event_that_cannot_be_posted_never_fails_the_caller(
    k8s_server: RunningServer, actuators: KubernetesActuators
) -> None:
    from pacekeeper.controller.actuators.events import EventAction

    k8s_server.inject(Fault(status=403, reason="Forbidden", plural="events"))
    posted = actuators.events.record(
        ObjectRef("Node", "n1"), _slow(actuators), EventAction.NOTIFY, "x"
    )
    assert posted is False
    assert actuators.events.failures == 1
    assert k8s_server.list("v1", "Event") == []


def test_an_unconfirmed_eviction_is_settled_by_the_next_call_not_repeated(
    k8s_server: RunningServer, k8s_api_client: Any, backoff_sleeps: list[float]
) -> None:
    actuators = KubernetesActuators(
        k8s_api_client, settings=RetrySettings(request_timeout_s=0.2), sleep=backoff_sleeps.append
    )
    _seed(k8s_server, "train-a-0")
    unpinned = PodTarget("default", "train-a-0")  # no uid: only the name is known
    # The eviction lands but its answer is lost, and every read after it fails.
    k8s_server.inject(Fault(status=None, delay_s=0.5, subresource="eviction"))
    k8s_server.inject(Fault(status=500, times=100, verb="get", skip=1))
    with pytest.raises(RetryLater):
        actuators.pods.restart_rank(unpinned, _slow(actuators), rank=0)
    k8s_server.faults.clear()
    k8s_server.finish_termination("train-a-0", "default")  # its kubelet
    replacement = _seed(k8s_server, "train-a-0")  # the Job controller's new pod

    result = actuators.pods.restart_rank(unpinned, _slow(actuators), rank=0)

    assert result.outcome is Outcome.EVICTED
    assert len(_evictions(k8s_server)) == 1
    assert _pods(k8s_server) == ["train-a-0"]
    assert (
        k8s_server.read("v1", "Pod", "train-a-0", "default")["metadata"]["uid"] == replacement.uid
    )
    assert len(_events(k8s_server, "BelowThreshold")) == 1


def test_a_server_without_policy_v1_gets_its_eviction_in_v1beta1(
    k8s_server: RunningServer, actuators: KubernetesActuators
) -> None:
    """Kubernetes before 1.22 serves Eviction in policy/v1beta1 only and answers a v1 body
    with 400; the actuator asks once more in the version served, and remembers it."""
    target = _seed(k8s_server, "train-a-0")
    second = _seed(k8s_server, "train-a-1")
    k8s_server.inject(Fault(
        status=400, reason="BadRequest", subresource="eviction",
        message='no kind "Eviction" is registered for version "policy/v1" in scheme',
    ))  # fmt: skip

    assert actuators.pods.restart_rank(target, _slow(actuators)).outcome is Outcome.EVICTED
    assert actuators.pods.restart_rank(second, _slow(actuators)).outcome is Outcome.EVICTED
    versions = [r.body["apiVersion"] for r in _evictions(k8s_server)]
    assert versions == ["policy/v1", "policy/v1beta1", "policy/v1beta1"]
    assert [r.status for r in _evictions(k8s_server)] == [400, 201, 201]


def test_a_refused_eviction_gives_up_with_the_servers_status_and_message(
    k8s_server: RunningServer, actuators: KubernetesActuators
) -> None:
    from pacekeeper.controller.actuators import GiveUp

    target = _seed(k8s_server, "train-a-0")
    k8s_server.inject(
        Fault(
            status=403,
            reason="Forbidden",
            subresource="eviction",
            message='pods "train-a-0" is forbidden: cannot create pods/eviction',
        )
    )
    with pytest.raises(GiveUp) as caught:
        actuators.pods.restart_rank(target, _slow(actuators))
    assert caught.value.http_status == 403
    assert caught.value.server_message is not None
    assert "cannot create pods/eviction" in caught.value.server_message
    assert "HTTP 403" in str(caught.value) and "forbidden" in str(caught.value)
