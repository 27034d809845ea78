"""Training step time while the Kubernetes reporter publishes into a healthy, failing,
unreachable or hanging API server: the training loop must not notice.

One process, one training thread (torch matmuls, one intra-op thread, a few ms a step),
a report submitted every 10 steps (a 64-rank report, as rank 0 of a 64-rank job would).
Conditions run in alternating blocks (A/B interleaving cancels the machine's drift; this
machine is shared): no reporter; healthy harness; every status patch answered 500; a
port where nothing listens; a server that accepts and never answers in time (requests
time out after 0.25 s). Each block gets a fresh publisher, closed without waiting.

Run: .venv/bin/python bench/transport_step_time.py [rounds]
"""

from __future__ import annotations

import logging
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "k8s"))  # the harness

from _table import emit

from pacekeeper.controller.simulation.synthetic import synthetic_report
from pacekeeper.detector.reporters import Backoff, Publisher
from pacekeeper.detector.reporters.kubernetes import KubernetesStatusSink
from pacekeeper.detector.score_report import JobIdentity, Platform

STEPS_PER_BLOCK = 100
REPORT_EVERY = 10
CONDITIONS = ("no reporter", "healthy", "HTTP 500 on every patch", "unreachable", "hanging")


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 6
    import kubernetes
    import torch
    from harness import Fault, RunningServer, client_configuration
    from reporter_helpers import CRD_PATH

    torch.set_num_threads(1)
    # The reporter's "failed, will retry" warnings (once per cause and publisher) are
    # expected here; show them compactly.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    server = RunningServer().start()
    hanging = RunningServer().start()
    server.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    server.apply_yaml(CRD_PATH)
    job = JobIdentity(platform=Platform.KUBERNETES, namespace="default", name="bench")
    reports = [synthetic_report(job=job, sequence=s, world_size=64) for s in range(10_000)]
    a, b = torch.randn(192, 192), torch.randn(192, 192)
    urls = {"healthy": server.url, "HTTP 500 on every patch": server.url,
            "unreachable": "http://127.0.0.1:9", "hanging": hanging.url}  # fmt: skip
    hanging.inject(Fault(status=None, delay_s=5.0, times=10**9))
    steps: dict[str, list[float]] = {c: [] for c in CONDITIONS}
    counters: dict[str, dict[str, Any]] = {c: {} for c in CONDITIONS}
    seq = 0
    try:
        for _ in range(rounds):
            for cond in CONDITIONS:
                pub = None
                if cond != "no reporter":
                    if cond == "HTTP 500 on every patch":
                        server.faults.clear()
                        server.inject(Fault(status=500, times=10**9, verb="patch"))
                    else:
                        server.faults.clear()
                    sink = KubernetesStatusSink(
                        namespace="default", name="bench", incarnation="bench",
                        api_client=kubernetes.client.ApiClient(client_configuration(urls[cond])),
                        connect_timeout_s=0.25, read_timeout_s=0.25,
                    )  # fmt: skip
                    pub = Publisher(sink, backoff=Backoff(base_s=0.05, max_s=1.0))
                for step in range(STEPS_PER_BLOCK):
                    t0 = time.perf_counter()
                    for _ in range(40):
                        a @ b
                    if pub is not None and step % REPORT_EVERY == 0:
                        pub.submit(reports[seq])
                        seq += 1
                    steps[cond].append(time.perf_counter() - t0)
                if pub is not None:
                    st = pub.stats()
                    c = counters[cond]
                    for key in ("submitted", "published", "send_errors", "dropped_oldest"):
                        c[key] = c.get(key, 0) + getattr(st, key)
                    c["causes"] = sorted(set(c.get("causes", [])) | set(st.errors_by_cause))
                    pub.close(timeout_s=0.0)
    finally:
        server.stop()
        hanging.stop()
    base = statistics.median(steps["no reporter"])
    rows = []
    for cond in CONDITIONS:
        values = sorted(steps[cond])
        c = counters[cond]
        rows.append(
            {
                "condition": cond,
                "steps": len(values),
                "median_ms": statistics.median(values) * 1e3,
                "p99_ms": values[int(len(values) * 0.99)] * 1e3,
                "median_vs_none": statistics.median(values) / base,
                "reports_submitted": c.get("submitted", 0),
                "published": c.get("published", 0),
                "send_errors": c.get("send_errors", 0),
                "error_causes": ", ".join(c.get("causes", [])) or "-",
            }
        )
    emit(
        "transport_step_time",
        rows,
        title="Training step time while reporting to Kubernetes (ms)",
        meta={"rounds": rounds, "steps_per_block": STEPS_PER_BLOCK, "report_every": REPORT_EVERY},
    )


if __name__ == "__main__":
    main()
