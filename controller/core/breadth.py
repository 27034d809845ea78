"""The broad GPU statistic's say in the sequential test: data skew is no slow GPU.

A rank's ``gpuIndividual`` is the kernel-time-weighted *mean* of its kernels' scores
against its own baseline; ``gpuIndividualMedian`` (schemaVersion 6) is their weighted
*median*. A slow GPU slows every kernel by about the same factor, so the two agree. A
heavier batch (data skew) slows only the kernels whose work depends on the data
(varlen attention, routed expert GEMMs): the mean falls by their time share, the median
stays on a kernel of fixed shape while those are under half the kernel time.

``broad_scores`` gives the sequential test (``sequential.advance``) the judged score
with the rank's GPU slowdown as the median sees it, when that is the smaller one:
``judged * max(1, median / mean)``. So a disruptive step for a GPU finding passes only
on evidence the broad statistic agrees with; a rank whose judged score is low for
another reason (its host side, its tail) keeps it, since its kernels' mean and median
then agree. It never adds evidence (the factor is at least 1), and a report without
the field, or a policy judging another score kind, is decided as before. Notices read
the judged scores unchanged. docs/decision-rule.md, "Data skew against a slow GPU".

The lift alone is not enough: the median is not immune to skew, only far less moved
(a skewed rank's median sits 0.1-0.5 % below its peers' where its mean is 9 % below),
and the median is so steady that the test's noise scale falls to its floor (0.1 %): a
steady 0.4 % gap then gathers evidence window after window, and skewed ranks were
restarted (issue #38, sampled scenarios 118, 148, 172 at 1,024 ranks). So a rank judged
below ``act`` whose broad score is at or above it (the finding rests on the mean alone)
reads as its peers' median: no evidence either way, whatever its small residual gap.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from pacekeeper.controller.core import rank_columns, rank_table
from pacekeeper.controller.core.ids import Rank
from pacekeeper.controller.core.policy_types import ScoreKind
from pacekeeper.detector.score_report import RankScores, ScoreReport


def broad_scores(
    judged: Mapping[int, float], report: ScoreReport, kind: ScoreKind, act: float | None = None
) -> Mapping[int, float]:
    """Rank -> the score the sequential test reads (``judged`` itself when nothing
    changes). ``act``: the policy's act threshold; a rank judged below it that the
    broad score puts at or above it reads as the peers' median (None: lift only)."""
    ranks = report.ranks
    if kind is not ScoreKind.GPU_INDIVIDUAL or not rank_columns.any_given(
        ranks, "gpu_individual_median"
    ):
        return judged
    mean = rank_columns.floats(ranks, "gpu_individual")
    median = rank_columns.floats(ranks, "gpu_individual_median")
    with np.errstate(invalid="ignore", divide="ignore"):
        lift = np.where((mean > 0) & (median > mean), median / mean, 1.0)
    rows = np.flatnonzero(lift > 1.0).tolist()
    if not rows:
        return judged
    out = dict(judged)
    cleared = []
    for i in rows:
        r = ranks[i].rank
        if r in out:
            out[r] = out[r] * float(lift[i])
            if act is not None and judged[r] < act <= out[r]:
                cleared.append(r)
    return read_as_peers(out, cleared) if cleared else out


def read_as_peers(scores: Mapping[int, float], ranks: Iterable[int]) -> dict[int, float]:
    """``scores`` with each of ``ranks`` raised to the median of the finite positive
    scores: what the sequential test reads for a finding it must not take as evidence
    (no evidence either way, whatever small gap is left)."""
    out = dict(scores)
    finite = [v for v in out.values() if math.isfinite(v) and v > 0]
    if finite:
        level = float(np.median(finite))
        for r in ranks:
            out[r] = max(out[r], level)
    return out


def gpu_slow(report: ScoreReport, act: float) -> list[Rank]:
    """Ranks whose GPU is slow as broadly as its kernels show it: the larger of
    ``gpuIndividual`` and ``gpuIndividualMedian``, over the report's median of it, below
    ``act`` (data skew on a minority of the kernel time is no slow GPU). Found once per
    report and ``act`` in a decision (``attribution`` and ``tail_gate`` both ask)."""
    ranks = report.ranks
    found: list[Rank] = rank_table.table(ranks).derived(
        ("gpu_slow", act), lambda: _gpu_slow(ranks, act)
    )
    return list(found)


def _gpu_slow(ranks: Sequence[RankScores], act: float) -> list[Rank]:
    if len(ranks) < 2 or not rank_columns.any_given(ranks, "gpu_individual"):
        return []
    mean = rank_columns.floats(ranks, "gpu_individual")
    broad = mean
    if rank_columns.any_given(ranks, "gpu_individual_median"):
        median = rank_columns.floats(ranks, "gpu_individual_median")
        broad = np.where(np.isfinite(median), np.fmax(mean, median), mean)
    usable = np.isfinite(broad) & (broad > 0)
    if not usable.any():
        return []
    level = float(np.median(broad[usable]))
    with np.errstate(invalid="ignore"):
        slow = usable & (broad < act * level)
    slow_ranks: list[Rank] = rank_columns.numbers(ranks)[slow].tolist()  # Rank: an int
    return slow_ranks
