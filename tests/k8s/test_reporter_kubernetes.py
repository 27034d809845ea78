"""The Kubernetes reporter against the API harness, over real HTTP with the official
client: a report the controller created (the reporter waits for it, never creates it),
merge-patched status, faults and outages that never reach
the training loop."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness import Fault, RunningServer, client_configuration, eventually
from reporter_helpers import CRD_PATH

from pacekeeper.controller.runtime.report_birth import born_object
from pacekeeper.controller.simulation.synthetic import synthetic_report
from pacekeeper.controller.sources.workloads import OwnerRef
from pacekeeper.detector.reporters import Backoff, Publisher, make_publisher
from pacekeeper.detector.reporters.k8s_status import GROUP, PLURAL, VERSION
from pacekeeper.detector.reporters.kubernetes import KubernetesStatusSink
from pacekeeper.detector.score_report import (
    K8S_STATUS_MAX_BYTES,
    JobIdentity,
    Platform,
    ScoreReport,
)

API_VERSION = f"{GROUP}/{VERSION}"
GLOO_JOB = Path(__file__).parents[1] / "ray" / "gloo_job.py"
FAST = Backoff(base_s=0.01, max_s=0.05)


@pytest.fixture
def server(k8s_server: RunningServer) -> RunningServer:
    k8s_server.apply_yaml(CRD_PATH)
    return k8s_server


def _job(name: str = "llm") -> JobIdentity:
    return JobIdentity(platform=Platform.KUBERNETES, namespace="default", name=name)


def _made(server: RunningServer, name: str = "llm") -> None:
    """The report as the controller creates it for the job's workload."""
    server.apply(born_object("default", name, OwnerRef("batch/v1", "Job", name, "default",
                                                        uid=f"uid-{name}")))  # fmt: skip


def _publisher(
    server: RunningServer, name: str = "llm", *, made: bool = True, **sink: Any
) -> Publisher:
    import kubernetes

    if made:
        _made(server, name)
    api_client = kubernetes.client.ApiClient(client_configuration(server.url))
    return Publisher(
        KubernetesStatusSink(
            namespace="default", name=name, incarnation="inc-1", api_client=api_client, **sink
        ),
        backoff=FAST,
    )


def _status(server: RunningServer, name: str = "llm") -> dict[str, Any] | None:
    obj = server.read(API_VERSION, "StragglerReport", name, "default")
    return None if obj is None else dict(obj).get("status")


def _kubeconfig(path: Path, url: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "harness", "cluster": {"server": url}}],
                "users": [{"name": "trainer", "user": {"token": "t"}}],
                "contexts": [{"name": "h", "context": {"cluster": "harness", "user": "trainer"}}],
                "current-context": "h",
            }
        )
    )
    return path


def test_four_gloo_ranks_report_into_the_stragglerreport_status(
    server: RunningServer, tmp_path: Path
) -> None:
    env = os.environ | {
        "OMP_NUM_THREADS": "1",
        # What a pod sees; the token file is absent here, so the client falls back to the
        # kubeconfig that points at the harness.
        "KUBERNETES_SERVICE_HOST": "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": "1",
        "KUBECONFIG": str(_kubeconfig(tmp_path / "kubeconfig", server.url)),
        "PACEKEEPER_REPORTER": "auto",
        "PACEKEEPER_JOB_NAME": "gloo-job",
        "PACEKEEPER_JOB_NAMESPACE": "default",
        "STEPS": "6",
        "REPORT_EVERY": "2",
        "SLOW_RANK": "3",
        "RESULT_FILE": str(tmp_path / "result.json"),
    }
    _made(server, "gloo-job")
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone",
         "--nproc-per-node=4", str(GLOO_JOB)],
        env=env, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    status = _status(server, "gloo-job")
    assert status is not None
    report = ScoreReport.from_wire(status["report"])
    assert report.job.key == "default/gloo-job"
    assert [r.rank for r in report.ranks] == [0, 1, 2, 3]
    # Relative scores only: individual ones move with the load on this 2-core machine.
    relative = {r.rank: r.section_relative["compute"] for r in report.ranks}
    assert min(relative, key=lambda rank: relative[rank]) == 3
    assert status["stragglers"] >= 1 and 3 in status["stragglerRanks"]
    assert server.history.find(verb="create", plural=PLURAL) == []
    patches = server.history.find(verb="patch", plural=PLURAL, subresource="status")
    assert [p.status for p in patches] == [200, 200, 200]
    assert {p.content_type for p in patches} == {"application/merge-patch+json"}


