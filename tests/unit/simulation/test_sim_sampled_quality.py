"""Exact bounds (Garwood Poisson, Clopper-Pearson) and the per-cell arithmetic."""

from __future__ import annotations

import math

import pytest

from pacekeeper.controller.simulation.quality import Quality
from pacekeeper.controller.simulation.sampled_quality import (
    RunResult,
    binomial_bounds,
    cells,
    poisson_upper,
)


def test_poisson_upper_matches_the_chi_square_tables() -> None:
    # 0.5 * chi2.ppf(0.95, 2k + 2): k=0 -> 2.9957, k=1 -> 4.7439, k=5 -> 10.5130.
    assert poisson_upper(0, 1.0) == pytest.approx(-math.log(0.05), rel=1e-9)
    assert poisson_upper(1, 1.0) == pytest.approx(4.743865, rel=1e-6)
    assert poisson_upper(5, 1.0) == pytest.approx(10.51303, rel=1e-5)
    assert poisson_upper(0, 10240.0) == pytest.approx(2.9957 / 10240.0, rel=1e-4)
    # Thousands of events (NVRx's false stops): Wilson-Hilferty's chi-square to 1e-4.
    k, z = 2880, 1.6448536
    wh = (k + 1) * (1 - 1 / (9 * (k + 1)) + z / (3 * math.sqrt(k + 1))) ** 3
    assert poisson_upper(k, 2048.0) == pytest.approx(wh / 2048.0, rel=1e-4)
    assert poisson_upper(k, 2048.0) > k / 2048.0
    with pytest.raises(ValueError, match="exposure"):
        poisson_upper(0, 0.0)


def test_clopper_pearson_matches_known_intervals() -> None:
    lo, hi = binomial_bounds(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.308497, rel=1e-5)
    lo, hi = binomial_bounds(19, 20)
    assert lo == pytest.approx(0.751267, rel=1e-5) and hi == pytest.approx(0.998735, rel=1e-5)
    assert binomial_bounds(20, 20)[1] == 1.0


def _q(*, faulty: int, found: int, ttd: float | None, tta: float | None, fa: int) -> Quality:
    return Quality(named=0, right=0, faulty=faulty, found=found, time_to_detect_s=ttd,
                   time_to_act_s=tta, false_actions=fa, gpu_days=10.0,
                   hardware_actions_on_imbalance=0)  # fmt: skip


def test_recall_in_time_and_false_disruptions_per_cell() -> None:
    rs = [
        RunResult.of("p", "drift", "slow-gpu", _q(faulty=1, found=1, ttd=120, tta=300, fa=0)),
        RunResult.of("p", "drift", "slow-gpu", _q(faulty=1, found=1, ttd=360, tta=700, fa=1)),
        RunResult.of("p", "drift", "slow-gpu", _q(faulty=1, found=0, ttd=None, tta=None, fa=0)),
        RunResult.of("p", "drift", "healthy", _q(faulty=0, found=0, ttd=None, tta=None, fa=2)),
    ]
    by = {(c.family, c.fault): c for c in cells(rs)}
    c = by[("drift", "slow-gpu")]
    assert (c.runs, c.faulty_runs, c.found, c.acted) == (3, 3, 1, 1)
    assert c.worst_find_s == math.inf  # one never found
    assert c.median_act_s == 500.0
    total = by[("all", "all")]
    assert total.false_disruptions == 3 and total.gpu_days == 40.0
    assert total.rate == pytest.approx(3 / 40)
    assert total.upper95 == pytest.approx(poisson_upper(3, 40.0))
    assert by[("drift", "healthy")].recall_acted is None
