"""NVRx's published rule, as the baseline implements it, on hand-made windows."""

from __future__ import annotations

import numpy as np
import pytest

from pacekeeper.controller.simulation.models import WindowSummary
from pacekeeper.controller.simulation.nvrx_rule import (
    NEMO_RECIPE,
    NVRX_DEFAULT,
    NvrxScorer,
    flagged,
)

NAMES = ("gemm", "softmax", "ncclDevKernel_AllReduce", "only_some")


def window(med: list[list[float]], tot: list[list[float]], sec: list[float], i: int = 0):
    m = np.array(med, dtype=float)
    return WindowSummary(
        index=i,
        start_s=60.0 * i,
        end_s=60.0 * (i + 1),
        steps=30,
        section_names=("step",),
        section_median_s=np.array(sec, dtype=float)[:, None],
        section_samples=np.full(m.shape[0], 30),
        kernel_names=NAMES,
        kernel_median_ns=m,
        kernel_count=np.where(np.isfinite(m), 30, 0),
        kernel_total_ns=np.array(tot, dtype=float),
    )


def test_relative_gpu_score_is_time_weighted_min_of_medians_without_nccl_or_partial_kernels():
    nan = np.nan
    w = window(
        med=[[100, 10, 5000, 7], [200, 10, 10, nan], [100, 20, 10, 7]],
        tot=[[3000, 100, 1, 50], [6000, 100, 1, nan], [3000, 300, 1, 50]],
        sec=[1.0, 2.0, 1.0],
    )
    s = NvrxScorer().score(w)
    # rank 1: gemm 100/200 weight 6000, softmax 10/10 weight 100 (nccl and the kernel
    # rank 1 never ran are left out)
    assert s.gpu_relative[1] == pytest.approx((0.5 * 6000 + 1.0 * 100) / 6100)
    assert s.gpu_relative[2] == pytest.approx((1.0 * 3000 + 0.5 * 300) / 3300)
    assert s.gpu_relative[0] == pytest.approx(1.0)
    assert s.section_relative[:, 0] == pytest.approx([1.0, 0.5, 1.0])


def test_individual_score_uses_the_minimum_median_ever_seen() -> None:
    sc = NvrxScorer()
    tot = [[1.0, 1.0, 1.0, 1.0]]
    sc.score(window([[80, 10, 1, 1]], tot, [1.0], 0))  # one lucky window
    s = sc.score(window([[100, 10, 1, 1]], tot, [1.0], 1))
    # gemm 80/100 and softmax 1.0, and 'only_some' 1.0, equal weights (nccl left out)
    assert s.gpu_individual[0] == pytest.approx((0.8 + 1.0 + 1.0) / 3)
    s2 = sc.score(window([[100, 10, 1, 1]], tot, [1.0], 2))
    assert s2.gpu_individual[0] == pytest.approx(s.gpu_individual[0])  # locked forever


def test_flags_strictly_below_the_threshold_and_nemo_looks_at_gpu_scores_only() -> None:
    w = window(
        med=[[100, 10, 1, 1], [134, 10, 1, 1], [133, 10, 1, 1]],
        tot=[[1, 0, 1, 0], [1, 0, 1, 0], [1, 0, 1, 0]],
        sec=[1.0, 1.0, 1.5],
    )
    s = NvrxScorer().score(w)
    assert s.gpu_relative[1] < 0.75 < s.gpu_relative[2]
    assert flagged(s, NVRX_DEFAULT).tolist() == [False, True, True]  # rank 2 by its section
    assert flagged(s, NEMO_RECIPE).tolist() == [False, False, False]
