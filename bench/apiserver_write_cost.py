"""What each of the controller's and reporter's requests costs a real kube-apiserver.

Starts the real-server tier's kube-apiserver 1.20.2 and etcd (bench/_real_world.py),
makes one job of 256 ranks (32 pods on 32 nodes) and its StragglerReport through the
real reporter sink, then sends N requests of each kind one after another and reads the
CPU time kube-apiserver and etcd spent (/proc/<pid>/stat) per request: the reporter's
status PATCH of a whole 256-rank report, the controller's status PATCH of its display
block only, a GET of the report, a GET and PUT of a 6 kB state ConfigMap. The server
decodes, validates and encodes the whole object on every write to it, so a small patch
of a large object costs as much as a large one: why the controller writes its display
only when a decision changes (docs/operator.md).

Run: .venv/bin/python bench/apiserver_write_cost.py [--requests 150]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _real_world as rw
from _table import emit

GROUP, VERSION, PLURAL = "pacekeeper.dev", "v1alpha1", "stragglerreports"
RANKS = 256
RANKS_PER_POD = 8


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--requests", type=int, default=150)
    args = ap.parse_args()
    import kubernetes

    from pacekeeper.detector.reporters.kubernetes import KubernetesStatusSink
    from pacekeeper.detector.score_report import JobIdentity, Platform, RankScores, ScoreReport

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        cluster = rw.start(Path(tmp))
        try:
            rw.build(
                cluster, "default", jobs=1, pods_per_job=RANKS // RANKS_PER_POD,
                job_name=lambda i: f"job-{i:04d}",
                node_name=lambda i, k: f"n-{i:04d}-{k:02d}",
            )  # fmt: skip
            pids = rw.server_pids(cluster)
            api = cluster.api_client()
            sink = KubernetesStatusSink(
                namespace="default", name="job-0000", incarnation="b", api_client=api,
                pod_name="job-0000-0",
            )  # fmt: skip
            ranks = [
                RankScores(rank=r, node=f"n-0000-{r // RANKS_PER_POD:02d}",
                           pod=f"job-0000-{r // RANKS_PER_POD}", gpu_relative=0.99,
                           gpu_individual=0.98, section_samples=100, kernel_samples=1000)
                for r in range(RANKS)
            ]  # fmt: skip
            report = ScoreReport.build(
                job=JobIdentity(platform=Platform.KUBERNETES, namespace="default",
                                name="job-0000"),
                sequence=0, generated_at=datetime.now(UTC), window_s=30.0, ranks=ranks,
            )  # fmt: skip
            sink.send(report)
            custom = kubernetes.client.CustomObjectsApi(api)
            core = kubernetes.client.CoreV1Api(api)
            obj = custom.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "job-0000")
            size = len(json.dumps(obj))
            display = {"decisions": [{"verdict": "hold", "reason": "Healthy",
                                      "decidedAt": "2026-12-01T00:00:00Z"}] * 5}  # fmt: skip
            core.create_namespaced_config_map(
                "default", {"metadata": {"name": "state"}, "data": {"state": "x" * 6000}}
            )

            def state_write(i: int) -> None:
                cm = core.read_namespaced_config_map("state", "default")
                cm.data = {"state": "x" * 6000 + str(i)}
                core.replace_namespaced_config_map("state", "default", cm)

            kinds: list[tuple[str, Callable[[int], Any]]] = [
                ("idle (20 ms sleep)", lambda _i: time.sleep(0.02)),
                ("reporter: status PATCH, 256 ranks",
                 lambda i: sink.send(report.model_copy(update={"sequence": i + 1}))),
                ("controller: display PATCH",
                 lambda i: custom.patch_namespaced_custom_object_status(
                     GROUP, VERSION, "default", PLURAL, "job-0000",
                     {"status": {"controller": {**display, "observedSequence": i}}})),
                ("controller: report GET",
                 lambda _i: custom.get_namespaced_custom_object(
                     GROUP, VERSION, "default", PLURAL, "job-0000")),
                ("controller: state ConfigMap GET+PUT (6 kB)", state_write),
            ]  # fmt: skip
            for name, call in kinds:
                time.sleep(1.0)
                a0, e0, t0 = _cpu_s(pids["kube-apiserver"]), _cpu_s(pids["etcd"]), time.monotonic()
                for i in range(args.requests):
                    call(i)
                wall = time.monotonic() - t0
                rows.append({
                    "request": name,
                    "apiserver ms": 1000 * (_cpu_s(pids["kube-apiserver"]) - a0) / args.requests,
                    "etcd ms": 1000 * (_cpu_s(pids["etcd"]) - e0) / args.requests,
                    "wall ms": 1000 * wall / args.requests,
                })  # fmt: skip
        finally:
            cluster.close()
    emit(
        "apiserver_write_cost",
        rows,
        title=f"kube-apiserver 1.20.2 CPU per request (report object {size:,} bytes)",
        meta={"method": __doc__.split("\n\n")[1] if __doc__ else "", "requests": args.requests,
              "object_bytes": size, "ranks": RANKS},
    )  # fmt: skip


if __name__ == "__main__":
    main()
