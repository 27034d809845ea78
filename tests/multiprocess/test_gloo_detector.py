"""Real torch.distributed (gloo) ranks on CPU; one rank made 30% slower in one section.
Every world runs on both report paths (``report_paths``: flat, and a tree of 2 hosts).

"30% slower" means 30% less throughput: the section takes 1/0.7 as long, a relative
score of 0.70, below NVRx's default threshold 0.75.
"""

from __future__ import annotations

import pickle
from typing import Any

import gloo_worlds
import pytest
import report_paths

from pacekeeper.detector import Report, StragglerId

WORLD = 4


@pytest.fixture(scope="module", params=report_paths.MODES)
def gathered(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> list[dict[str, Any]]:
    out = tmp_path_factory.mktemp("gathered")
    report_paths.spawn(request.param, gloo_worlds.gathered_world, WORLD, str(out))
    return report_paths.results(out, WORLD)


@pytest.fixture(scope="module", params=report_paths.MODES)
def split(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> list[dict[str, Any]]:
    out = tmp_path_factory.mktemp("split")
    report_paths.spawn(request.param, gloo_worlds.split_world, WORLD, str(out))
    return report_paths.results(out, WORLD)


def test_slow_rank_is_flagged_on_rank0_and_by_no_other_rank(gathered: list[dict]) -> None:
    reports = [pickle.loads(r["slow"]) for r in gathered]
    assert all(r is None for r in reports[1:]), "gather_on_rank0: other ranks get None"
    report: Report = reports[0]
    stragglers = report.identify_stragglers()
    assert stragglers["straggler_sections_relative"] == {"backward": {StragglerId(2, "n1")}}
    assert stragglers["straggler_gpus_relative"] == set()
    assert report.section_relative_perf_scores["backward"][2] == pytest.approx(0.7, abs=0.06)
    assert set(report.section_relative_perf_scores["forward"]) == {0, 1, 2, 3}


def test_healthy_interval_reports_flag_nobody(gathered: list[dict]) -> None:
    healthy = gathered[0]["healthy"]
    assert len(healthy) >= 2
    for report in healthy:
        flagged = report.identify_stragglers()
        assert flagged["straggler_sections_relative"] == {}
        assert flagged["straggler_sections_individual"] == {}
        assert set(report.rank_to_node) == {0, 1, 2, 3}


def test_interval_reports_happen_at_the_same_iteration_on_every_rank(gathered: list[dict]) -> None:
    iterations = [r["reported_at"] for r in gathered]
    assert len(iterations[0]) >= 2
    assert all(it == iterations[0] for it in iterations)


def test_reporting_rank_publishes_a_score_report_with_nodes(gathered: list[dict]) -> None:
    latest = gathered[0]["latest"]
    assert latest is not None and gathered[1]["latest"] is None
    assert [r.rank for r in latest.ranks] == [0, 1, 2, 3]
    assert {r.rank: r.node for r in latest.ranks} == {0: "n0", 1: "n0", 2: "n1", 3: "n1"}
    worst = min(latest.ranks, key=lambda r: r.section_relative["backward"])
    assert worst.rank == 2 and latest.summary.worst_rank == 2
    assert all(r["errors"] == {} for r in gathered)


def test_without_gather_each_rank_gets_its_own_report(split: list[dict]) -> None:
    for rank, result in enumerate(split):
        report: Report = result["own"]
        assert report.rank == rank and not report.gather_on_rank0
        assert set(report.rank_to_node) == {rank}
        assert set(report.section_relative_perf_scores["forward"]) == {rank}
        flagged = report.identify_stragglers()["straggler_sections_relative"]
        assert flagged == ({"forward": {StragglerId(2, "n2")}} if rank == 2 else {})


def test_sub_groups_report_separately_with_global_ranks(split: list[dict]) -> None:
    assert split[1]["sub_last"] is None and split[3]["sub_last"] is None
    low, high = split[0]["sub_last"], split[2]["sub_last"]
    assert set(low.rank_to_node) == {0, 1} and set(high.rank_to_node) == {2, 3}
    assert low.identify_stragglers()["straggler_sections_relative"] == {}
    assert high.identify_stragglers()["straggler_sections_relative"] == {
        "forward": {StragglerId(3, "n3")}
    }
    assert split[0]["sub_reports"] and split[2]["sub_reports"]
