"""The StragglerReport CRD keeps each rank's ``gpuIndividualMedian`` (schemaVersion 6):
the API server prunes fields its structural schema does not name, so without it the
controller would read every Kubernetes report without the broad GPU score and judge
data skew as a slow GPU again."""

from __future__ import annotations

from datetime import UTC, datetime

from chart_render import report_rank_schema, validate

from pacekeeper.detector.reporters.k8s_status import build_status, new_object
from pacekeeper.detector.score_report import JobIdentity, Platform, RankScores, ScoreReport


def test_the_crd_names_the_gpu_median_so_it_is_not_pruned() -> None:
    prop = report_rank_schema()["properties"]["gpuIndividualMedian"]
    assert prop["type"] == "number"
    assert prop["minimum"] == 0


def test_a_status_with_medians_matches_the_crd() -> None:
    report = ScoreReport.build(
        job=JobIdentity(platform=Platform.KUBERNETES, namespace="team-a", name="llama"),
        sequence=7,
        generated_at=datetime(2026, 11, 30, 1, 0, tzinfo=UTC),
        window_s=60.0,
        ranks=[
            RankScores(rank=0, node="gpu-0", gpu_individual=1.0, gpu_individual_median=1.0),
            RankScores(rank=1, node="gpu-1", gpu_individual=0.87, gpu_individual_median=0.99),
        ],
    )
    obj = new_object("team-a", "llama", report)
    obj["status"] = build_status(report, incarnation="20261130T010000Z-abcd1234")
    assert obj["status"]["report"]["ranks"][1]["gpuIndividualMedian"] == 0.99
    validate(obj)
