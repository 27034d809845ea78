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
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from pacekeeper.controller.core import rank_columns
from pacekeeper.controller.core.policy_types import ScoreKind
from pacekeeper.detector.score_report import ScoreReport


def broad_scores(
    judged: Mapping[int, float], report: ScoreReport, kind: ScoreKind
) -> Mapping[int, float]:
    """Rank -> the score the sequential test reads (``judged`` itself when nothing
    changes)."""
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
    for i in rows:
        r = ranks[i].rank
        if r in out:
            out[r] = out[r] * float(lift[i])
    return out
