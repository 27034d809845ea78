"""A disruptive step needs every part of the GPU's work slowed: a rank whose fastest
kernels kept their pace is data skew, not a slow GPU.

``breadth`` reads a rank's kernels' median beside their mean, which tells a slow GPU
from data skew while the skewed (data-dependent) kernels are under half the kernel
time. Past half, the median sits on a skewed kernel too, and a rank whose heavier
batch stayed with it for ten to twenty windows was restarted: the sampled space at
f677510 (issue #38) had five such false disruptions in 10,240 GPU-days, every one with
the skewed kernels at 0.58-0.78 of the kernel time and mostly of fixed launch size,
so that no per-work reading could see the larger batch.

``gpuIndividualFast`` (schemaVersion 8) is how the fastest tenth of a rank's kernel
time ran against its own baseline. A slow GPU slows every kernel and this falls with
it (a 10 % slower GPU reads ~0.90). Data skew leaves the kernels whose work the model
fixes (parameter updates, casts of weights, fixed-shape GEMMs) at the GPU's own pace:
it stays at its peers' level. So the sequential test reads a rank judged below
``thresholds.act`` whose fastest tenth is within ``FAST_BAND`` of the peers' median of
it as its peers' median: no evidence either way. Notices read the judged scores
unchanged, so such a rank is still named.

Where it cannot tell: a GPU throttled by its clocks slows compute-bound kernels more
than memory-bound ones; one whose fastest tenth of kernel time is memory-bound work
slowed under ``FAST_BAND`` reads as partial here and is named but never disrupted
(docs/decision-rule.md, "Partial slowdowns"). A rank found by its tail or its host
side keeps its finding: between an intermittent GPU's bursts every kernel keeps pace,
and a host-side finding is the process's own. So does a rank whose own kernels kept
their baseline (``gpuIndividual`` not below ``act``): the peer check found it (a GPU
slow from the job's start, the real AR trace's straggler), and against its own baseline
its fastest tenth reads at pace whatever the GPU.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import numpy as np

from pacekeeper.controller.core import rank_columns
from pacekeeper.controller.core.breadth import read_as_peers
from pacekeeper.controller.core.ids import Rank
from pacekeeper.controller.core.policy_types import ScoreKind
from pacekeeper.detector.score_report import ScoreReport

FAST_BAND = 0.02
"""How far below the peers' median of ``gpuIndividualFast`` a rank's fastest tenth may
read and still count as keeping pace: healthy ranks of the sampled space read within
0.6 % of it (1.8 % under fast drift, which is the rank's own and slows every kernel),
skewed ranks within 0.4 %, a GPU 10 % slower 9-12 % below it."""


def kept_pace(report: ScoreReport, act: float) -> list[Rank]:
    """Ranks slowed against their own baseline (``gpuIndividual`` below ``act`` times
    the report's median of it) whose fastest tenth of kernel time ran within
    ``FAST_BAND`` of the report's median of that; none when no rank carries
    ``gpuIndividualFast``. A rank the peer check lowered while its own kernels kept
    their baseline (slow from its start) is not among them: against its own baseline
    every figure reads it at pace, so its fastest tenth says nothing."""
    ranks = report.ranks
    if len(ranks) < 2 or not rank_columns.any_given(ranks, "gpu_individual_fast"):
        return []
    fast = rank_columns.floats(ranks, "gpu_individual_fast")
    mean = rank_columns.floats(ranks, "gpu_individual")
    usable = np.isfinite(fast) & (fast > 0) & np.isfinite(mean) & (mean > 0)
    if not usable.any():
        return []
    level = float(np.median(fast[usable]))
    own = float(np.median(mean[usable]))
    keep = usable & (fast >= level * (1.0 - FAST_BAND)) & (mean < act * own)
    numbers = rank_columns.numbers(ranks)
    return [Rank(int(numbers[i])) for i in np.flatnonzero(keep).tolist()]


def held(
    scores: Mapping[int, float],
    judged: Mapping[int, float],
    report: ScoreReport,
    *,
    kind: ScoreKind,
    act: float,
    keep_findings: Collection[int] = (),
) -> Mapping[int, float]:
    """``scores`` (what the sequential test would read) with each rank judged below
    ``act`` whose fastest kernels kept pace (``kept_pace``) read as the peers' median,
    but for ``keep_findings`` (the tail's and the host side's ranks). Only policies
    judging ``gpuIndividual`` are affected: the statistic is against the rank's own
    baseline, as their score is."""
    if kind is not ScoreKind.GPU_INDIVIDUAL:
        return scores
    below = {r for r, v in judged.items() if v < act and r not in keep_findings}
    if not below:
        return scores
    partial = [r for r in kept_pace(report, act) if r in below and r in scores]
    return read_as_peers(scores, partial) if partial else scores
