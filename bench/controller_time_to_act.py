"""Time to act: from a job's status update to the controller's first action API call.

The real controller (`pacekeeper operator run`, Kopf + Lease election, as the chart starts
it) runs as a separate process against the test API harness over HTTP. N jobs, each on
its own node, report healthy scores; then every job publishes a report that crosses its
policy's line (persistence of one report, no warm-up), all at once — the worst case for
a controller that reconciles one job at a time. Per job: t0 = when the reporter's status
PATCH reached the server, t1 = when the job's first action call (the notify Event POST)
reached it. Both stamps come from the harness's request log (CLOCK_MONOTONIC).

Run: .venv/bin/python bench/controller_time_to_act.py [jobs ...]   (default: 10 100)
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests" / "k8s"))  # the harness

from _table import emit  # noqa: E402

POLICY = """
apiVersion: pacekeeper.dev/v1alpha1
kind: RemediationPolicies
mode: enforce
defaultPolicy: gpu
policies:
  gpu:
    score: {kind: gpuRelative}
    thresholds: {act: 0.75, recover: 0.9}
    persistence: {consecutiveReports: 1, minSamples: 1}
    warmup: {afterJobStartS: 0, afterActionS: 0}
    ladder:
      notify: {enabled: true, timeoutS: 600}
"""


def _report(job: str, node: str, seq: int, score: float) -> Any:
    from pacekeeper.detector.score_report import JobIdentity, Platform, RankScores, ScoreReport

    ranks = [
        RankScores(rank=r, node=node, pod=f"{job}-0", gpu_relative=score if r == 1 else 0.99,
                   section_samples=100, kernel_samples=1000)
        for r in range(4)
    ]  # fmt: skip
    return ScoreReport.build(
        job=JobIdentity(platform=Platform.KUBERNETES, namespace="default", name=job),
        sequence=seq, generated_at=datetime.now(UTC), window_s=30.0, ranks=ranks,
    )  # fmt: skip


def run(jobs: int) -> dict[str, Any]:
    import kubernetes
    from harness import eventually, start_server
    from harness.clients import client_configuration
    from harness.objects import node, pod
    from reporter_helpers import CRD_PATH
    from test_operator_process import kubeconfig

    from pacekeeper.detector.reporters.kubernetes import KubernetesStatusSink

    with start_server() as server, tempfile.TemporaryDirectory() as tmp:
        server.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
        server.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "pk"}})
        server.apply_yaml(CRD_PATH)
        api = kubernetes.client.ApiClient(client_configuration(server.url))
        names = [f"job-{i:03d}" for i in range(jobs)]
        sinks = {}
        for i, job in enumerate(names):
            server.apply(node(f"node-{i:03d}"))
            server.apply(
                pod(f"{job}-0", node_name=f"node-{i:03d}",
                    labels={"batch.kubernetes.io/job-name": job},
                    annotations={"pacekeeper.dev/detect": "true"})
            )  # fmt: skip
            sinks[job] = KubernetesStatusSink(
                namespace="default", name=job, incarnation="b", api_client=api
            )
            sinks[job].send(_report(job, f"node-{i:03d}", 0, 0.99))
        policy = Path(tmp) / "policy.yaml"
        policy.write_text(POLICY)
        kc = kubeconfig(server.url, Path(tmp) / "kubeconfig")
        log = Path(tmp) / "controller.log"
        proc = subprocess.Popen(
            [sys.executable, "-m", "pacekeeper.controller.cli", "operator", "run",
             "--policy", str(policy), "--kubeconfig", str(kc), "--namespace", "pk",
             "--identity", "bench", "--log-level", "warning"],
            stdout=log.open("wb"), stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
        try:
            # Steady state first: every job reconciled once on healthy data.
            eventually(
                lambda: all(
                    (server.read("pacekeeper.dev/v1alpha1", "StragglerReport", j, "default")
                     or {}).get("status", {}).get("controller")
                    for j in names
                ),
                timeout_s=120, poll_s=0.2,
            )  # fmt: skip
            time.sleep(1.0)
            for i, job in enumerate(names):
                sinks[job].send(_report(job, f"node-{i:03d}", 1, 0.4))

            def events() -> list[Any]:
                return server.history.find(method="POST", plural="events", status=201)

            eventually(lambda: len(events()) >= jobs, timeout_s=300, poll_s=0.2)
            patches: dict[str, float] = {}
            for r in server.history.find(plural="stragglerreports", subresource="status"):
                status = (r.body or {}).get("status") or {}
                # The reporter's patch carries the report; the controller's only its block.
                if r.method == "PATCH" and "0.4" in str(status.get("report")):
                    patches.setdefault(r.name, r.at)
            firsts: dict[str, float] = {}
            for r in events():
                job = (r.body.get("involvedObject") or {}).get("name")
                if job in patches and job not in firsts:
                    firsts[job] = r.at
        except BaseException:
            print(log.read_text()[-3000:], file=sys.stderr)
            raise
        finally:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
    lat = sorted(firsts[j] - patches[j] for j in firsts)
    q = statistics.quantiles(lat, n=100, method="inclusive") if len(lat) > 1 else lat * 99
    return {
        "jobs": jobs,
        "acted": len(lat),
        "p50_ms": 1000 * statistics.median(lat),
        "p90_ms": 1000 * q[89],
        "p99_ms": 1000 * q[98],
        "max_ms": 1000 * lat[-1],
        "goal_p99_ms": 1000.0,
    }


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [10, 100]
    rows = [run(n) for n in sizes]
    emit(
        "controller_time_to_act",
        rows,
        title="Status update -> first action API call (real operator process vs API harness)",
        meta={"method": __doc__.split("\n\n")[1] if __doc__ else ""},
    )


if __name__ == "__main__":
    main()
