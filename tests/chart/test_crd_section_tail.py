"""The StragglerReport CRD keeps each rank's ``sectionTail`` (schemaVersion 4): the API
server prunes fields its structural schema does not name, so without it the controller
would read every Kubernetes report without the tail."""

from __future__ import annotations

from chart_render import report_rank_schema, status_object, validate

from pacekeeper.detector.score_report import RankScores


def test_the_crd_names_section_tail_so_it_is_not_pruned() -> None:
    props = report_rank_schema()["properties"]
    assert props["sectionTail"]["type"] == "object"
    assert props["sectionTail"]["additionalProperties"]["minimum"] == 0


def test_a_status_with_tails_matches_the_crd() -> None:
    obj = status_object(
        [
            RankScores(rank=0, node="gpu-0", gpu_relative=1.0, section_tail={"step": 0.99}),
            RankScores(rank=1, node="gpu-1", gpu_relative=0.99, section_tail={"step": 0.77}),
        ]
    )
    assert obj["status"]["report"]["ranks"][1]["sectionTail"] == {"step": 0.77}
    validate(obj)
