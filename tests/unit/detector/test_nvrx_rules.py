"""NVRx's scoring rules (detector/nvrx_scores.py), each against values computed by hand,
and ``reporting.ReportGenerator`` choosing them by default and pacekeeper's by keyword."""

from __future__ import annotations

import math

import pytest

from pacekeeper.detector import Statistic, nvrx_scores, reporting
from pacekeeper.detector.nvrx_scores import RankTimes


def times(sections: dict[str, float], kernels: dict[str, tuple[float, float]]) -> RankTimes:
    """Kernels as name -> (median, weight)."""
    return RankTimes(
        sections,
        {k: m for k, (m, _) in kernels.items()},
        {k: w for k, (_, w) in kernels.items()},
    )


def test_relative_reference_is_the_minimum_over_names_every_rank_ran() -> None:
    assert nvrx_scores.common_minima([{"a": 4.0, "b": 1.0}, {"a": 2.0}]) == {
        "a": 2.0,
        "b": pytest.approx(math.nan, nan_ok=True),
    }


def test_a_kernel_one_rank_lacks_leaves_every_gpu_score_and_none_common_gives_nan() -> None:
    # k0 on all three ranks, k1 missing on rank 2: only k0 counts, on every rank.
    ranks = [
        times({}, {"k0": (2.0, 1.0), "k1": (1.0, 9.0)}),
        times({}, {"k0": (4.0, 1.0), "k1": (8.0, 9.0)}),
        times({}, {"k0": (8.0, 1.0)}),
    ]
    gpu = [g for g, _ in nvrx_scores.relative_scores(ranks)]
    assert gpu == pytest.approx([1.0, 0.5, 0.25])
    # Two ranks without any kernel (NVRx's test_relative_gpu_scores_ranks_without_kernels):
    # no kernel is common, so every rank's score is NaN, not only theirs.
    ranks = [times({}, {"k": (1.0, 1.0)}), times({}, {}), times({}, {"k": (2.0, 1.0)})]
    assert all(math.isnan(g) for g, _ in nvrx_scores.relative_scores(ranks))


def test_a_section_one_rank_lacks_scores_nan_even_on_the_rank_that_ran_it() -> None:
    ranks = [times({"s": 4.0, "only0": 1.0}, {}), times({"s": 2.0}, {})]
    (_, s0), (_, s1) = nvrx_scores.relative_scores(ranks)
    assert s0["s"] == 0.5 and s1 == {"s": 1.0}
    assert math.isnan(s0["only0"])


def test_gpu_score_weighs_each_kernel_by_its_time() -> None:
    # k0 2x slow (score 0.5) with weight 30, k1 as fast as the reference with weight 10.
    ref = {"k0": 1.0, "k1": 3.0}
    score = nvrx_scores.gpu_score({"k0": 2.0, "k1": 3.0}, {"k0": 30.0, "k1": 10.0}, ref)
    assert score == pytest.approx((0.5 * 30 + 1.0 * 10) / 40)
    assert math.isnan(nvrx_scores.gpu_score({"k": 0.0}, {"k": 0.0}, {"k": 0.0}))


def test_individual_baseline_is_the_smallest_median_ever_this_window_included() -> None:
    sec, ker = nvrx_scores.RunningMinimum(), nvrx_scores.RunningMinimum()
    gpu, s = nvrx_scores.individual_scores(times({"s": 2.0}, {"k": (2.0, 1.0)}), sec, ker)
    assert gpu == 1.0 and s == {"s": 1.0}
    # One fast window (0.5x) sets the baseline at once...
    gpu, s = nvrx_scores.individual_scores(times({"s": 1.0}, {"k": (1.0, 1.0)}), sec, ker)
    assert gpu == 1.0 and s == {"s": 1.0}
    # ...so going back to the old times scores 0.5.
    gpu, s = nvrx_scores.individual_scores(times({"s": 2.0}, {"k": (2.0, 1.0)}), sec, ker)
    assert gpu == 0.5 and s == {"s": 0.5}


def test_only_ncclDev_kernels_are_communication() -> None:  # noqa: N802 - NVRx's name
    assert nvrx_scores.is_comm_kernel("ncclDevKernel_AllReduce_Sum_f32")
    assert not nvrx_scores.is_comm_kernel("ncclKernel_AllReduce")


def summary(med: float) -> dict[Statistic, float]:
    return {Statistic.MED: med, Statistic.AVG: med, Statistic.NUM: 3}


def test_the_generator_scores_by_nvrx_rules_unless_told_pacekeeper() -> None:
    windows = [1.0, 0.5, 1.0]  # a 0.5x window, then the old times again
    got = {}
    for rules in ("nvrx", "pacekeeper"):
        gen = reporting.ReportGenerator(
            ["individual_perf_scores"], gather_on_rank0=False, rules=rules
        )
        assert gen.rules == rules
        for f in windows:
            report = gen.generate_report({}, kernel_summaries={"k": summary(f)})
        assert report is not None
        got[rules] = report.gpu_individual_perf_scores[0]
    assert got["nvrx"] == pytest.approx(0.5)
    assert got["pacekeeper"] == pytest.approx(1.0)  # one lucky window sets no baseline
    with pytest.raises(ValueError, match="rules"):
        reporting.ReportGenerator(["relative_perf_scores"], rules="other")  # type: ignore[arg-type]


def test_the_name_mapper_module_path_and_its_gather_on_one_process() -> None:
    from pacekeeper.detector.name_mapper import NameMapper

    mapper = NameMapper(pg=None)
    mapper.gather_and_assign_ids(kernel_names=["k0", "k1"], section_names=["s0"])
    mapper.gather_and_assign_ids(kernel_names=["k1", "k2"], section_names=["s1", "s0"])
    assert mapper.kernel_name_to_id == {"k0": 0, "k1": 1, "k2": 2}
    assert mapper.section_name_to_id == {"s0": 0, "s1": 1}
    gen = reporting.ReportGenerator(["relative_perf_scores"])
    assert isinstance(gen.name_mapper, NameMapper)
