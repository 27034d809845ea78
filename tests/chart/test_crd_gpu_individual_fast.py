"""The StragglerReport CRD keeps each rank's ``gpuIndividualFast`` (schemaVersion 8):
the API server prunes fields its structural schema does not name, so without it the
controller would read every Kubernetes report without it, and data skew over half the
kernel time would be restarted as a slow GPU again."""

from __future__ import annotations

from datetime import UTC, datetime

from chart_render import crds, validate

from pacekeeper.detector.reporters.k8s_status import build_status, new_object
from pacekeeper.detector.score_report import JobIdentity, Platform, RankScores, ScoreReport


def test_the_crd_names_the_fast_score_so_it_is_not_pruned() -> None:
    (crd,) = [c for c in crds() if c["metadata"]["name"] == "stragglerreports.pacekeeper.dev"]
    report = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    ranks = report["properties"]["report"]["properties"]["ranks"]["items"]["properties"]
    assert ranks["gpuIndividualFast"]["type"] == "number"
    assert ranks["gpuIndividualFast"]["minimum"] == 0


def test_a_status_with_fast_scores_matches_the_crd() -> None:
    report = ScoreReport.build(
        job=JobIdentity(platform=Platform.KUBERNETES, namespace="team-a", name="llama"),
        sequence=3,
        generated_at=datetime(2026, 12, 6, 1, 0, tzinfo=UTC),
        window_s=60.0,
        ranks=[
            RankScores(rank=0, node="gpu-0", gpu_individual=1.0, gpu_individual_fast=1.0),
            RankScores(rank=1, node="gpu-1", gpu_individual=0.87, gpu_individual_fast=0.998),
        ],
    )
    obj = new_object("team-a", "llama", report)
    obj["status"] = build_status(report, incarnation="20261206T010000Z-abcd1234")
    assert obj["status"]["report"]["ranks"][1]["gpuIndividualFast"] == 0.998
    validate(obj)