def test_16384_rank_report_lands_in_status_under_the_size_bound(server: RunningServer) -> None:
    pub = _publisher(server)
    pub.submit(synthetic_report(job=_job(), world_size=16384, slow={9000: 0.2}))
    assert pub.flush(timeout_s=60)
    pub.close()
    status = _status(server)
    assert status is not None and status["worstRank"] == 9000
    (patch,) = server.history.find(verb="patch", subresource="status")
    assert len(json.dumps(patch.body, separators=(",", ":"))) < K8S_STATUS_MAX_BYTES
    stored = ScoreReport.from_wire(status["report"])
    assert stored.truncated and 9000 in {r.rank for r in stored.ranks}


def test_existing_object_keeps_the_controllers_status_and_loses_stale_scores(
    server: RunningServer,
) -> None:
    server.apply(
        {
            "apiVersion": API_VERSION,
            "kind": "StragglerReport",
            "metadata": {"name": "llm", "namespace": "default"},
            "spec": {"job": {"platform": "kubernetes", "name": "llm", "namespace": "default"}},
            "status": {"controller": {"mode": "observe"}, "worstScore": 0.1},
        }
    )
    pub = _publisher(server, made=False)  # the object above is the one
    pub.submit(synthetic_report(job=_job(), sequence=0))
    pub.submit(synthetic_report(job=_job(), sequence=1, gpu=False))
    assert pub.flush(timeout_s=30)
    pub.close()
    status = _status(server)
    assert status is not None and status["controller"] == {"mode": "observe"}
    assert status["sequence"] == 1 and status["worstScore"] > 0.9
    assert all("gpuRelative" not in r for r in status["report"]["ranks"])
    assert server.history.find(verb="create", plural=PLURAL) == []


