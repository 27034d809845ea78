"""The StragglerReport CRD keeps each rank's ``gpuRelativeMedian`` (schemaVersion 7):
the API server prunes fields its structural schema does not name, so without it the
controller would read every Kubernetes report without the broad score against the
peers, and the memory of hardware's peer check would take data skew for a slow GPU
again."""

from __future__ import annotations

from datetime import UTC, datetime

from chart_render import crds, validate

from pacekeeper.detector.reporters.k8s_status import build_status, new_object
from pacekeeper.detector.score_report import JobIdentity, Platform, RankScores, ScoreReport


def test_the_crd_names_the_relative_median_so_it_is_not_pruned() -> None:
    (crd,) = [c for c in crds() if c["metadata"]["name"] == "stragglerreports.pacekeeper.dev"]
    report = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    ranks = report["properties"]["report"]["properties"]["ranks"]["items"]["properties"]
    assert ranks["gpuRelativeMedian"]["type"] == "number"
    assert ranks["gpuRelativeMedian"]["minimum"] == 0


def test_a_status_with_relative_medians_matches_the_crd() -> None:
    report = ScoreReport.build(
        job=JobIdentity(platform=Platform.KUBERNETES, namespace="team-a", name="llama"),
        sequence=3,
        generated_at=datetime(2026, 12, 6, 1, 0, tzinfo=UTC),
        window_s=60.0,
        ranks=[
            RankScores(rank=0, node="gpu-0", gpu_relative=1.0, gpu_relative_median=1.0),
            RankScores(rank=1, node="gpu-1", gpu_relative=0.8, gpu_relative_median=0.98),
        ],
    )
    obj = new_object("team-a", "llama", report)
    obj["status"] = build_status(report, incarnation="20261206T010000Z-abcd1234")
    assert obj["status"]["report"]["ranks"][1]["gpuRelativeMedian"] == 0.98
    validate(obj)
