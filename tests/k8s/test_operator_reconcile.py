"""The operator's level-based reconcile against the API harness: the real reporter sink
writes StragglerReport status, the real reconciler decides and acts, and the tests
assert the world (taints, cordons, Events, status), not call sequences."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from harness import Fault, RunningServer
from operator_world import (
    JOB,
    NAMESPACE,
    Clock,
    controller_state,
    controller_status,
    cordoned,
    reconciler,
    report,
    setup_world,
    sink,
    taints,
)

from pacekeeper.controller.core.ids import JobKey
from pacekeeper.controller.core.marks import TAINT_KEY
from pacekeeper.controller.runtime.reconcile import Reconciler
from pacekeeper.controller.runtime.state_store import DISPLAY_REFRESH_S

KEY = JobKey(f"{NAMESPACE}/{JOB}")
SLOW = {5: 0.5}  # rank 5 lives on n1


def _run(
    rec: Reconciler, server: RunningServer, api_client: Any, clock: Clock, steps: int,
    *, slow: dict[int, float], start_seq: int = 0, every_s: float = 30.0,
) -> int:  # fmt: skip
    """Publish a report, reconcile, advance the clock; ``steps`` times."""
    out = sink(api_client)
    seq = start_seq
    for _ in range(steps):
        out.send(report(seq, clock(), slow))
        rec.reconcile_job(KEY)
        clock.advance(every_s)
        seq += 1
    return seq


def test_enforce_taints_then_cordons_the_slow_rank_node_and_nothing_else(
    k8s_server: RunningServer, k8s_api_client: Any
) -> None:
    setup_world(k8s_server)
    clock = Clock()
    rec = reconciler(k8s_api_client, clock)
    _run(rec, k8s_server, k8s_api_client, clock, 16, slow=SLOW)

    assert [t["key"] for t in taints(k8s_server, "n1")] == [TAINT_KEY]
    assert cordoned(k8s_server, "n1")
    for other in ("n0", "n2"):
        assert taints(k8s_server, other) == []
        assert not cordoned(k8s_server, other)
    # Exactly one taint write and one cordon write reached n1, despite 16 reconciles.
    node_patches = k8s_server.history.find(verb="patch", plural="nodes", name="n1", status=200)
    assert len(node_patches) == 2, [r.body for r in node_patches]
    status = controller_status(k8s_server)
    acted = [d for d in status["decisions"] if d["verdict"] == "act"]
    assert [d["action"] for d in acted] == ["notify", "taintNode", "cordonNode"]
    assert all(d["reason"] == "BelowThreshold" for d in acted)
    events = k8s_server.list("v1", "Event", NAMESPACE) + k8s_server.list("v1", "Event", "default")
    assert any(e.get("action") == "notify" for e in events)


@pytest.mark.parametrize("mode", ["observe", "dry-run"])
def test_observe_and_dry_run_only_record_what_they_would_do(
    k8s_server: RunningServer, k8s_api_client: Any, mode: str
) -> None:
    setup_world(k8s_server)
    clock = Clock()
    rec = reconciler(k8s_api_client, clock, mode)
    _run(rec, k8s_server, k8s_api_client, clock, 16, slow=SLOW)

    assert all(taints(k8s_server, n) == [] for n in ("n0", "n1", "n2"))
    assert not any(cordoned(k8s_server, n) for n in ("n0", "n1", "n2"))
    assert k8s_server.history.find(verb="patch", plural="nodes") == []
    held = [d for d in controller_status(k8s_server)["decisions"] if d["reason"] == "ObserveMode"]
    assert {d["action"] for d in held} >= {"taintNode"}
    assert all(d["mode"] == mode for d in held)


def test_pod_annotation_lowers_the_mode_for_that_job(
    k8s_server: RunningServer, k8s_api_client: Any
) -> None:
    setup_world(k8s_server, mode_annotation="observe")
    clock = Clock()
    rec = reconciler(k8s_api_client, clock, "enforce")
    _run(rec, k8s_server, k8s_api_client, clock, 16, slow=SLOW)
    assert k8s_server.history.find(verb="patch", plural="nodes") == []


def test_restart_mid_ladder_repeats_nothing_and_loses_nothing(
    k8s_server: RunningServer, k8s_api_client: Any
) -> None:
    setup_world(k8s_server)
    clock = Clock()
    first = reconciler(k8s_api_client, clock)
    seq = _run(first, k8s_server, k8s_api_client, clock, 6, slow=SLOW)
    assert [t["key"] for t in taints(k8s_server, "n1")] == [TAINT_KEY]
    assert not cordoned(k8s_server, "n1")

    # A new process: no memory but what the cluster holds.
    second = reconciler(k8s_api_client, clock)
    _run(second, k8s_server, k8s_api_client, clock, 10, slow=SLOW, start_seq=seq)

    assert cordoned(k8s_server, "n1")
    taint_writes = [
        r
        for r in k8s_server.history.find(verb="patch", plural="nodes", name="n1", status=200)
        if "taints" in str(r.body)
    ]
    assert len(taint_writes) == 1
    acted = [
        d["action"] for d in controller_status(k8s_server)["decisions"] if d["verdict"] == "act"
    ]
    assert acted.count("taintNode") == 1
    assert acted.count("cordonNode") == 1


def test_recovery_undoes_our_marks_and_leaves_a_human_cordon(
    k8s_server: RunningServer, k8s_api_client: Any
) -> None:
    setup_world(k8s_server)
    human = k8s_server.read("v1", "Node", "n2")
    human["spec"]["unschedulable"] = True
    k8s_server.apply(human)
    clock = Clock()
    rec = reconciler(k8s_api_client, clock)
    seq = _run(rec, k8s_server, k8s_api_client, clock, 16, slow=SLOW)
    assert cordoned(k8s_server, "n1")
    _run(rec, k8s_server, k8s_api_client, clock, 10, slow={}, start_seq=seq)

    assert taints(k8s_server, "n1") == []
    assert not cordoned(k8s_server, "n1")
    assert cordoned(k8s_server, "n2"), "a human's cordon is never undone"
    undone = [d for d in controller_status(k8s_server)["decisions"] if d["verdict"] == "undo"]
    assert {d["action"] for d in undone} == {"taintNode", "cordonNode"}


def test_injected_500s_and_409s_cause_retries_not_duplicates(
    k8s_server: RunningServer, k8s_api_client: Any
) -> None:
    setup_world(k8s_server)
    k8s_server.inject(Fault(status=500, times=2, verb="patch", plural="nodes"))
    k8s_server.inject(Fault(status=409, times=1, verb="patch", plural="nodes"))
    clock = Clock()
    rec = reconciler(k8s_api_client, clock)
    _run(rec, k8s_server, k8s_api_client, clock, 16, slow=SLOW)

    assert [t["key"] for t in taints(k8s_server, "n1")] == [TAINT_KEY]
    assert cordoned(k8s_server, "n1")
    ok = k8s_server.history.find(verb="patch", plural="nodes", name="n1", status=200)
    assert len(ok) == 2
    assert len(k8s_server.history.find(verb="patch", plural="nodes", status=500)) == 2


def test_malformed_status_is_recorded_and_never_acted_on(
    k8s_server: RunningServer, k8s_api_client: Any
) -> None:
    from kubernetes import client

    setup_world(k8s_server)
    clock = Clock()
    rec = reconciler(k8s_api_client, clock)
    seq = _run(rec, k8s_server, k8s_api_client, clock, 1, slow=SLOW)
    api = client.CustomObjectsApi(k8s_api_client)
    for _ in range(12):
        wire = report(seq, clock(), SLOW).to_wire()
        wire["schemaVersion"] = 99  # from the future
        api.patch_namespaced_custom_object_status(
            "pacekeeper.dev", "v1alpha1", NAMESPACE, "stragglerreports", JOB,
            {"status": {"report": wire}},
            _content_type="application/merge-patch+json",
        )  # fmt: skip
        rec.reconcile_job(KEY)
        clock.advance(30)
        seq += 1
    assert k8s_server.history.find(verb="patch", plural="nodes") == []
    reasons = {d["reason"] for d in controller_status(k8s_server)["decisions"]}
    assert reasons & {"MalformedReport", "StaleData"}


def test_stale_report_never_acts(k8s_server: RunningServer, k8s_api_client: Any) -> None:
    setup_world(k8s_server)
    clock = Clock()
    rec = reconciler(k8s_api_client, clock)
    out = sink(k8s_api_client)
    out.send(report(0, clock(), SLOW))
    for _ in range(20):  # the same old report, the clock running on
        clock.advance(60)
        rec.reconcile_job(KEY)
    assert k8s_server.history.find(verb="patch", plural="nodes") == []
    assert "StaleData" in {d["reason"] for d in controller_status(k8s_server)["decisions"]}


def test_metrics_count_decisions_and_applied_actions(
    k8s_server: RunningServer, k8s_api_client: Any
) -> None:
    setup_world(k8s_server)
    clock = Clock()
    rec = reconciler(k8s_api_client, clock)
    _run(rec, k8s_server, k8s_api_client, clock, 16, slow=SLOW)
    reg = rec.metrics.registry

    def sample(name: str, **labels: str) -> float:
        return reg.get_sample_value(name, labels) or 0.0

    assert sample("pacekeeper_actions_total", action="taintNode", result="applied") == 1
    assert sample("pacekeeper_actions_total", action="cordonNode", result="applied") == 1
    assert (
        sample(
            "pacekeeper_decisions_total",
            verdict="act",
            action="taintNode",
            reason="BelowThreshold",
            mode="enforce",
        )
        == 1
    )
    assert sample("pacekeeper_reconcile_seconds_count") == 16
    assert sample("pacekeeper_time_to_act_seconds_count") >= 2


def test_persisted_state_drops_what_the_core_dropped(
    k8s_server: RunningServer, k8s_api_client: Any
) -> None:
    setup_world(k8s_server)
    clock = Clock()
    rec = reconciler(k8s_api_client, clock, "observe")
    seq = _run(rec, k8s_server, k8s_api_client, clock, 1, slow=SLOW)
    assert "5" in controller_state(k8s_server)["streaks"]
    _run(rec, k8s_server, k8s_api_client, clock, 2, slow={}, start_seq=seq)
    # A merge patch that only sent the new state would have kept rank 5's streak: a
    # restarted controller would then resume a streak that had ended.
    assert controller_state(k8s_server).get("streaks", {}) == {}


def test_a_refused_action_records_the_servers_status_and_message(
    k8s_server: RunningServer, k8s_api_client: Any
) -> None:
    setup_world(k8s_server)
    refusal = 'nodes "n1" is forbidden: cannot patch'
    k8s_server.inject(
        Fault(status=403, reason="Forbidden", verb="patch", plural="nodes", times=100,
              message=refusal)
    )  # fmt: skip
    clock = Clock()
    rec = reconciler(k8s_api_client, clock)
    _run(rec, k8s_server, k8s_api_client, clock, 8, slow=SLOW)

    assert taints(k8s_server, "n1") == []
    records = controller_status(k8s_server)["decisions"]
    failed = [d for d in records if d["reason"] == "ActionFailed"]
    assert failed and failed[0]["action"] == "taintNode"
    assert failed[0]["evidence"]["httpStatus"] == 403
    assert "cannot patch" in failed[0]["evidence"]["serverMessage"]


def test_the_display_is_rewritten_when_decisions_change_or_its_observation_is_old(
    k8s_server: RunningServer, k8s_api_client: Any
) -> None:
    """Each status PATCH of the report costs the API server as much as the reporter's
    own: healthy reports that change no decision leave the display alone until its
    ``observedAt`` is DISPLAY_REFRESH_S old; a new decision is shown at once."""
    setup_world(k8s_server)
    clock = Clock()
    rec = reconciler(k8s_api_client, clock)

    def display_writes() -> int:
        patches = k8s_server.history.find(verb="patch", plural="stragglerreports", status=200)
        return sum(1 for p in patches if "controller" in ((p.body or {}).get("status") or {}))

    # Past the warm-up: the job's decision settles on "hold Healthy" (shown at once).
    seq = _run(rec, k8s_server, k8s_api_client, clock, 2, slow={})
    first = controller_status(k8s_server)
    assert first["lastDecision"]["reason"] == "Healthy"
    shown_at = datetime.fromisoformat(first["observedAt"])
    writes = display_writes()
    # More healthy reports, 30 s apart: none rewrites it while its observation is young.
    quiet = 0
    while (clock() - shown_at).total_seconds() < DISPLAY_REFRESH_S:
        seq = _run(rec, k8s_server, k8s_api_client, clock, 1, slow={}, start_seq=seq)
        quiet += 1
    assert quiet >= 8
    assert display_writes() == writes
    assert controller_status(k8s_server) == first
    # The first one DISPLAY_REFRESH_S after it: rewritten with what it saw.
    seq = _run(rec, k8s_server, k8s_api_client, clock, 1, slow={}, start_seq=seq)
    assert display_writes() == writes + 1
    assert controller_status(k8s_server)["observedSequence"] == seq - 1
    # A slow rank: each new decision (the streak, then notify) is shown at once.
    writes = display_writes()
    for _ in range(3):
        seq = _run(rec, k8s_server, k8s_api_client, clock, 1, slow=SLOW, start_seq=seq)
        shown = controller_status(k8s_server)
        assert shown["observedSequence"] == seq - 1
        assert display_writes() == writes + 1
        writes += 1
        if shown["lastDecision"].get("action") == "notify":
            break
    assert shown["lastDecision"] == {
        "verdict": "act", "action": "notify", "reason": "BelowThreshold",
        "decidedAt": shown["lastDecision"]["decidedAt"],
    }  # fmt: skip


def test_kernel_counts_of_each_report_are_counted_once(
    k8s_server: RunningServer, k8s_api_client: Any
) -> None:
    # A job's report is reconciled again and again (watch events, timers); the metric
    # of its kernel counts grows by a report's figures once, when its sequence is new.
    from pacekeeper.detector.score_report import KernelTiming

    setup_world(k8s_server)
    clock = Clock()
    rec = reconciler(k8s_api_client, clock, mode="observe")
    out = sink(k8s_api_client)
    reg = rec.metrics.registry

    def sample(kind: str) -> float:
        return reg.get_sample_value("pacekeeper_kernel_records_total", {"kind": kind}) or 0.0

    for seq, dropped in enumerate((0, 7, 3)):
        timing = KernelTiming(
            backend="cupti", attributed_records=1000, held_records=2, dropped_records=dropped
        )
        out.send(report(seq, clock(), {}).model_copy(update={"kernel_timing": timing}))
        for _ in range(3):  # the same report, reconciled three times
            rec.reconcile_job(KEY)
            clock.advance(5)
        clock.advance(15)
    assert sample("attributed") == 3000
    assert sample("held") == 6
    assert sample("dropped") == 10
    assert sample("unattributed") == 0 and sample("lostMarkers") == 0
