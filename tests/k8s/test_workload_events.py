"""Events on the job's workload (what ``kubectl describe jobset`` shows), in every mode,
deduplicated, and the annotations that chose a job's policy or mode made visible."""

from __future__ import annotations

from typing import Any

from harness import RunningServer
from harness.objects import crd, node, pod
from operator_world import (
    CONTROLLER_NS,
    JOB,
    NAMESPACE,
    NODES,
    Clock,
    controller_state,
    controller_status,
    reconciler,
    report,
    sink,
)
from reporter_helpers import CRD_PATH

from pacekeeper.controller.core.ids import JobKey
from pacekeeper.controller.runtime.reconcile import Reconciler

KEY = JobKey(f"{NAMESPACE}/{JOB}")
SLOW = {5: 0.5}  # rank 5 lives on n1
JOBSET = "llama-set"


def setup_jobset_world(server: RunningServer, annotations: dict[str, str] | None = None) -> None:
    """A JobSet that owns the batch Job that owns the pods (the JobSet's own labels are
    left out: the reporter and the controller find the pods by the Job's name)."""
    server.apply_yaml(CRD_PATH)
    server.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": CONTROLLER_NS}})
    server.apply(crd("jobset.x-k8s.io", "JobSet", "jobsets", version="v1alpha2"))
    for n in NODES:
        server.apply(node(n))
    jobset = server.apply({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                           "metadata": {"name": JOBSET, "namespace": NAMESPACE}})  # fmt: skip
    job = server.apply({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": JOB, "namespace": NAMESPACE, "ownerReferences": [{
            "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": JOBSET,
            "uid": jobset["metadata"]["uid"], "controller": True,
        }]},
    })  # fmt: skip
    owner = {"kind": "Job", "name": JOB, "uid": job["metadata"]["uid"]}
    for i in range(len(NODES)):
        server.apply(
            pod(
                f"{JOB}-{i}", node_name=NODES[i],
                labels={"batch.kubernetes.io/job-name": JOB,
                        "batch.kubernetes.io/job-completion-index": str(i)},
                annotations={"pacekeeper.dev/detect": "true", **(annotations or {})},
                owner=owner,
            )
        )  # fmt: skip


def run(
    rec: Reconciler, api_client: Any, clock: Clock, steps: int,
    *, slow: dict[int, float], start_seq: int = 0,
) -> int:  # fmt: skip
    out = sink(api_client)
    seq = start_seq
    for _ in range(steps):
        out.send(report(seq, clock(), slow))
        rec.reconcile_job(KEY)
        clock.advance(30)
        seq += 1
    return seq


def workload_events(server: RunningServer) -> list[dict[str, Any]]:
    return [
        e for e in server.list("v1", "Event", NAMESPACE)
        if e["involvedObject"]["kind"] == "JobSet"
    ]  # fmt: skip


def by_reason(events: list[dict[str, Any]], reason: str) -> list[dict[str, Any]]:
    return [e for e in events if e["reason"] == reason]


def test_observe_mode_tells_the_workload_what_it_would_do(
    k8s_server: RunningServer, k8s_api_client: Any
) -> None:
    setup_jobset_world(k8s_server)
    clock = Clock()
    run(reconciler(k8s_api_client, clock, "observe"), k8s_api_client, clock, 12, slow=SLOW)

    events = workload_events(k8s_server)
    held = by_reason(events, "ObserveMode")
    assert held, [e["reason"] for e in events]
    jobset = k8s_server.read("jobset.x-k8s.io/v1alpha2", "JobSet", JOBSET, namespace=NAMESPACE)
    assert all(e["involvedObject"]["uid"] == jobset["metadata"]["uid"] for e in held)
    messages = [e["message"] for e in held]
    assert any("would notify" in m for m in messages)
    assert any("would taintNode" in m for m in messages)
    assert all("rank 5 on node n1" in m and "mode observe" in m for m in messages)
    assert all(e["type"] == "Warning" for e in held)
    # Nothing in the cluster was touched.
    assert k8s_server.history.find(verb="patch", plural="nodes") == []


