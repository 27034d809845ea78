"""The reconciler feeds the per-job series: what a per-job dashboard panel reads."""

from __future__ import annotations

from typing import Any

from harness import RunningServer
from operator_world import JOB, NAMESPACE, Clock, reconciler, report, setup_world, sink

from pacekeeper.controller.core.ids import JobKey

KEY = JobKey(f"{NAMESPACE}/{JOB}")


def test_reconciles_show_the_jobs_worst_score_slow_ranks_and_actions(
    k8s_server: RunningServer, k8s_api_client: Any
) -> None:
    setup_world(k8s_server)
    clock = Clock()
    rec = reconciler(k8s_api_client, clock)
    out = sink(k8s_api_client)
    for seq in range(16):
        out.send(report(seq, clock(), {5: 0.5, 9: 0.8}))
        rec.reconcile_job(KEY)
        clock.advance(30)
    registry = rec.metrics.registry

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, {"job_key": KEY, **labels})

    assert value("pacekeeper_job_worst_score") == 0.5
    assert value("pacekeeper_job_ranks_below_act") == 1  # 0.8 is above act 0.75
    assert value("pacekeeper_job_act_threshold") == 0.75
    acted = {
        action: value("pacekeeper_job_actions_total", action=action, verdict="act")
        for action in ("notify", "taintNode", "cordonNode")
    }
    assert acted == {"notify": 1, "taintNode": 1, "cordonNode": 1}