def test_api_errors_are_retried_counted_and_logged_once(
    server: RunningServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.inject(Fault(status=500, times=3, verb="patch", subresource="status"))
    pub = _publisher(server)
    with caplog.at_level(logging.INFO, logger="pacekeeper.detector.reporters"):
        pub.submit(synthetic_report(job=_job()))
        assert pub.flush(timeout_s=30)
    stats = pub.stats()
    pub.close()
    assert _status(server) is not None
    assert stats.published == 1 and stats.rejected == 0
    assert stats.errors_by_cause == {"HTTP 500": 3}
    failed = [r for r in caplog.records if r.getMessage() == "report delivery failed, will retry"]
    assert [r.levelno for r in failed] == [logging.WARNING]  # once per cause
    assert "report delivery recovered" in caplog.messages


def test_unreachable_or_hanging_server_never_blocks_submit(server: RunningServer) -> None:
    import kubernetes

    config = client_configuration("http://127.0.0.1:9")  # nothing listens on discard
    dead = Publisher(
        KubernetesStatusSink(
            namespace="default",
            name="llm",
            incarnation="i",
            api_client=kubernetes.client.ApiClient(config),
            connect_timeout_s=0.2,
        ),
        backoff=FAST,
    )
    # A server that accepts the request and answers after the client gave up.
    server.inject(Fault(status=None, delay_s=3.0, times=1, verb="get", plural=PLURAL))
    hanging = _publisher(server, read_timeout_s=0.3)
    submitted = threading.Event()

    def train() -> None:
        for seq in range(100):
            dead.submit(synthetic_report(job=_job(), sequence=seq))
            hanging.submit(synthetic_report(job=_job(), sequence=seq))
        submitted.set()

    trainer = threading.Thread(target=train)
    trainer.start()
    trainer.join(timeout=30)
    assert submitted.is_set()
    eventually(lambda: dead.stats().send_errors >= 2, timeout_s=20)
    eventually(lambda: hanging.stats().published >= 1, timeout_s=20)
    dead_stats, hanging_stats = dead.stats(), hanging.stats()
    dead.close(timeout_s=0.1)
    hanging.close(timeout_s=5)
    assert dead_stats.published == 0 and "NewConnectionError" in dead_stats.errors_by_cause
    assert dead_stats.dropped_oldest == 100 - dead.max_queue
    assert "ReadTimeoutError" in hanging_stats.errors_by_cause


def test_report_of_another_job_is_refused_and_nothing_is_written(server: RunningServer) -> None:
    pub = _publisher(server)
    pub.submit(synthetic_report(job=_job("someone-else")))
    assert pub.flush(timeout_s=10)
    stats = pub.stats()
    pub.close()
    assert stats.rejected == 1 and "default/someone-else" in (stats.last_error or "")
    assert [r for r in server.history.writes() if r.plural == PLURAL] == []


def test_make_publisher_wires_kubernetes_from_environment_only(
    server: RunningServer, tmp_path: Path
) -> None:
    env = {
        "PACEKEEPER_REPORTER": "kubernetes",
        "PACEKEEPER_JOB_NAME": "from-env",
        "POD_NAMESPACE": "default",
    }
    import kubernetes

    _made(server, "from-env")
    pub = make_publisher(
        None, env=env, api_client=kubernetes.client.ApiClient(client_configuration(server.url))
    )
    assert pub is not None and pub.sink.name == "kubernetes"
    pub.submit(synthetic_report(job=_job("from-env")))
    assert pub.flush(timeout_s=10)
    pub.close()
    assert _status(server, "from-env") is not None


def test_report_with_a_non_kubernetes_identity_is_refused_naming_both(
    server: RunningServer,
) -> None:
    pub = _publisher(server)
    pub.submit(synthetic_report(job=JobIdentity(platform=Platform.LOCAL, name="llm")))
    assert pub.flush(timeout_s=10)
    stats = pub.stats()
    pub.close()
    assert stats.rejected == 1
    assert "StragglerReport default/llm, report.job is 'local:llm'" in (stats.last_error or "")


def test_the_reporter_never_creates_its_report_it_waits_says_so_and_reports_once_made(
    server: RunningServer, caplog: pytest.LogCaptureFixture
) -> None:
    # A Role that could create this report could create any other job's first (issue 40):
    # only the controller creates it, bound to the job's workload.
    pub = _publisher(server, made=False, pod_name="llm-worker-0")
    with caplog.at_level(logging.INFO, logger="pacekeeper.detector.reporters"):
        pub.submit(synthetic_report(job=_job(), sequence=1))
        eventually(lambda: pub.stats().send_errors >= 3, timeout_s=20)
        assert pub.stats().errors_by_cause.keys() == {"ReportNotCreated"}
        assert pub.stats().queue_depth == 1  # kept, not dropped: it goes once the report is
        _made(server)
        assert pub.flush(timeout_s=20)
    stats = pub.stats()
    pub.close()
    assert stats.published == 1 and stats.rejected == 0
    assert server.history.find(verb="create", plural=PLURAL) == []
    assert _status(server) is not None and _status(server)["sequence"] == 1  # type: ignore[index]
    waiting = [m for m in caplog.messages if m.startswith("waiting for the controller")]
    # Said once, not at every retry (rate-limited).
    assert waiting == ["waiting for the controller to create StragglerReport default/llm"]
