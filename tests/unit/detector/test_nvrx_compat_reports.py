"""NVRx compatibility of what users read off a report: ``Report.identify_stragglers``'s
thresholds, each applied to its own scores with NVRx's strict ``<``, and
``Detector.reporter.name_mapper``. Imports as NVRx's users write them, swapped:
``from pacekeeper import detector as straggler``."""

from __future__ import annotations

import math

from pacekeeper import detector as straggler

Detector = straggler.Detector
StragglerId = straggler.StragglerId


def _report(
    gpu_rel: dict[int, float],
    gpu_indiv: dict[int, float],
    sec_rel: dict[str, dict[int, float]] | None = None,
    sec_indiv: dict[str, dict[int, float]] | None = None,
) -> straggler.Report:
    return straggler.Report(
        gpu_relative_perf_scores=gpu_rel,
        section_relative_perf_scores=sec_rel or {},
        gpu_individual_perf_scores=gpu_indiv,
        section_individual_perf_scores=sec_indiv or {},
        rank_to_node={0: "n0", 1: "n1", 2: "n2"},
        local_section_summaries={},
        local_kernel_summaries={},
        generate_report_elapsed_time=0.0,
        gather_on_rank0=True,
        rank=0,
    )


def _ranks(found: object) -> set[int]:
    assert isinstance(found, set)
    return {s.rank for s in found}


def test_each_gpu_threshold_applies_to_its_own_scores() -> None:
    report = _report(gpu_rel={0: 0.6, 1: 0.9, 2: 1.0}, gpu_indiv={0: 0.9, 1: 0.6, 2: 1.0})
    # NVRx's positional order: gpu_rel, section_rel, gpu_indiv, section_indiv.
    found = report.identify_stragglers(0.7, 0.5, 0.95, 0.5)
    assert _ranks(found["straggler_gpus_relative"]) == {0}
    assert _ranks(found["straggler_gpus_individual"]) == {0, 1}
    found = report.identify_stragglers(gpu_rel_threshold=0.95, gpu_indiv_threshold=0.7)
    assert _ranks(found["straggler_gpus_relative"]) == {0, 1}
    assert _ranks(found["straggler_gpus_individual"]) == {1}
    assert found["straggler_gpus_relative"] >= {StragglerId(rank=1, node="n1")}


def test_each_section_threshold_applies_to_its_own_scores() -> None:
    report = _report(
        gpu_rel={},
        gpu_indiv={},
        sec_rel={"fwd": {0: 0.6, 1: 0.9}},
        sec_indiv={"fwd": {0: 0.9, 1: 0.6}},
    )
    found = report.identify_stragglers(0.5, 0.7, 0.5, 0.95)
    assert {k: _ranks(v) for k, v in found["straggler_sections_relative"].items()} == {"fwd": {0}}
    assert {k: _ranks(v) for k, v in found["straggler_sections_individual"].items()} == {
        "fwd": {0, 1}
    }
    found = report.identify_stragglers(section_rel_threshold=0.5, section_indiv_threshold=0.5)
    assert found["straggler_sections_relative"] == {}  # no empty sets, as NVRx
    assert found["straggler_sections_individual"] == {}


def test_a_score_equal_to_the_threshold_is_not_a_straggler() -> None:
    at, under = 0.75, math.nextafter(0.75, 0.0)
    report = _report(
        gpu_rel={0: at, 1: under, 2: math.nan},
        gpu_indiv={0: at, 1: under, 2: math.nan},
        sec_rel={"fwd": {0: at, 1: under, 2: math.nan}},
        sec_indiv={"fwd": {0: at, 1: under, 2: math.nan}},
    )
    found = report.identify_stragglers()  # 0.75 each, NVRx's defaults
    assert _ranks(found["straggler_gpus_relative"]) == {1}
    assert _ranks(found["straggler_gpus_individual"]) == {1}
    assert _ranks(found["straggler_sections_relative"]["fwd"]) == {1}
    assert _ranks(found["straggler_sections_individual"]["fwd"]) == {1}


def test_name_mapper_numbers_sections_from_zero_and_keeps_their_ids() -> None:
    # NVRx's test_wrap_callables copies reporter.name_mapper.id_to_section_name.
    Detector.initialize(kernel_timing="none")
    with Detector.detection_section("fwd", profile_cuda=False):
        pass
    with Detector.detection_section("bwd", profile_cuda=False):
        pass
    assert Detector.generate_report() is not None
    mapper = Detector.reporter.name_mapper
    assert mapper.id_to_section_name == {0: "fwd", 1: "bwd"}
    assert mapper.section_name_to_id == {"fwd": 0, "bwd": 1}
    assert mapper.get_section_name(1) == "bwd" and mapper.get_section_id("fwd") == 0
    with Detector.detection_section("opt", profile_cuda=False):
        pass
    Detector.generate_report()
    again = Detector.reporter.name_mapper
    assert again.id_to_section_name == {0: "fwd", 1: "bwd", 2: "opt"}
    assert again.section_counter == 3 and again.id_to_kernel_name == {}
    Detector.shutdown()
    Detector.initialize(kernel_timing="none")
    assert Detector.reporter.name_mapper.id_to_section_name == {}  # a new run starts over


def test_nvrx_s_documented_submodules_hold_the_same_names() -> None:
    # NVRx's API pages document straggler.reporting, .statistics and .straggler; its
    # tests import straggler.interval_tracker.
    from pacekeeper.detector.interval_tracker import ReportIntervalTracker
    from pacekeeper.detector.reporting import Report, ReportGenerator
    from pacekeeper.detector.reporting import StragglerId as ReportingStragglerId
    from pacekeeper.detector.statistics import Statistic

    assert (Report, ReportingStragglerId, Statistic) == (
        straggler.Report,
        straggler.StragglerId,
        straggler.Statistic,
    )
    assert straggler.reporting.Report is straggler.straggler.Report
    assert isinstance(Detector.reporter, ReportGenerator)
    tracker = straggler.interval_tracker.ReportIntervalTracker(time_interval=0.5)
    assert isinstance(tracker, ReportIntervalTracker)
    assert tracker.INTERVAL_ESTIMATION_ITERS == 16 and tracker.iter_interval is None
    assert tracker.adaptive is False  # NVRx's class estimates once
