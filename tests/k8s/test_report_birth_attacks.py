"""Reports bound from birth (issue 40): a pod of another job creates this job's
StragglerReport before the controller does, with the `create` a reporter Role used to
have. Against the real reconciler over HTTP; each test asserts the world."""

from __future__ import annotations

from typing import Any

from harness import RunningServer
from operator_world import (
    JOB,
    JOB_OWNER,
    NAMESPACE,
    Clock,
    controller_state,
    reconciler,
    report,
    setup_world,
    taints,
)
from test_trust_attacks import KEY, SLOW, intrude

from pacekeeper.controller.runtime.report_birth import CREATED_BY_ANNOTATION
from pacekeeper.detector.reporters.kubernetes import KubernetesStatusSink

API = "pacekeeper.dev/v1alpha1"


def _report_object(server: RunningServer) -> dict[str, Any]:
    obj = server.read(API, "StragglerReport", JOB, namespace=NAMESPACE)
    assert obj is not None
    return dict(obj)


def _reporter(api_client: Any) -> KubernetesStatusSink:
    return KubernetesStatusSink(namespace=NAMESPACE, name=JOB, incarnation="inc-1",
                                api_client=api_client)  # fmt: skip


def _repair_events(server: RunningServer) -> list[str]:
    events = server.list("v1", "Event", namespace=NAMESPACE)
    return [e["message"] for e in events if e.get("reason") == "ForeignReport"]


def test_the_controller_creates_the_report_bound_to_the_workload_when_it_sees_the_pods(
    k8s_server: RunningServer, k8s_api_client: Any
) -> None:
    setup_world(k8s_server)
    rec = reconciler(k8s_api_client, Clock())
    rec.reconcile_job(KEY)
    obj = _report_object(k8s_server)
    assert [r["uid"] for r in obj["metadata"]["ownerReferences"]] == [JOB_OWNER["uid"]]
    assert obj["spec"] == {"job": {"platform": "kubernetes", "namespace": NAMESPACE,
                                   "name": JOB}}  # fmt: skip
    assert obj["metadata"]["annotations"][CREATED_BY_ANNOTATION] == "controller"
    assert k8s_server.history.find(verb="delete", plural="stragglerreports") == []
    assert _repair_events(k8s_server) == []


def test_a_report_pre_created_without_an_owner_is_recreated_bound_and_the_job_is_protected(
    k8s_server: RunningServer, k8s_api_client: Any
) -> None:
    # Job A's pod creates job B's report before B's pods run: no owner, so it would never
    # bind, and B would never be protected.
    k8s_server.apply_yaml(__import__("reporter_helpers").CRD_PATH)
    intruded = intrude(k8s_api_client, JOB)
    setup_world(k8s_server)
    clock = Clock()
    rec = reconciler(k8s_api_client, clock)
    out = _reporter(k8s_api_client)
    for seq in range(16):
        out.send(report(seq, clock(), SLOW))
        rec.reconcile_job(KEY)
        clock.advance(30)
    obj = _report_object(k8s_server)
    assert obj["metadata"]["uid"] != intruded["metadata"]["uid"]
    assert [r["uid"] for r in obj["metadata"]["ownerReferences"]] == [JOB_OWNER["uid"]]
    assert [t["key"] for t in taints(k8s_server, "n1")] != []  # B is protected
    reasons = {d["reason"] for d in obj["status"]["controller"]["decisions"]}
    assert "UnboundReport" not in reasons
    assert len(_repair_events(k8s_server)) == 1
    assert "recreated" in _repair_events(k8s_server)[0]


def test_a_report_pre_created_with_the_workloads_owner_loses_the_intruders_control(
    k8s_server: RunningServer, k8s_api_client: Any
) -> None:
    # The owner copied from B's pods (readable through `get pods`) and detection switched
    # off in spec.control: bound, but the controller did not make it.
    setup_world(k8s_server)
    owner = {"apiVersion": "batch/v1", **JOB_OWNER}
    intruded = intrude(
        k8s_api_client, JOB,
        metadata={"ownerReferences": [owner],
                  "annotations": {CREATED_BY_ANNOTATION: "controller"}},  # forged as well
        spec={"control": {"enabled": False, "profilingInterval": 1000}},
    )  # fmt: skip
    rec = reconciler(k8s_api_client, Clock())
    rec.reconcile_job(KEY)
    obj = _report_object(k8s_server)
    assert "control" not in obj["spec"]
    assert obj["metadata"]["uid"] == intruded["metadata"]["uid"]  # bound: kept, reset
    assert len(_repair_events(k8s_server)) == 1
    assert "spec.control removed" in _repair_events(k8s_server)[0]
    assert controller_state(k8s_server) is not None

    # Taken over: a human's control after that stays.
    from kubernetes import client

    client.CustomObjectsApi(k8s_api_client).patch_namespaced_custom_object(
        "pacekeeper.dev", "v1alpha1", NAMESPACE, "stragglerreports", JOB,
        {"spec": {"control": {"profilingInterval": 10}}},
        _content_type="application/merge-patch+json",
    )  # fmt: skip
    rec.reconcile_job(KEY)
    assert _report_object(k8s_server)["spec"]["control"] == {"profilingInterval": 10}
    assert len(_repair_events(k8s_server)) == 1
