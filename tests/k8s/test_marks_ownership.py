"""A human's mark is never undone (issue 40): after a human uncordons a node the
controller had cordoned, the node is the human's for good. A later maintenance cordon
survives the next slow episode on that node and that episode's recovery."""

from __future__ import annotations

from typing import Any

from harness import RunningServer
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
)

from pacekeeper.controller.core.ids import JobKey
from pacekeeper.controller.core.marks import CORDON_ANNOTATION
from pacekeeper.controller.runtime.reconcile import Reconciler

KEY = JobKey(f"{NAMESPACE}/{JOB}")
SLOW = {5: 0.5}  # rank 5 lives on n1
DAY_S = 86400.0


def _run(
    rec: Reconciler, api_client: Any, clock: Clock, steps: int, *, slow: dict[int, float],
    seq: int,
) -> int:  # fmt: skip
    out = sink(api_client)
    for _ in range(steps):
        out.send(report(seq, clock(), slow))
        rec.reconcile_job(KEY)
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


def _node_lines(rec_result: Any) -> list[str]:
    return [line for line in rec_result if "node/n1" in line]


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
    seq = _run(rec, k8s_api_client, clock, 16, slow=SLOW, seq=seq)
    seq = _run(rec, k8s_api_client, clock, 16, slow={}, seq=seq)

    assert cordoned(k8s_server, "n1"), "the maintenance cordon is the human's"
    decisions = controller_status(k8s_server)["decisions"]
    assert not [d for d in decisions if d["verdict"] == "undo" and d["action"] == "cordonNode"]
