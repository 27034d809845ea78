"""The StragglerReport CRD keeps each rank's ``gpuRelativeMedian`` (schemaVersion 7)
and ``gpuIndividualFast`` (schemaVersion 8): the API server prunes fields its structural
schema does not name, so without them the controller would read every Kubernetes report
without the broad score against the peers (the memory of hardware's peer check would
take data skew for a slow GPU again) or without the fastest tenth of the kernel time
(data skew over half the kernel time would be restarted as a slow GPU)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from chart_render import crds, validate

from pacekeeper.detector.reporters.k8s_status import build_status, new_object
from pacekeeper.detector.score_report import JobIdentity, Platform, RankScores, ScoreReport

FIELDS = [
    ("gpuRelativeMedian", "gpu_relative_median"),
    ("gpuIndividualFast", "gpu_individual_fast"),
]


@pytest.mark.parametrize(("wire", "_attr"), FIELDS)
def test_the_crd_names_the_field_so_it_is_not_pruned(wire: str, _attr: str) -> None:
    (crd,) = [c for c in crds() if c["metadata"]["name"] == "stragglerreports.pacekeeper.dev"]
    report = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    ranks = report["properties"]["report"]["properties"]["ranks"]["items"]["properties"]
    assert ranks[wire]["type"] == "number"
    assert ranks[wire]["minimum"] == 0


@pytest.mark.parametrize(("wire", "attr"), FIELDS)
def test_a_status_with_the_field_matches_the_crd(wire: str, attr: str) -> None:
    report = ScoreReport.build(
        job=JobIdentity(platform=Platform.KUBERNETES, namespace="team-a", name="llama"),
        sequence=3,
        generated_at=datetime(2026, 12, 6, 1, 0, tzinfo=UTC),
        window_s=60.0,
        ranks=[
            RankScores(rank=0, node="gpu-0", gpu_relative=1.0, **{attr: 1.0}),
            RankScores(rank=1, node="gpu-1", gpu_relative=0.8, **{attr: 0.98}),
        ],
    )
    obj = new_object("team-a", "llama", report)
    obj["status"] = build_status(report, incarnation="20261206T010000Z-abcd1234")
    assert obj["status"]["report"]["ranks"][1][wire] == 0.98
    validate(obj)
