"""``breadth.broad_scores``: the sequential test reads a rank's GPU slowdown as broadly
as its kernels show it (``gpuIndividualMedian``); it never adds evidence, and a report
without the field, or a policy judging another kind, is decided as before."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from pacekeeper.controller.core.breadth import broad_scores
from pacekeeper.controller.core.policy_types import ScoreKind
from pacekeeper.detector.score_report import JobIdentity, RankScores, ScoreReport


def _report(*ranks: tuple[float, float | None]) -> ScoreReport:
    return ScoreReport.build(
        job=JobIdentity(name="train"),
        sequence=1,
        generated_at=datetime(2026, 1, 1, tzinfo=UTC),
        window_s=60.0,
        ranks=[
            RankScores(rank=r, node="n0", gpu_individual=g, gpu_individual_median=m)
            for r, (g, m) in enumerate(ranks)
        ],
    )


def test_a_narrow_slowdown_is_lifted_to_what_the_median_shows() -> None:
    # Rank 1: data skew (mean 0.87, median 1.0); rank 2: a slow GPU (both 0.9).
    report = _report((1.0, 1.0), (0.87, 1.0), (0.9, 0.9))
    got = broad_scores({0: 1.0, 1: 0.87, 2: 0.9}, report, ScoreKind.GPU_INDIVIDUAL)
    assert got[1] == pytest.approx(1.0)
    assert got[0] == 1.0 and got[2] == 0.9


def test_it_only_ever_holds_back() -> None:
    # A median below the mean adds no evidence; a judged score from elsewhere (a host
    # stall judged on sections) is scaled by the kernels' ratio, 1.0 when they agree.
    report = _report((0.95, 0.8), (0.99, 0.99))
    judged = {0: 0.95, 1: 0.7}
    assert broad_scores(judged, report, ScoreKind.GPU_INDIVIDUAL) == judged


@pytest.mark.parametrize("kind", [ScoreKind.GPU_RELATIVE, ScoreKind.WORST])
def test_other_kinds_and_reports_without_it_are_judged_as_before(kind: ScoreKind) -> None:
    judged = {0: 1.0, 1: 0.87}
    assert broad_scores(judged, _report((1.0, 1.0), (0.87, 1.0)), kind) is judged
    old = _report((1.0, None), (0.87, None))
    assert broad_scores(judged, old, ScoreKind.GPU_INDIVIDUAL) is judged


def test_a_finding_the_median_puts_above_act_reads_as_the_peers() -> None:
    # Rank 3: data skew whose median still sits 0.4 % below its peers' (issue #38,
    # scenario 148). Lifted alone it keeps that gap, which a test whose noise scale is at
    # its floor reads as evidence window after window; judged below act and at or above
    # it by the median, it reads as its peers' median: no evidence either way.
    report = _report((0.998, 0.998), (0.999, 0.999), (0.997, 0.998), (0.908, 0.994))
    judged = {0: 0.998, 1: 0.999, 2: 0.997, 3: 0.908}
    got = broad_scores(judged, report, ScoreKind.GPU_INDIVIDUAL, act=0.93)
    assert got[3] == pytest.approx(0.998)
    assert got[0] == 0.998 and got[1] == 0.999


def test_a_slow_gpu_and_a_finding_from_elsewhere_keep_their_evidence() -> None:
    # Rank 1: a slow GPU with skew on top (median 0.9, still below act); rank 2: a host
    # stall judged 0.8 on its sections while its kernels agree.
    report = _report((1.0, 1.0), (0.85, 0.9), (0.995, 0.999), (1.0, 1.0))
    judged = {0: 1.0, 1: 0.85, 2: 0.8, 3: 1.0}
    got = broad_scores(judged, report, ScoreKind.GPU_INDIVIDUAL, act=0.93)
    assert got[1] == pytest.approx(0.9)
    assert got[2] == pytest.approx(0.8 * 0.999 / 0.995)