def test_the_same_verdict_is_one_event_whose_count_grows_and_a_restart_repeats_nothing(
    k8s_server: RunningServer, k8s_api_client: Any
) -> None:
    setup_jobset_world(k8s_server)
    clock = Clock()
    seq = run(reconciler(k8s_api_client, clock, "observe"), k8s_api_client, clock, 8, slow=SLOW)
    first = {e["metadata"]["name"]: e["count"] for e in workload_events(k8s_server)}
    assert first and set(first.values()) == {1}

    # A new process, the same job still slow: what was said is not said or counted again
    # (the ladder's next would-be step is news, and gets an Event of its own).
    again = reconciler(k8s_api_client, clock, "observe")
    seq = run(again, k8s_api_client, clock, 8, slow=SLOW, start_seq=seq)
    now = {e["metadata"]["name"]: e["count"] for e in workload_events(k8s_server)}
    assert {k: now[k] for k in first} == first
    said = [(e["reason"], e["message"]) for e in workload_events(k8s_server)]
    assert len(said) == len(set(said))

    # Recovered, then slow again: the notice comes back, on the same Event, counted.
    seq = run(again, k8s_api_client, clock, 10, slow={}, start_seq=seq)
    third = reconciler(k8s_api_client, clock, "observe")  # counts survive restarts too
    run(third, k8s_api_client, clock, 4, slow=SLOW, start_seq=seq)
    notices = [e for e in by_reason(workload_events(k8s_server), "ObserveMode")
               if "would notify" in e["message"]]  # fmt: skip
    assert len(notices) == 1
    assert notices[0]["count"] == 2
    assert notices[0]["lastTimestamp"] > notices[0]["firstTimestamp"]


def test_enforce_tells_the_workload_each_action_and_keeps_the_nodes_events(
    k8s_server: RunningServer, k8s_api_client: Any
) -> None:
    setup_jobset_world(k8s_server)
    clock = Clock()
    run(reconciler(k8s_api_client, clock, "enforce"), k8s_api_client, clock, 16, slow=SLOW)

    acted = by_reason(workload_events(k8s_server), "BelowThreshold")
    actions = sorted(e["action"] for e in acted)
    assert actions == ["cordonNode", "notify", "taintNode"]
    assert all("rank 5 on node n1" in e["message"] and e["count"] == 1 for e in acted)
    node_events = [e for e in k8s_server.list("v1", "Event", "default")
                   if e["involvedObject"]["kind"] == "Node"]  # fmt: skip
    assert {e["action"] for e in node_events} >= {"taintNode", "cordonNode"}


def test_an_unknown_policy_is_a_warning_on_the_workload_naming_the_annotation(
    k8s_server: RunningServer, k8s_api_client: Any
) -> None:
    setup_jobset_world(k8s_server, {"pacekeeper.dev/policy": "gpuu"})
    clock = Clock()
    run(reconciler(k8s_api_client, clock, "enforce"), k8s_api_client, clock, 6, slow=SLOW)

    (warning,) = by_reason(workload_events(k8s_server), "UnknownPolicy")
    assert warning["type"] == "Warning" and warning["count"] == 1
    assert "annotation pacekeeper.dev/policy" in warning["message"]
    assert "'gpuu'" in warning["message"]
    assert "policies: gpu" in warning["message"]
    assert "did you mean 'gpu'?" in warning["message"]


def test_a_mode_annotation_is_named_by_the_decisions_and_the_job_state(
    k8s_server: RunningServer, k8s_api_client: Any
) -> None:
    setup_jobset_world(k8s_server, {"pacekeeper.dev/mode": "observe"})
    clock = Clock()
    run(reconciler(k8s_api_client, clock, "enforce"), k8s_api_client, clock, 8, slow=SLOW)

    source = "annotation pacekeeper.dev/mode"
    decisions = controller_status(k8s_server)["decisions"]
    assert decisions and all(d["evidence"]["modeSource"] == source for d in decisions)
    assert controller_state(k8s_server)["modeSource"] == source
    held = by_reason(workload_events(k8s_server), "ObserveMode")
    assert held and all(f"held there by {source}" in e["message"] for e in held)
