"""A report's platform must match its source (issue 40): the Ray ScoreBoard takes Ray
jobs' reports only. A job that writes a ``kubernetes`` or ``local`` report there names no
Ray job, so nothing of it may reach the core, even in a runner that believes placements
(``verify_placement=False``, where this check is the only one)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pacekeeper.controller.core.ids import JobKey
from pacekeeper.controller.core.observations import RejectedReport
from pacekeeper.controller.simulation.synthetic import synthetic_report
from pacekeeper.controller.sources.ray_scoreboard import ScoreBoardSource
from pacekeeper.detector.score_report import JobIdentity, Platform, ScoreReport

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _wire(job: JobIdentity) -> dict[str, object]:
    report = synthetic_report(job=job, world_size=2, slow={1: 0.4},
                              generated_at=NOW - timedelta(seconds=30))  # fmt: skip
    return report.to_wire()


@pytest.mark.parametrize(
    "job",
    [
        JobIdentity(platform=Platform.KUBERNETES, namespace="ml", name="llm"),
        JobIdentity(platform=Platform.LOCAL, name="train"),
    ],
    ids=["kubernetes", "local"],
)
@pytest.mark.parametrize("verify", [False, True], ids=["believing", "verifying"])
def test_a_report_that_is_not_a_ray_jobs_is_refused_by_the_ray_source(
    job: JobIdentity, verify: bool
) -> None:
    source = ScoreBoardSource(board=object(), verify_placement=verify)
    [item] = source._items(JobKey(job.key), [_wire(job)], NOW)
    assert isinstance(item, RejectedReport)
    assert f"report.job.platform is {job.platform.value!r}" in item.error


def test_a_ray_report_passes_the_platform_check() -> None:
    job = JobIdentity(platform=Platform.RAY, name="train", ray_job_id="01000000")
    source = ScoreBoardSource(board=object(), verify_placement=False)
    [item] = source._items(JobKey(job.key), [_wire(job)], NOW)
    assert isinstance(item, ScoreReport) and item.job == job
