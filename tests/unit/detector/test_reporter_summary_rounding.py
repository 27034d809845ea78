"""The summary fields beside ``status.report`` are read by people (printer columns):
rounded, while the report itself keeps every digit for the controller."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pacekeeper.controller.simulation.synthetic import synthetic_report
from pacekeeper.detector.reporters.k8s_status import build_status, summary_score
from pacekeeper.detector.score_report import JobIdentity, Platform, ScoreReport

JOB = JobIdentity(platform=Platform.KUBERNETES, namespace="ml", name="llm")


def test_worst_score_column_is_rounded_and_the_report_keeps_full_precision() -> None:
    report = synthetic_report(job=JOB, world_size=4, slow={2: 0.6013875377028324})
    status = build_status(report, incarnation="i")
    assert status["worstScore"] == 0.6014 and status["worstRank"] == 2
    stored = ScoreReport.from_wire(status["report"])
    assert stored.summary.min_score == 0.6013875377028324


def test_a_straggler_never_shows_a_worst_score_at_the_threshold() -> None:
    report = synthetic_report(job=JOB, world_size=4, slow={1: 0.749996})
    status = build_status(report, incarnation="i", threshold=0.75)
    assert status["stragglers"] == 1
    assert status["worstScore"] == 0.7499


@given(
    score=st.floats(min_value=0.0, max_value=1.0, allow_nan=False),
    threshold=st.floats(min_value=0.0, max_value=1.0, allow_nan=False),
)
def test_summary_score_is_close_and_stays_on_its_side_of_the_threshold(
    score: float, threshold: float
) -> None:
    shown = summary_score(score, threshold)
    assert shown is not None
    assert abs(shown - score) <= 1e-4 + 1e-12
    assert (shown < threshold) == (score < threshold) or score >= threshold
    assert len(repr(shown).split(".")[-1]) <= 4 or "e" in repr(shown)


def test_no_score_stays_none() -> None:
    assert summary_score(None, 0.75) is None
