"""A peer-check finding needs its median kernel (issue #38, sampled scenario 64).

Without a learned factor the peer check lowers a GPU lying further below its peers than
any healthy spread may (``hardwareMemory.calibration.maxDeviation``), reading its
relative score: a kernel-time-weighted *mean*, which data skew pulls down. A GPU at the
edge of the healthy spread with a heavier batch (mean 0.77 of its peers', median 0.87)
was restarted that way. Such a rank stays lowered and named (so a pipeline stage's
pattern stays whole), but its finding is no evidence for a disruptive step unless its
``gpuRelativeMedian`` is beyond the spread too, by more than the track band (drift's
room: scenario 290); a slow GPU (mean and median both low) still is."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from pacekeeper.controller.core.decisions import Verdict
from pacekeeper.controller.core.peers import GpuCalibration, Judged, judge
from pacekeeper.controller.core.policy import ActionKind, Policy, load_policy_file
from pacekeeper.controller.simulation.runner import Replayer
from pacekeeper.detector.score_report import JobIdentity, RankScores, ScoreReport

DOC = load_policy_file(Path(__file__).parents[3] / "docs/policies/enforce-recommended.yaml")
POLICY: Policy = DOC.policies["recommended"]
CAL = DOC.hardware_memory.calibration
N = 16
SKEWED, SLOW = 3, 7
JOB = JobIdentity(name="train")
T0 = datetime(2026, 12, 6, tzinfo=UTC)


def _ranks(rel: dict[int, tuple[float, float | None]], n: int, noise: np.ndarray) -> list:
    """Ranks at individual ~1.0 (their baselines took in what they do); ``rel``: rank ->
    (gpuRelative, gpuRelativeMedian) over the others' 0.9 (the best rank sets 1.0)."""
    out = []
    for r in range(n):
        mean, median = rel.get(r, (1.0, 1.0))
        f = 0.9 * float(noise[r])
        out.append(
            RankScores(
                rank=r,
                node=f"n{r // 8}",
                pod=f"train-{r}",
                gpu_individual=min(1.0, float(noise[r]) / 0.999),
                gpu_individual_median=min(1.0, float(noise[r]) / 0.999),
                gpu_relative=mean * f,
                gpu_relative_median=None if median is None else median * f,
                kernel_samples=500,
            )
        )
    return out


def _report(rel: dict[int, tuple[float, float | None]], seq: int = 1, n: int = N) -> ScoreReport:
    return ScoreReport.build(
        job=JOB,
        sequence=seq,
        generated_at=T0 + timedelta(seconds=60 * seq),
        window_s=60.0,
        ranks=_ranks(rel, n, np.ones(n)),
    )


def _judged(report: ScoreReport, known: tuple[int, ...] = ()) -> Judged:
    flags = np.zeros(len(report.ranks), dtype=np.bool_)
    flags[list(known)] = True
    cal = GpuCalibration(
        factors=np.ones(len(report.ranks)),
        known=flags,
        max_deviation=CAL.max_deviation,
        band=CAL.track_band,
    )
    return judge(report, POLICY, lambda r: r.gpu_individual, cal)


def test_a_skewed_rank_is_lowered_and_named_but_held_as_the_spread() -> None:
    act = POLICY.thresholds.act
    got = _judged(_report({SKEWED: (0.77, 0.87), SLOW: (0.77, 0.77)}))
    values = got.scores()
    assert values[SKEWED] is not None and values[SKEWED] < act
    assert values[SLOW] is not None and values[SLOW] < act
    assert got.peers_only == {SKEWED: 1.0}  # its individual score, before the check


def test_a_gpu_within_the_band_of_the_spreads_edge_is_held_beyond_it_is_not() -> None:
    # Scenario 290: a healthy GPU at the spread's edge drifting 3 % slower sits at
    # 0.848 of its peers on mean and median alike; the track band is drift's room.
    edge = 1.0 - CAL.max_deviation
    near, beyond = edge - CAL.track_band / 2, edge - CAL.track_band * 1.5
    got = _judged(_report({SKEWED: (near, near), SLOW: (beyond, beyond)}))
    assert got.scores()[SKEWED] < POLICY.thresholds.act  # still lowered and named
    assert set(got.peers_only) == {SKEWED}


def test_without_the_median_the_mean_alone_decides_as_before() -> None:
    got = _judged(_report({SKEWED: (0.77, None), SLOW: (0.77, 0.77)}))
    assert got.peers_only == {}
    # The band's edge still holds a GPU the mean alone puts just past the spread.
    near = 1.0 - CAL.max_deviation - CAL.track_band / 2
    assert set(_judged(_report({SKEWED: (near, None)})).peers_only) == {SKEWED}


def test_the_median_never_adds_evidence() -> None:
    # A median below the mean (never from real kernels of one rank, but a report may say
    # so): a rank the mean keeps within the spread is neither lowered nor held.
    got = _judged(_report({SKEWED: (0.97, 0.6)}))
    assert got.scores()[SKEWED] == 1.0
    assert got.peers_only == {}


def test_a_gpu_with_a_learned_factor_is_judged_by_it() -> None:
    got = _judged(_report({SKEWED: (0.77, 0.87)}), known=(SKEWED,))
    assert got.peers_only == {}


def _run(rel: dict[int, tuple[float, float | None]], reports: int = 40) -> list[tuple[int, str]]:
    """(rank, action) of every disruptive step the recommended policy takes on 64 ranks
    whose GPUs jitter 0.5 % a window."""
    rng = np.random.default_rng(11)
    replayer = Replayer(DOC)
    steps = []
    for seq in range(1, reports + 1):
        noise = 1.0 + 0.005 * rng.standard_normal(64)
        report = ScoreReport.build(
            job=JOB,
            sequence=seq,
            generated_at=T0 + timedelta(seconds=60 * seq),
            window_s=60.0,
            ranks=_ranks(rel, 64, noise),
        )
        for d in replayer.step(report):
            if d.verdict is Verdict.ACT and d.action not in (None, ActionKind.NOTIFY):
                steps.extend((int(r), d.action.value) for r in d.evidence.get("ranks", []))
    return steps


def test_a_skewed_gpu_at_the_spreads_edge_is_never_restarted_a_slow_one_is() -> None:
    steps = _run({SKEWED: (0.77, 0.87), SLOW: (0.77, 0.77)})
    assert (SLOW, ActionKind.RESTART_RANK.value) in steps
    assert all(r != SKEWED for r, _ in steps), steps
