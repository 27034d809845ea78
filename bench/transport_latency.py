"""Publish latency: from ``generate_report`` to the report being readable by a reader.

Ray: through the ScoreBoard actor on a local Ray cluster, read back with ``latest``.
Kubernetes: through the StragglerReport status on the test API harness (real HTTP, the
official client), read back with a GET as a controller's cache would see it.
Real Detector on one gloo rank (4 sections), then synthetic reports of 1,024 and 16,384
ranks handed to the publisher the same way (a 16,384-rank job cannot run here).

Each sample: t0 before ``generate_report`` (or ``submit``), t1 when the reader first sees
that sequence (polling every 2 ms from another thread). Also shown: what the training
thread paid (``generate_report`` or ``submit`` returning).

Run: .venv/bin/python bench/transport_latency.py [samples]
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "k8s"))  # the harness

from _table import emit

from pacekeeper.controller.simulation.synthetic import synthetic_report
from pacekeeper.detector import Detector
from pacekeeper.detector.reporters import Backoff, make_publisher
from pacekeeper.detector.score_report import JobIdentity, Platform

SECTIONS = ("forward", "backward", "optimizer", "data")
POLL_S = 0.002


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass(frozen=True)
class Reader:
    """``probe`` is cheap (the sequence only) and is polled; ``fetch`` reads the whole
    report once, as a controller would after noticing a change."""

    probe: Callable[[], int | None]
    fetch: Callable[[], dict[str, Any] | None]


def _wait_readable(reader: Reader, sequence: int) -> float:
    deadline = time.perf_counter() + 30
    while time.perf_counter() < deadline:
        if reader.probe() == sequence:
            report = reader.fetch()
            assert report is not None and report["sequence"] == sequence
            return time.perf_counter()
        time.sleep(POLL_S)
    raise RuntimeError(f"sequence {sequence} never became readable")


def _row(transport: str, source: str, ranks: int, lat: list[float], paid: list[float]) -> dict:
    return {
        "transport": transport,
        "report": source,
        "ranks": ranks,
        "samples": len(lat),
        "p50_ms": statistics.median(lat) * 1e3,
        "p95_ms": _percentile(lat, 0.95) * 1e3,
        "max_ms": max(lat) * 1e3,
        "training_thread_p50_ms": statistics.median(paid) * 1e3,
    }


def _measure_detector(transport: str, publisher: Any, reader: Reader, samples: int) -> dict:
    Detector.add_report_listener(publisher.submit)
    lat, paid = [], []
    try:
        for _ in range(samples + 2):
            for name in SECTIONS:
                for _ in range(5):
                    with Detector.detection_section(name, profile_cuda=False):
                        pass
            t0 = time.perf_counter()
            Detector.generate_report()
            t_paid = time.perf_counter()
            latest = Detector.latest_score_report()
            assert latest is not None
            t1 = _wait_readable(reader, latest.sequence)
            lat.append(t1 - t0)
            paid.append(t_paid - t0)
    finally:
        Detector.remove_report_listener(publisher.submit)
    return _row(transport, "Detector, 1 gloo rank", 1, lat[2:], paid[2:])


def _measure_synthetic(
    *,
    transport: str,
    publisher: Any,
    reader: Reader,
    job: JobIdentity,
    ranks: int,
    samples: int,
    first_sequence: int,
) -> dict:
    lat, paid = [], []
    for i in range(samples):
        seq = first_sequence + i
        report = synthetic_report(job=job, sequence=seq, world_size=ranks, slow={ranks // 2: 0.4})
        t0 = time.perf_counter()
        publisher.submit(report)
        t_paid = time.perf_counter()
        lat.append(_wait_readable(reader, seq) - t0)
        paid.append(t_paid - t0)
    return _row(transport, "synthetic", ranks, lat, paid)


def _init_gloo() -> None:
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("gloo", rank=0, world_size=1)


def bench_ray(samples: int) -> list[dict]:
    import ray

    from pacekeeper.detector.reporters.ray_scoreboard import get_scoreboard

    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=100 * 1024**2,
             log_to_driver=False)  # fmt: skip
    rows = []
    try:
        board = get_scoreboard()
        Detector.initialize(report_time_interval=3600, kernel_timing="none")
        job_key = f"ray:{ray.get_runtime_context().get_job_id()}"

        def ray_reader(key: str) -> Reader:
            def probe() -> int | None:
                head = ray.get(board.head.remote(key))
                return None if head is None else int(head["sequence"])

            return Reader(probe, lambda: ray.get(board.latest.remote(key)))

        pub = make_publisher({"kind": "ray"}, env={})
        assert pub is not None
        rows.append(_measure_detector("ray", pub, ray_reader(job_key), samples))
        Detector.shutdown()
        for ranks in (1024, 16384):
            job = JobIdentity(platform=Platform.RAY, name=f"bench-{ranks}", ray_job_id=f"b{ranks}")
            pub = make_publisher({"kind": "ray", "incarnation": f"i{ranks}"}, env={})
            assert pub is not None

            n = samples if ranks < 16384 else max(5, samples // 4)
            rows.append(_measure_synthetic(
                transport="ray", publisher=pub, reader=ray_reader(job.key), job=job,
                ranks=ranks, samples=n, first_sequence=0,
            ))  # fmt: skip
            pub.close()
        ray.kill(board, no_restart=True)
    finally:
        ray.shutdown()
    return rows


def bench_kubernetes(samples: int) -> list[dict]:
    import kubernetes
    from harness import RunningServer, client_configuration
    from reporter_helpers import CRD_PATH

    from pacekeeper.detector.reporters.k8s_status import GROUP, PLURAL, VERSION

    server = RunningServer().start()
    rows = []
    try:
        server.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
        server.apply_yaml(CRD_PATH)
        reader = kubernetes.client.CustomObjectsApi(
            kubernetes.client.ApiClient(client_configuration(server.url))
        )

        def reader_for(name: str) -> Reader:
            def probe() -> int | None:
                # The server's own store: what any watcher would be sent next.
                obj = server.read(f"{GROUP}/{VERSION}", "StragglerReport", name, "default")
                return None if obj is None else dict(obj).get("status", {}).get("sequence")

            def fetch() -> dict[str, Any] | None:
                obj = reader.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, name)
                return obj["status"]["report"]  # type: ignore[no-any-return]

            return Reader(probe, fetch)

        def publisher(name: str) -> Any:
            api_client = kubernetes.client.ApiClient(client_configuration(server.url))
            pub = make_publisher(
                {"kind": "kubernetes", "job_name": name, "job_namespace": "default"},
                env={}, api_client=api_client, backoff=Backoff(base_s=0.01, max_s=0.1),
            )  # fmt: skip
            assert pub is not None
            return pub

        job = JobIdentity(platform=Platform.KUBERNETES, namespace="default", name="bench")
        Detector.initialize(report_time_interval=3600, kernel_timing="none", job=job)
        pub = publisher("bench")
        rows.append(_measure_detector("kubernetes", pub, reader_for("bench"), samples))
        pub.close()
        Detector.shutdown()
        for ranks in (1024, 16384):
            name = f"bench-{ranks}"
            job = JobIdentity(platform=Platform.KUBERNETES, namespace="default", name=name)
            pub = publisher(name)
            n = samples if ranks < 16384 else max(5, samples // 4)
            rows.append(_measure_synthetic(
                transport="kubernetes", publisher=pub, reader=reader_for(name),
                job=job, ranks=ranks, samples=n, first_sequence=0,
            ))  # fmt: skip
            pub.close()
    finally:
        server.stop()
    return rows


def main() -> None:
    samples = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    # Local Ray on loopback, no tokens (see docs/testing.md).
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    _init_gloo()
    started = datetime.now(UTC)
    rows = bench_ray(samples) + bench_kubernetes(samples)
    emit(
        "transport_latency",
        rows,
        title="Publish latency, generate_report -> readable (ms)",
        meta={"samples": samples, "poll_s": POLL_S, "started": started.isoformat()},
    )


if __name__ == "__main__":
    main()
