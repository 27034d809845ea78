"""The trust attacks against the controller as it ships: a `pacekeeper operator run`
process in enforce mode, the API harness, and writers with only what a training pod may
do (create StragglerReports, patch their status). tests/k8s/test_trust_attacks.py has
each attack alone against the reconciler; here they run at once against the process."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from harness import RunningServer, eventually
from harness.objects import node
from operator_world import (
    CONTROLLER_NS,
    JOB,
    NAMESPACE,
    NODES,
    controller_state,
    controller_status,
    cordoned,
    report,
    setup_world,
    sink,
    taints,
)
from test_operator_process import FAST_POLICY, kubeconfig, operator_process, stop_all
from test_trust_attacks import intrude

from pacekeeper.controller.core.ids import JobKey
from pacekeeper.controller.runtime.state_store import job_state_name
from pacekeeper.detector.reporters.kubernetes import KubernetesStatusSink
from pacekeeper.detector.score_report import JobIdentity, Platform, RankScores, ScoreReport

GROUP, VERSION, PLURAL = "pacekeeper.dev", "v1alpha1", "stragglerreports"
GHOSTS = ("ghost-0", "ghost-1", "ghost-2")
MERGE = "application/merge-patch+json"


def _ghost(name: str, slow_node: str, seq: int) -> ScoreReport:
    ranks = [
        RankScores(rank=r, node=slow_node if r == 0 else "n0", gpu_relative=0.3 if r == 0 else 1.0,
                   gpu_individual=0.3 if r == 0 else 1.0, section_samples=100,
                   kernel_samples=1000)
        for r in range(4)
    ]  # fmt: skip
    return ScoreReport.build(
        job=JobIdentity(platform=Platform.KUBERNETES, namespace=NAMESPACE, name=name),
        sequence=seq, generated_at=datetime.now(UTC), window_s=30.0, ranks=ranks,
    )  # fmt: skip


def _lying(seq: int) -> ScoreReport:
    """The real job's report with the slow rank's node claimed to be infra-db."""
    base = report(seq, datetime.now(UTC), {5: 0.5})
    ranks = [r.model_copy(update={"node": "infra-db", "pod": None}) if r.rank == 5 else r
             for r in base.ranks]  # fmt: skip
    return ScoreReport.build(job=base.job, sequence=seq, generated_at=base.generated_at,
                             window_s=30.0, ranks=ranks)  # fmt: skip


@pytest.fixture
def attackers(k8s_server: RunningServer, k8s_api_client: Any) -> Iterator[dict[str, bool]]:
    """Every 0.3 s: three ghosts (opted in by their own annotation), the real job lying
    about a rank's node, and the job's rewrite of the controller's status block."""
    from kubernetes import client

    setup_world(k8s_server)
    k8s_server.apply(node("infra-db"))
    custom = client.CustomObjectsApi(k8s_api_client)
    for g in GHOSTS:  # made by someone with `create` (no reporter has it: issue 40)
        intrude(k8s_api_client, g)
    ghosts = {g: KubernetesStatusSink(namespace=NAMESPACE, name=g, incarnation="g",
                                      api_client=k8s_api_client) for g in GHOSTS}  # fmt: skip
    job = sink(k8s_api_client)
    truthful = {"now": False}
    stop = threading.Event()

    def loop() -> None:
        seq = 0
        while not stop.is_set():
            for i, (name, out) in enumerate(ghosts.items()):
                out.send(_ghost(name, NODES[i], seq))
                if seq == 0:
                    custom.patch_namespaced_custom_object(
                        GROUP, VERSION, NAMESPACE, PLURAL, name,
                        {"metadata": {"annotations": {"pacekeeper.dev/detect": "true"}}},
                        _content_type=MERGE,
                    )  # fmt: skip
            job.send(report(seq, datetime.now(UTC), {5: 0.5}) if truthful["now"] else _lying(seq))
            if seq > 0 and not truthful["now"]:
                forged = {"state": {"streaks": "forged"}, "decisions": []}
                custom.patch_namespaced_custom_object_status(
                    GROUP, VERSION, NAMESPACE, PLURAL, JOB, {"status": {"controller": forged}},
                    _content_type=MERGE,
                )  # fmt: skip
            seq += 1
            stop.wait(0.3)

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    yield truthful
    stop.set()
    t.join(5)


def _reasons(server: RunningServer, name: str) -> set[str]:
    obj = server.read(f"{GROUP}/{VERSION}", "StragglerReport", name, namespace=NAMESPACE)
    records = ((obj or {}).get("status") or {}).get("controller", {}).get("decisions") or []
    return {str(d.get("reason")) for d in records}


@pytest.mark.slow
def test_ghosts_lies_and_state_rewrites_move_nothing_and_the_real_fault_is_still_acted_on(
    k8s_server: RunningServer, tmp_path: Path, attackers: dict[str, bool]
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(FAST_POLICY.format(mode="enforce"))
    kc = kubeconfig(k8s_server.url, tmp_path / "kubeconfig")
    proc = operator_process(policy, kc, "a", tmp_path / "a.log")
    try:
        eventually(lambda: all("UnboundReport" in _reasons(k8s_server, g) for g in GHOSTS),
                   timeout_s=60)  # fmt: skip
        eventually(lambda: "UntrustedReport" in _reasons(k8s_server, JOB), timeout_s=60)
        time.sleep(3)  # a dozen more reports of each kind, reconciled as they come
        assert k8s_server.history.find(verb="patch", plural="nodes") == []
        assert proc.poll() is None, "the forged status block never makes reconcile fail"
        for g in GHOSTS:
            state = job_state_name(JobKey(f"{NAMESPACE}/{g}"))
            assert k8s_server.read("v1", "ConfigMap", state, namespace=CONTROLLER_NS) is None
        assert "streaks" not in controller_state(k8s_server) or isinstance(
            controller_state(k8s_server)["streaks"], dict
        )

        attackers["now"] = True  # the job tells the truth: its slow node is acted on
        eventually(lambda: cordoned(k8s_server, "n1"), timeout_s=60)
        assert [n for n in (*NODES, "infra-db") if taints(k8s_server, n)] == ["n1"]
        assert not cordoned(k8s_server, "infra-db")
        reasons = {d["reason"] for d in controller_status(k8s_server)["decisions"]}
        assert "BudgetExhausted" not in reasons and "BreakerOpen" not in reasons
    finally:
        stop_all([proc])
    log = (tmp_path / "a.log").read_text()
    assert "StateError" not in log and "Traceback" not in log
