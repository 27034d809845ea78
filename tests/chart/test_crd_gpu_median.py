"""The StragglerReport CRD keeps each rank's ``gpuIndividualMedian`` (schemaVersion 6):
the API server prunes fields its structural schema does not name, so without it the
controller would read every Kubernetes report without the broad GPU score and judge
data skew as a slow GPU again."""

from __future__ import annotations

from chart_render import report_rank_schema, status_object, validate

from pacekeeper.detector.score_report import RankScores


def test_the_crd_names_the_gpu_median_so_it_is_not_pruned() -> None:
    prop = report_rank_schema()["properties"]["gpuIndividualMedian"]
    assert prop["type"] == "number"
    assert prop["minimum"] == 0


def test_a_status_with_medians_matches_the_crd() -> None:
    obj = status_object(
        [
            RankScores(rank=0, node="gpu-0", gpu_individual=1.0, gpu_individual_median=1.0),
            RankScores(rank=1, node="gpu-1", gpu_individual=0.87, gpu_individual_median=0.99),
        ]
    )
    assert obj["status"]["report"]["ranks"][1]["gpuIndividualMedian"] == 0.99
    validate(obj)
