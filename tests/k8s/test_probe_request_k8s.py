"""``confirm: probe`` through the API: the controller asks the job for its probe in the
StragglerReport's ``spec.control``, where the job's reporting rank reads it, once per
request however often it reconciles (a controller restart included), and taints only
after the job's answer singles out the slow rank (issue 18)."""

from __future__ import annotations

from typing import Any

from harness import RunningServer
from operator_world import (
    CONTROLLER_NS,
    JOB,
    NAMESPACE,
    POLICY_YAML,
    Clock,
    report,
    setup_world,
    sink,
    taints,
)

from pacekeeper.controller.actuators.kubernetes_actuators import KubernetesActuators
from pacekeeper.controller.actuators.retries import RetrySettings
from pacekeeper.controller.core.ids import JobKey
from pacekeeper.controller.core.marks import TAINT_KEY
from pacekeeper.controller.core.policy import load_policy_document
from pacekeeper.controller.runtime.reconcile import Reconciler
from pacekeeper.detector.score_report import ProbeEvidence, RankScores, ScoreReport

KEY = JobKey(f"{NAMESPACE}/{JOB}")
SLOW = {5: 0.5}  # rank 5 lives on n1


def _reconciler(api_client: Any, clock: Clock) -> Reconciler:
    text = POLICY_YAML.format(mode="enforce").replace(
        "    ladder:\n", "    confirm: probe\n    probe: {timeoutS: 600}\n    ladder:\n"
    )
    acts = KubernetesActuators(
        api_client, instance="test", settings=RetrySettings(request_timeout_s=1.0),
        sleep=lambda _s: None,
    )  # fmt: skip
    return Reconciler(
        api_client,
        load_policy_document(text, "probe-policy"),
        namespace=CONTROLLER_NS,
        clock=clock,
        actuators=acts,
    )


def _answered(r: ScoreReport, probe_id: str, slow_rate: float) -> ScoreReport:
    ranks = [
        RankScores.model_validate(
            {
                **x.model_dump(),
                "probe": ProbeEvidence(
                    id=probe_id, device="cuda", gemm_tflops=slow_rate if x.rank == 5 else 780.0
                ),
            }
        )
        for x in r.ranks
    ]
    return ScoreReport.build(
        job=r.job, sequence=r.sequence, generated_at=r.generated_at, window_s=r.window_s,
        ranks=ranks,
    )  # fmt: skip


def _probe_spec(server: RunningServer) -> Any:
    obj = server.read("pacekeeper.dev/v1alpha1", "StragglerReport", JOB, namespace=NAMESPACE)
    return ((obj.get("spec") or {}).get("control") or {}).get("probe")


def test_the_request_is_written_once_and_the_answer_lets_the_taint_through(
    k8s_server: RunningServer, k8s_api_client: Any
) -> None:
    setup_world(k8s_server)
    clock = Clock()
    out = sink(k8s_api_client)
    rec = _reconciler(k8s_api_client, clock)
    seq = 0
    for _ in range(6):  # notify, then the taint waits for the probe
        out.send(report(seq, clock(), SLOW))
        rec.reconcile_job(KEY)
        clock.advance(30.0)
        seq += 1
    asked = _probe_spec(k8s_server)
    assert asked is not None and asked["id"].startswith("p")
    assert taints(k8s_server, "n1") == []
    writes = k8s_server.history.find(verb="patch", plural="stragglerreports", status=200)
    spec_writes = [w for w in writes if "spec" in (w.body or {})]
    assert len(spec_writes) == 1, [w.body for w in writes]
    # A restarted controller asks the same question, and writes nothing new.
    rec = _reconciler(k8s_api_client, clock)
    out.send(report(seq, clock(), SLOW))
    rec.reconcile_job(KEY)
    clock.advance(30.0)
    seq += 1
    assert _probe_spec(k8s_server) == asked
    writes = k8s_server.history.find(verb="patch", plural="stragglerreports", status=200)
    assert len([w for w in writes if "spec" in (w.body or {})]) == 1
    # The job's next report carries every rank's probe: rank 5's GPU is slow.
    out.send(_answered(report(seq, clock(), SLOW), asked["id"], 90.0))
    rec.reconcile_job(KEY)
    assert [t["key"] for t in taints(k8s_server, "n1")] == [TAINT_KEY]
    assert all(taints(k8s_server, n) == [] for n in ("n0", "n2"))
