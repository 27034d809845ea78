"""``status.conditions`` and ``status.verdict`` on the StragglerReport, written by the
controller in Kubernetes' conventions, and never clobbered by the job's reporter."""

from __future__ import annotations

from typing import Any

from harness import RunningServer
from operator_world import JOB, NAMESPACE, Clock, reconciler, report, setup_world, sink

from pacekeeper.controller.core.ids import JobKey

KEY = JobKey(f"{NAMESPACE}/{JOB}")
SLOW = {5: 0.5}


def status(server: RunningServer) -> dict[str, Any]:
    obj = server.read("pacekeeper.dev/v1alpha1", "StragglerReport", JOB, namespace=NAMESPACE)
    return dict((obj or {}).get("status") or {})


def conditions(server: RunningServer) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status(server).get("conditions") or []}


def test_conditions_follow_the_verdict_and_keep_their_transition_times(
    k8s_server: RunningServer, k8s_api_client: Any
) -> None:
    setup_world(k8s_server)
    clock = Clock()
    rec = reconciler(k8s_api_client, clock, "observe")
    out = sink(k8s_api_client)
    seq = 0

    def step(slow: dict[int, float]) -> None:
        nonlocal seq
        out.send(report(seq, clock(), slow))
        rec.reconcile_job(KEY)
        clock.advance(30)
        seq += 1

    step({})
    # The harness's pods start within the clock's first second: the first report is either
    # still in the job's warm-up (not judged: Unknown) or judged healthy (False).
    first, verdict = conditions(k8s_server)["Stragglers"], status(k8s_server)["verdict"]
    expected = {"hold WarmingUp": ("Unknown", "WarmingUp"), "hold Healthy": ("False", "Healthy")}
    assert (first["status"], first["reason"]) == expected[verdict]
    step({})
    healthy = conditions(k8s_server)
    assert healthy["Bound"]["status"] == "True"
    assert (healthy["Stragglers"]["status"], healthy["Stragglers"]["reason"]) == (
        "False", "Healthy",
    )  # fmt: skip
    assert healthy["Acting"]["status"] == "False"
    assert all(c["observedGeneration"] >= 1 for c in healthy.values())
    assert status(k8s_server)["verdict"] == "hold Healthy"

    for _ in range(4):
        step(SLOW)
    slow = conditions(k8s_server)
    assert slow["Stragglers"]["status"] == "True"
    assert "rank 5 on node n1 below the act threshold 0.75" in slow["Stragglers"]["message"]
    assert slow["Stragglers"]["lastTransitionTime"] != healthy["Stragglers"]["lastTransitionTime"]
    assert (slow["Acting"]["status"], slow["Acting"]["reason"]) == ("False", "ObserveMode")
    assert status(k8s_server)["verdict"].startswith("hold ObserveMode")
    # Bound did not change: its transition time did not either.
    assert slow["Bound"]["lastTransitionTime"] == healthy["Bound"]["lastTransitionTime"]
    # The reporter's own status writes leave the controller's keys alone.
    assert "worstScore" in status(k8s_server)


def test_enforce_says_acting_while_it_acts(k8s_server: RunningServer, k8s_api_client: Any) -> None:
    setup_world(k8s_server)
    clock = Clock()
    rec = reconciler(k8s_api_client, clock, "enforce")
    out = sink(k8s_api_client)
    seen = []
    for seq in range(6):
        out.send(report(seq, clock(), SLOW))
        rec.reconcile_job(KEY)
        clock.advance(30)
        seen.append((conditions(k8s_server)["Acting"]["status"], status(k8s_server)["verdict"]))
    assert ("True", "act BelowThreshold notify") in seen
    assert ("True", "act BelowThreshold taintNode") in seen


def test_an_unbound_report_says_so_in_its_conditions(
    k8s_server: RunningServer, k8s_api_client: Any
) -> None:
    setup_world(k8s_server)
    clock = Clock()
    out = sink(k8s_api_client)
    out.send(report(0, clock(), SLOW))
    for p in ("llama-0", "llama-1", "llama-2"):
        k8s_server.delete("v1", "Pod", p, namespace=NAMESPACE)
        k8s_server.finish_termination(p, NAMESPACE)
    reconciler(k8s_api_client, clock, "enforce").reconcile_job(KEY)
    got = conditions(k8s_server)
    assert (got["Bound"]["status"], got["Bound"]["reason"]) == ("False", "UnboundReport")
    assert status(k8s_server)["verdict"] == "hold UnboundReport"
