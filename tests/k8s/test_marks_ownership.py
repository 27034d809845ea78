"""A human's mark is never undone (issue 40): after a human uncordons a node the
controller had cordoned, the node is the human's for good. A later maintenance cordon
survives the next slow episode on that node and that episode's recovery."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest
from harness import Fault, RunningServer
from operator_world import (
    JOB,
    NAMESPACE,
    Clock,
    controller_status,
    cordoned,
    reconciler,
    report,
    setup_world,
    sink,
    taints,
)

from pacekeeper.controller.actuators.kubernetes_actuators import KubernetesActuators
from pacekeeper.controller.core.ids import JobKey
from pacekeeper.controller.core.marks import CORDON_ANNOTATION, TAINT_ANNOTATION, TAINT_KEY
from pacekeeper.controller.runtime.reconcile import Reconciler

KEY = JobKey(f"{NAMESPACE}/{JOB}")
SLOW = {5: 0.5}  # rank 5 lives on n1
DAY_S = 86400.0


def _run(
    rec: Reconciler, api_client: Any, clock: Clock, steps: int, *, slow: dict[int, float],
    seq: int, applied: list[str] | None = None,
) -> int:  # fmt: skip
    """Publish a report, reconcile, advance the clock; ``applied`` collects what the
    actuators answered (``cordonNode node/n1 Undone``)."""
    out = sink(api_client)
    for _ in range(steps):
        out.send(report(seq, clock(), slow))
        result = rec.reconcile_job(KEY)
        if applied is not None and result is not None:
            applied.extend(result.applied)
        clock.advance(30.0)
        seq += 1
    return seq


def _set_unschedulable(server: RunningServer, name: str, value: bool) -> None:
    """As ``kubectl cordon``/``uncordon`` do: the spec field only, annotations untouched."""
    obj = server.read("v1", "Node", name)
    obj["spec"]["unschedulable"] = value
    server.apply(obj)


def _annotations(server: RunningServer, name: str) -> dict[str, str]:
    return dict(server.read("v1", "Node", name)["metadata"].get("annotations") or {})


def test_a_maintenance_cordon_after_a_human_uncordon_survives_the_next_episode(
    k8s_server: RunningServer, k8s_api_client: Any
) -> None:
    setup_world(k8s_server)
    clock = Clock()
    rec = reconciler(k8s_api_client, clock)
    seq = _run(rec, k8s_api_client, clock, 16, slow=SLOW, seq=0)
    assert cordoned(k8s_server, "n1")

    # A human uncordons n1; the controller sees it and hands the cordon to the human.
    _set_unschedulable(k8s_server, "n1", False)
    seq = _run(rec, k8s_api_client, clock, 10, slow={}, seq=seq)
    assert CORDON_ANNOTATION not in _annotations(k8s_server, "n1"), (
        "our note on a node we no longer cordon is removed"
    )

    # Days later a human cordons n1 for maintenance; n1 is slow again, then recovers.
    clock.advance(2 * DAY_S)
    _set_unschedulable(k8s_server, "n1", True)
    applied: list[str] = []
    seq = _run(rec, k8s_api_client, clock, 16, slow=SLOW, seq=seq, applied=applied)
    seq = _run(rec, k8s_api_client, clock, 16, slow={}, seq=seq, applied=applied)

    assert cordoned(k8s_server, "n1"), "the maintenance cordon is the human's"
    assert not [line for line in applied if line.startswith("cordonNode")], applied
    decisions = controller_status(k8s_server)["decisions"]
    assert not [d for d in decisions if d["verdict"] == "undo" and d["action"] == "cordonNode"]


def test_a_note_left_from_before_never_makes_a_maintenance_cordon_ours(
    k8s_server: RunningServer, k8s_api_client: Any
) -> None:
    """The note outlived our cordon where nothing cleared it (a release before this one,
    a controller without the permission then): no record of ours holds it."""
    setup_world(k8s_server)
    clock = Clock()
    old = KubernetesActuators(k8s_api_client).provenance(
        str(KEY), "BelowThreshold", "gpu", clock() - timedelta(days=3)
    )
    n1 = k8s_server.read("v1", "Node", "n1")
    n1["spec"]["unschedulable"] = True  # the human's maintenance cordon
    n1["metadata"]["annotations"] = {CORDON_ANNOTATION: old.to_annotation()}
    k8s_server.apply(n1)
    rec = reconciler(k8s_api_client, clock)
    applied: list[str] = []
    seq = _run(rec, k8s_api_client, clock, 16, slow=SLOW, seq=0, applied=applied)
    _run(rec, k8s_api_client, clock, 16, slow={}, seq=seq, applied=applied)

    assert cordoned(k8s_server, "n1"), "the maintenance cordon is the human's"
    assert not [line for line in applied if "node/n1" in line], applied
    held = [d for d in controller_status(k8s_server)["decisions"] if d["reason"] == "NotOurs"]
    assert held


def test_a_taint_a_human_edited_survives_the_recovery(
    k8s_server: RunningServer, k8s_api_client: Any
) -> None:
    setup_world(k8s_server)
    clock = Clock()
    rec = reconciler(k8s_api_client, clock)
    seq = 0
    while not taints(k8s_server, "n1"):
        seq = _run(rec, k8s_api_client, clock, 1, slow=SLOW, seq=seq)
        assert seq < 16
    # As `kubectl taint nodes n1 pacekeeper.dev/straggler=maintenance:NoSchedule --overwrite`.
    n1 = k8s_server.read("v1", "Node", "n1")
    n1["spec"]["taints"] = [{"key": TAINT_KEY, "value": "maintenance", "effect": "NoSchedule"}]
    k8s_server.apply(n1)
    seq = _run(rec, k8s_api_client, clock, 20, slow={}, seq=seq)

    assert taints(k8s_server, "n1") == n1["spec"]["taints"]
    assert TAINT_ANNOTATION not in _annotations(k8s_server, "n1")
    assert not cordoned(k8s_server, "n1"), "no later step of ours on a node a human took"


def test_without_permission_to_patch_nodes_the_note_stays_and_a_log_line_says_so(
    k8s_server: RunningServer, k8s_api_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    setup_world(k8s_server)
    clock = Clock()
    rec = reconciler(k8s_api_client, clock)
    seq = _run(rec, k8s_api_client, clock, 16, slow=SLOW, seq=0)
    assert cordoned(k8s_server, "n1")

    _set_unschedulable(k8s_server, "n1", False)
    k8s_server.inject(Fault(status=403, reason="Forbidden", verb="patch", plural="nodes"))
    with caplog.at_level(logging.WARNING):
        seq = _run(rec, k8s_api_client, clock, 10, slow={}, seq=seq)
    assert CORDON_ANNOTATION in _annotations(k8s_server, "n1")
    assert [r for r in caplog.records if r.getMessage() == "stale mark note left on node"]

    # The note stays, yet the human's later maintenance cordon is still not ours.
    clock.advance(2 * DAY_S)
    _set_unschedulable(k8s_server, "n1", True)
    applied: list[str] = []
    seq = _run(rec, k8s_api_client, clock, 16, slow=SLOW, seq=seq, applied=applied)
    _run(rec, k8s_api_client, clock, 16, slow={}, seq=seq, applied=applied)
    assert cordoned(k8s_server, "n1"), "the maintenance cordon is the human's"
    assert not [line for line in applied if line.startswith("cordonNode")], applied
