"""NVRx's call orders on real gloo CPU ranks: initialize before init_process_group, a
rank that skips a report, and the forms NVRx's own multi-rank tests use. Every world
runs on both report paths (``report_paths``: flat, and a tree of hosts of 2)."""

from __future__ import annotations

import math
import pickle
from typing import Any

import nvrx_ranks
import pytest
import report_paths
from report_paths import MODES, results

from pacekeeper.detector import Report, StragglerId

TIMEOUT_S = 3.0


@pytest.fixture(scope="module", params=MODES)
def late_world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> list[dict[str, Any]]:
    out = tmp_path_factory.mktemp("late")
    report_paths.spawn(
        request.param, nvrx_ranks.initialize_before_init_process_group, 2, str(out), join=False
    )
    return results(out, 2)


def test_initialize_before_init_process_group_reports_every_rank(late_world: list[dict]) -> None:
    report: Report = pickle.loads(late_world[0]["report"])
    assert pickle.loads(late_world[1]["report"]) is None  # gather_on_rank0: rank 1 gets None
    assert report.rank_to_node == {0: "node0", 1: "node1"}
    assert set(report.section_relative_perf_scores["fwd"]) == {0, 1}
    assert report.section_relative_perf_scores["fwd"][1] == pytest.approx(0.5, abs=0.12)
    flagged = report.identify_stragglers()
    assert flagged["straggler_sections_relative"] == {"fwd": {StragglerId(1, "node1")}}
    # No kernels timed on CPU: NVRx's {rank: nan} for each rank, never flagged.
    assert set(report.gpu_relative_perf_scores) == {0, 1}
    assert all(math.isnan(v) for v in report.gpu_relative_perf_scores.values())
    assert flagged["straggler_gpus_relative"] == set()


def test_rank_and_world_size_are_read_at_report_time(late_world: list[dict]) -> None:
    assert [r["before"] for r in late_world] == [(0, 1), (0, 1)]  # no group yet
    assert [r["after"] for r in late_world] == [(0, 2), (1, 2)]
    assert all(r["errors"] == {} for r in late_world)


def test_the_detectors_group_is_made_once_and_kept_across_runs(late_world: list[dict]) -> None:
    assert [r["made"] for r in late_world] == [1, 1]
    assert [r["groups"] for r in late_world] == [1, 1]  # WORLD: the detector's is not registered


def test_zero_report_interval_reports_every_iteration_once_estimated(
    late_world: list[dict],
) -> None:
    # iter_interval is known at the 17th call (16 step times), then every iteration.
    assert [r["elapsed_at"] for r in late_world] == [[17, 18, 19, 20]] * 2


@pytest.fixture(scope="module", params=MODES)
def skipping_world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> list[dict[str, Any]]:
    out = tmp_path_factory.mktemp("skip")
    report_paths.spawn(request.param, nvrx_ranks.one_rank_skips_a_report, 3, str(out), TIMEOUT_S)
    return results(out, 3)


def test_a_skipped_report_costs_the_others_one_timeout_not_a_hang(
    skipping_world: list[dict],
) -> None:
    assert skipping_world[0]["first_ok"]  # the gather that created the group worked
    for rank in (0, 2):
        result = skipping_world[rank]
        assert result["skipped"] is None
        assert result["skipped_s"] < 3 * TIMEOUT_S  # gather_object: two collectives at most
        assert result["errors"].get("report.gather", 0) >= 1
    assert skipping_world[1]["skipped"] == "not called"


def test_the_jobs_group_keeps_working_after_the_detectors_timeout(
    skipping_world: list[dict],
) -> None:
    assert [r["world_sum"] for r in skipping_world] == [3.0] * 3
    assert [r["world_sum_after"] for r in skipping_world] == [3.0] * 3  # 0 + 1 + 2


def test_after_a_failed_report_every_rank_returns_none_at_once(skipping_world: list[dict]) -> None:
    for result in skipping_world:
        assert result["later"] is None
        assert result["later_s"] < TIMEOUT_S + 1.0
        assert result["errors"].get("report.gather", 0) >= 1


@pytest.fixture(scope="module", params=MODES)
def usage_world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> list[dict[str, Any]]:
    out = tmp_path_factory.mktemp("usage")
    report_paths.spawn(request.param, nvrx_ranks.nvrx_usage_forms, 2, str(out))
    return results(out, 2)


def test_a_bare_score_name_computes_that_score_only(usage_world: list[dict]) -> None:
    report: Report = pickle.loads(usage_world[0]["bare"])
    assert report.gpu_relative_perf_scores == {} and report.section_relative_perf_scores == {}
    assert set(report.section_individual_perf_scores["fwd"]) == {0, 1}
    assert set(report.gpu_individual_perf_scores) == {0, 1}


def test_wrapped_callables_with_ignored_args_are_timed_per_rank(usage_world: list[dict]) -> None:
    module = nvrx_ranks.CallableModule.__module__
    expected = {
        "CallableModule.callable1",
        f"{module}.CallableModule.callable2",
        f"{module}.CallableModule.callable3",
        f"{module}.CallableModule.callable4",
    }
    for rank, result in enumerate(usage_world):
        report: Report = pickle.loads(result["own"])
        assert report.rank == rank and not report.gather_on_rank0
        assert set(report.local_section_summaries) == expected
        assert all(
            s[nvrx_ranks.straggler.Statistic.NUM] == 10
            for s in report.local_section_summaries.values()
        )
        assert result["originals"]
        assert result["reporter"] == {
            "rank": rank,
            "world_size": 2,
            "gather_on_rank0": False,
            "rel": True,
            "indiv": True,
        }


def test_report_backend_job_runs_on_the_jobs_group(usage_world: list[dict]) -> None:
    assert [r["on_job"] for r in usage_world] == [True, False]  # rank 0 gets the report
    # The one group of the detector the earlier runs shared; the "job" run made none,
    # and WORLD is the only registered group.
    assert [r["made"] for r in usage_world] == [1, 1]
    assert [r["groups"] for r in usage_world] == [1, 1]
