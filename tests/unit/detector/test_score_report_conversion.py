"""Report -> ScoreReport: identity of each rank (node, pod, Ray node) and scores."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest

from pacekeeper.detector import Detector, Report
from pacekeeper.detector.reports import RankInfo, to_score_report
from pacekeeper.detector.score_report import JobIdentity, Platform, ScoreReport


def _report() -> Report:
    return Report(
        gpu_relative_perf_scores={0: 1.0, 1: math.nan},
        section_relative_perf_scores={"fwd": {0: 1.0, 1: 0.6}},
        gpu_individual_perf_scores={},
        section_individual_perf_scores={"fwd": {0: 0.9}},
        rank_to_node={0: "n0", 1: "n1"},
        local_section_summaries={},
        local_kernel_summaries={},
        generate_report_elapsed_time=2.0,
        gather_on_rank0=True,
        rank=0,
    )


def test_conversion_carries_identity_and_drops_nan() -> None:
    info = {
        0: RankInfo(0, "n0", pod="job-0", ray_node_id="abc", section_samples=5),
        1: RankInfo(1, "n1", pod="job-1", dropped_records=3),
    }
    sr = to_score_report(
        _report(),
        job=JobIdentity(platform=Platform.KUBERNETES, namespace="ml", name="job"),
        sequence=4,
        generated_at=datetime(2026, 11, 30, tzinfo=UTC),
        window_s=60.0,
        rank_info=info,
        world_size=8,
    )
    wire = ScoreReport.from_wire(sr.to_json())
    r0, r1 = wire.ranks
    assert (r0.node, r0.pod, r0.ray_node_id, r0.section_samples) == ("n0", "job-0", "abc", 5)
    assert r1.gpu_relative is None  # NaN never travels
    assert r1.section_relative == {"fwd": 0.6} and r1.section_individual == {}
    assert wire.summary.world_size == 8 and wire.summary.worst_rank == 1
    assert wire.kernel_timing.dropped_records == 3
    assert wire.job.key == "ml/job" and wire.sequence == 4


def test_pod_and_job_come_from_kubernetes_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("HOSTNAME", "trainer-worker-3")
    monkeypatch.setenv("NODE_NAME", "gpu-node-7")
    monkeypatch.setenv("POD_NAMESPACE", "research")
    monkeypatch.setenv("PACEKEEPER_JOB_NAME", "llm-pretrain")
    Detector.initialize()
    with Detector.detection_section("fwd"):
        pass
    Detector.generate_report()
    sr = Detector.latest_score_report()
    assert sr is not None
    assert sr.job.platform is Platform.KUBERNETES and sr.job.key == "research/llm-pretrain"
    assert (sr.ranks[0].pod, sr.ranks[0].node) == ("trainer-worker-3", "gpu-node-7")


def test_off_kubernetes_there_is_no_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOSTNAME", "laptop")
    Detector.initialize(node_name="box", job=JobIdentity(name="exp1"))
    Detector.generate_report()
    sr = Detector.latest_score_report()
    assert sr is not None
    assert sr.ranks[0].pod is None and sr.ranks[0].node == "box"
    assert sr.job.key == "local:exp1"


def test_the_score_report_is_made_only_when_asked_for_and_describes_its_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A drop-in user with no listener never pays for the conversion; asked for late,
    it still describes the report it belongs to, made once however often asked."""
    from pacekeeper.detector import report_cycle

    made: list[int] = []
    real = report_cycle.to_score_report

    def counting(*args: object, **kwargs: object) -> ScoreReport:
        made.append(int(kwargs["sequence"]))  # type: ignore[call-overload]
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(report_cycle, "to_score_report", counting)
    Detector.initialize(report_time_interval=3600, kernel_timing="none")
    try:
        for _ in range(3):
            with Detector.detection_section("step"):
                pass
            assert Detector.generate_report() is not None
        assert made == []
        latest = Detector.latest_score_report()
        assert latest is not None and made == [latest.sequence]
        assert Detector.latest_score_report() is latest and len(made) == 1
        seen: list[ScoreReport] = []
        Detector.add_report_listener(seen.append)
        Detector.generate_report()  # with a listener: made at once, and only once
        assert [s.sequence for s in seen] == made[1:] == [latest.sequence + 1]
        assert Detector.latest_score_report() is seen[0] and len(made) == 2
        Detector.remove_report_listener(seen.append)
    finally:
        Detector.shutdown()


def test_each_rank_reports_its_process_id() -> None:
    """Ray places a rank by (Ray node id, pid) of the job's own actors: a report without
    the pid can never be matched (controller/sources/ray_trust.py) and no Ray action
    could ever be trusted."""
    import os

    Detector.initialize(report_time_interval=3600, kernel_timing="none")
    try:
        with Detector.detection_section("step"):
            pass
        Detector.generate_report()
        latest = Detector.latest_score_report()
        assert latest is not None
        assert [r.pid for r in latest.ranks] == [os.getpid()]
    finally:
        Detector.shutdown()
