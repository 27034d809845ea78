"""``partial_slowdown.held``: the sequential test reads a rank judged below act whose
fastest tenth of kernel time kept its peers' pace (``gpuIndividualFast``) as the peers'
median; a slow GPU, a tail or host-side finding, another score kind and a report
without the field are read as before."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from pacekeeper.controller.core.partial_slowdown import FAST_BAND, held, kept_pace
from pacekeeper.controller.core.policy_types import ScoreKind
from pacekeeper.detector.score_report import JobIdentity, RankScores, ScoreReport

ACT = 0.93


def _report(*fast: float | None, mean: tuple[float, ...] = ()) -> ScoreReport:
    """Ranks with these ``gpuIndividualFast``; ``gpuIndividual`` 1.0 but where ``mean``
    gives it (rank order)."""
    return ScoreReport.build(
        job=JobIdentity(name="train"),
        sequence=1,
        generated_at=datetime(2026, 12, 6, tzinfo=UTC),
        window_s=60.0,
        ranks=[
            RankScores(
                rank=r,
                node=f"n{r}",
                gpu_individual=mean[r] if r < len(mean) else 1.0,
                gpu_individual_fast=f,
            )
            for r, f in enumerate(fast)
        ],
    )


# Ranks 0-3 healthy, 4 data skew (fastest tenth at pace), 5 a slow GPU.
REPORT = _report(1.0, 0.999, 1.0, 0.998, 0.997, 0.905, mean=(1.0, 0.999, 1.0, 0.998, 0.87, 0.9))
JUDGED = {0: 1.0, 1: 0.999, 2: 1.0, 3: 0.998, 4: 0.87, 5: 0.9}


def test_kept_pace_is_a_slowed_rank_within_the_band_of_the_jobs_median() -> None:
    assert kept_pace(REPORT, ACT) == [4]
    # Just outside the band, against a median of 1.0.
    mean = (1.0, 1.0, 1.0, 0.8, 0.8)
    edge = _report(1.0, 1.0, 1.0, 1.0 - FAST_BAND * 0.99, 1.0 - FAST_BAND * 1.01, mean=mean)
    assert kept_pace(edge, ACT) == [3]
    assert kept_pace(_report(None, None, None), ACT) == []


def test_a_rank_the_peer_check_found_is_not_held() -> None:
    # Rank 4 judged 0.85 by the peer check (a GPU slow from the job's start): against
    # its own baseline it kept pace in every kernel, so its fastest tenth says nothing
    # (the real AR trace's straggler).
    report = _report(1.0, 1.0, 1.0, 1.0, 1.0)
    judged = {0: 1.0, 1: 1.0, 2: 1.0, 3: 1.0, 4: 0.85}
    assert kept_pace(report, ACT) == []
    assert held(judged, judged, report, kind=ScoreKind.GPU_INDIVIDUAL, act=ACT) is judged


def test_a_skewed_rank_reads_as_its_peers_and_a_slow_gpu_keeps_its_score() -> None:
    got = held(JUDGED, JUDGED, REPORT, kind=ScoreKind.GPU_INDIVIDUAL, act=ACT)
    assert got[4] == pytest.approx(0.9985)  # the median of the six scores
    assert got[5] == 0.9
    assert {r: got[r] for r in range(4)} == {r: JUDGED[r] for r in range(4)}


def test_the_tails_and_the_host_sides_findings_stand() -> None:
    got = held(JUDGED, JUDGED, REPORT, kind=ScoreKind.GPU_INDIVIDUAL, act=ACT, keep_findings={4})
    assert got == JUDGED


def test_it_reads_the_judged_score_not_what_the_test_would_read() -> None:
    # Rank 4 judged above act (nothing to hold) though an earlier step lowered it.
    scores = {**JUDGED, 4: 0.8}
    judged = {**JUDGED, 4: 0.95}
    assert held(scores, judged, REPORT, kind=ScoreKind.GPU_INDIVIDUAL, act=ACT) == scores


@pytest.mark.parametrize("kind", [ScoreKind.GPU_RELATIVE, ScoreKind.WORST])
def test_other_kinds_and_reports_without_it_are_judged_as_before(kind: ScoreKind) -> None:
    assert held(JUDGED, JUDGED, REPORT, kind=kind, act=ACT) is JUDGED
    old = _report(None, None, None, None, None, None)
    assert held(JUDGED, JUDGED, old, kind=ScoreKind.GPU_INDIVIDUAL, act=ACT) is JUDGED
