"""Every ``Statistic`` of a report, by value, as NVRx computes it.

NVRx's CPU sections are summarised with torch (``Detector._get_section_summaries``):
``torch.median`` (the lower of the two middle values of an even count), ``torch.std``
(Bessel's correction; NaN for one sample), in milliseconds. Its kernels are summarised
by its C++ CUPTI profiler: the median of an even count is the mean of the two middles
and the standard deviation divides by n, in microseconds. The expected values below
come from torch and from that arithmetic written out, never from pacekeeper's code.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest
import torch

from pacekeeper import detector as straggler
from pacekeeper.cupti_ext.kernel_stats import RingStats
from pacekeeper.detector import sections
from pacekeeper.detector.reports import summary_statistics

Detector = straggler.Detector
Statistic = straggler.Statistic


class _ScriptedClock:
    """``perf_counter_ns`` that makes each timed entry last the next scripted time."""

    def __init__(self, durations_ms: list[float]) -> None:
        self._ticks: Iterator[int] = self._schedule(durations_ms)

    @staticmethod
    def _schedule(durations_ms: list[float]) -> Iterator[int]:
        now = 1_000_000_000
        for d in durations_ms:
            yield now
            now += round(d * 1e6)
            yield now
            now += 1_000_000

    def __call__(self) -> int:
        return next(self._ticks)


def _section_stats(
    monkeypatch: pytest.MonkeyPatch, durations_ms: list[float]
) -> dict[Statistic, float]:
    monkeypatch.setattr(sections, "perf_counter_ns", _ScriptedClock(durations_ms))
    Detector.initialize(kernel_timing="none")
    for _ in durations_ms:
        with Detector.detection_section("fwd", profile_cuda=False):
            pass
    report = Detector.generate_report()
    assert report is not None
    return dict(report.local_section_summaries["fwd"])


def _torch_summary(durations_ms: list[float]) -> dict[Statistic, float]:
    # Whole nanoseconds, as both NVRx (perf_counter_ns) and the scripted clock time them.
    t = torch.tensor([round(d * 1e6) * 1e-6 for d in durations_ms], dtype=torch.float64)
    return {
        Statistic.MIN: torch.min(t).item(),
        Statistic.MAX: torch.max(t).item(),
        Statistic.MED: torch.median(t).item(),
        Statistic.AVG: torch.mean(t).item(),
        Statistic.STD: torch.std(t).item() if len(t) > 1 else math.nan,
        Statistic.NUM: len(t),
    }


@pytest.mark.parametrize(
    "durations_ms",
    [
        [10.09, 30.11],  # the pair: MED is 10.09, not 20.1
        [10.09, 30.11, 12.5, 20.0],
        [4.0, 9.0, 1.0, 7.5, 3.25],
        [2.5, 2.5, 2.5, 8.0, 8.0, 8.0],
    ],
)
def test_cpu_section_statistics_are_torch_s(
    monkeypatch: pytest.MonkeyPatch, durations_ms: list[float]
) -> None:
    got = _section_stats(monkeypatch, durations_ms)
    want = _torch_summary(durations_ms)
    assert set(got) == set(Statistic)
    assert got[Statistic.NUM] == want[Statistic.NUM]
    for stat in (Statistic.MIN, Statistic.MAX, Statistic.MED, Statistic.AVG, Statistic.STD):
        assert got[stat] == pytest.approx(want[stat], rel=1e-9), stat


def test_the_median_of_an_even_count_is_the_lower_middle(monkeypatch: pytest.MonkeyPatch) -> None:
    got = _section_stats(monkeypatch, [10.09, 30.11])
    assert got[Statistic.MED] == pytest.approx(10.09)
    assert got[Statistic.AVG] == pytest.approx(20.1)
    # torch.std of two values: |a - b| / sqrt(2).
    assert got[Statistic.STD] == pytest.approx(20.02 / math.sqrt(2))


def test_one_sample_has_nan_std_like_nvrx(monkeypatch: pytest.MonkeyPatch) -> None:
    got = _section_stats(monkeypatch, [7.25])
    assert got[Statistic.MIN] == got[Statistic.MAX] == got[Statistic.MED] == got[Statistic.AVG]
    assert got[Statistic.MED] == pytest.approx(7.25)
    assert math.isnan(got[Statistic.STD]) and got[Statistic.NUM] == 1


@pytest.mark.parametrize(
    "durations_us",
    [[10.0, 30.0], [10.0, 30.0, 12.0, 20.0], [4.0, 9.0, 1.0, 7.0, 3.0]],
)
def test_kernel_statistics_are_nvrx_s_profiler_s(durations_us: list[float]) -> None:
    stats = RingStats(64)
    stats.add(np.zeros(len(durations_us), np.int64), np.array(durations_us) * 1e3)
    got = summary_statistics(stats.snapshot()[0], 1e-3)  # ns -> us, as the report does
    # NVRx's computeStats: sort; even count -> mean of the two middles; sqrt(sum/n).
    xs, n = sorted(durations_us), len(durations_us)
    median = xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2
    avg = sum(xs) / n
    std = math.sqrt(sum((x - avg) ** 2 for x in xs) / n)
    assert got[Statistic.MIN] == pytest.approx(xs[0])
    assert got[Statistic.MAX] == pytest.approx(xs[-1])
    assert got[Statistic.MED] == pytest.approx(median)
    assert got[Statistic.AVG] == pytest.approx(avg)
    assert got[Statistic.STD] == pytest.approx(std, rel=1e-6)
    assert got[Statistic.NUM] == n
