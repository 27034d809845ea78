"""The detector's report path as a tree (issue 42): real gloo ranks grouped into "hosts"
on one machine through ``LOCAL_WORLD_SIZE``.

The tree must give rank 0 the report the flat group gives (same ranks, same scores, the
culprit found), hold sockets bounded by the host's size (the flat group holds one per
rank of the job), let a job's sub-groups report at their own pace, and degrade as the
flat group does when a rank skips a report: logged and counted, never raised."""

from __future__ import annotations

import math
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import report_paths
import tree_worlds
from tree_worlds import SKIPPER, SLOW

from pacekeeper.detector import Report, StragglerId

WORLD = 8
TIMEOUT_S = 3.0


def _on_tree(
    out: Path, fn: Callable[..., None], *args: Any, per_node: int = 2, fanout: int = 2
) -> list[dict[str, Any]]:
    """``fn`` on ``WORLD`` ranks in hosts of ``per_node``; every rank checked to have
    made its report group on the tree."""
    report_paths.spawn("tree", fn, WORLD, str(out), *args, per_node=per_node, fanout=fanout)
    return report_paths.results(out, WORLD)


@pytest.fixture(scope="module")
def both_paths(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    # 4 hosts of 2, fan-out 2: two leader levels.
    return _on_tree(tmp_path_factory.mktemp("both"), tree_worlds.same_payloads_both_paths)


@pytest.fixture(scope="module")
def detector_tree(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    out = tmp_path_factory.mktemp("detector")
    return _on_tree(out, tree_worlds.detector_on_tree, per_node=4, fanout=8)  # 2 hosts x 4


def test_the_tree_gives_rank0_the_flat_groups_scores(both_paths: list[dict]) -> None:
    assert {r["tree_type"] for r in both_paths} == {"TreeGroup"}
    flat, tree = both_paths[0]["flat"]["scores"], both_paths[0]["tree"]["scores"]
    assert tree is not None
    assert tree == flat
    assert set(tree.rank_to_node) == set(range(WORLD))
    backward = tree.section_relative["backward"]
    assert min(backward, key=backward.__getitem__) == SLOW
    assert backward[SLOW] == pytest.approx(0.7)
    assert all(r["tree"]["scores"] is None for r in both_paths[1:])


def test_the_tree_agrees_with_the_flat_group_on_every_collective(both_paths: list[dict]) -> None:
    for result in both_paths:
        for kind in ("all_gather", "broadcast", "max"):
            assert result["tree"][kind] == result["flat"][kind], kind
        assert result["tree"]["all_gather"] == [r * 10 for r in range(WORLD)]
        assert result["tree"]["broadcast"] == "from 0"
        assert result["tree"]["max"] == WORLD - 1


def test_tree_sockets_are_bounded_by_the_hosts_size(both_paths: list[dict]) -> None:
    # 4 hosts of 2, fan-out 2: a member holds its host's group (2 sockets); a leader adds
    # at most two leader groups of 3. The flat group holds one per rank.
    for rank, result in enumerate(both_paths):
        assert result["flat_sockets"] == WORLD, rank
        bound = 2 + 2 * 3 if result["leader"] else 2
        assert result["tree_sockets"] <= bound, (rank, result["tree_sockets"])
    members = [r["tree_sockets"] for r in both_paths if not r["leader"]]
    assert members and max(members) < WORLD


def test_the_detector_reports_every_rank_through_the_tree(detector_tree: list[dict]) -> None:
    assert all(r["kinds"] == ["TreeGroup"] for r in detector_tree)
    for key in ("first", "second"):
        reports = [pickle.loads(r[key]) for r in detector_tree]
        assert all(r is None for r in reports[1:])
        report: Report = reports[0]
        assert set(report.rank_to_node) == set(range(WORLD))
        backward = report.section_relative_perf_scores["backward"]
        assert min(backward, key=backward.__getitem__) == SLOW, (key, backward)
        flagged = report.identify_stragglers()["straggler_sections_relative"]
        assert StragglerId(SLOW, f"h{SLOW}") in flagged["backward"], key
    assert all(not r["errors"] for r in detector_tree)


def test_the_detectors_sockets_grow_with_the_host_not_the_job(detector_tree: list[dict]) -> None:
    # 2 hosts of 4: a member holds its host's 4; a leader 4 and the leaders' group of 2.
    added = [r["added"] for r in detector_tree]
    members = [a for rank, a in enumerate(added) if rank % 4]
    assert max(members) <= 4, added
    assert max(added) <= 4 + 2, added


def test_sub_groups_report_on_their_own_trees(tmp_path: Path) -> None:
    results = _on_tree(tmp_path, tree_worlds.split_on_tree)
    half = WORLD // 2
    for first in (0, half):
        result = results[first]
        assert result["kinds"] == ["TreeGroup"]
        assert result["reports"] >= 2
        last: Report = pickle.loads(result["last"])
        assert set(last.rank_to_node) == set(range(first, first + half))
        assert not result["errors"]
    assert all(pickle.loads(r["last"]) is None for i, r in enumerate(results) if i % half)


def test_a_rank_that_skips_a_report_costs_a_timeout_not_a_hang(tmp_path: Path) -> None:
    results = _on_tree(tmp_path, tree_worlds.one_rank_skips_on_tree, TIMEOUT_S)
    assert all(r["first_ok"] for r in results[:1])
    assert results[SKIPPER]["second"] == "not called"
    assert all(r["second"] is None for i, r in enumerate(results) if i != SKIPPER)
    # The failed level is logged and counted on the root, as the flat group's gather is.
    assert results[0]["after_second"].get("report.gather", 0) >= 1
    for rank, result in enumerate(results):
        assert result["third"] is None, rank  # every rank: the tree is abandoned
        assert result["errors"].get("report.gather", 0) >= 1, (rank, result["errors"])
        # The job's own group is untouched: 8 ones, then 0 + 1 + ... + 7.
        assert result["world_sums"] == (WORLD, sum(range(WORLD))), rank
        assert math.isfinite(result["third_s"])


@pytest.fixture(scope="module")
def on_leaders(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    # 4 hosts of 2, fan-out 2: the references climb two leader levels and come back.
    return _on_tree(tmp_path_factory.mktemp("leaders"), tree_worlds.leaders_score_as_one_rank)


def test_node_leaders_score_as_rank0_scoring_every_payload(on_leaders: list[dict]) -> None:
    root = on_leaders[0]
    want, got = root["want"], root["got"]
    assert got is not None and want is not None
    # Exactly, score for score: the references are the same minima, merged up the tree.
    assert got.gpu_relative == want.gpu_relative
    assert got.gpu_relative_median == want.gpu_relative_median
    assert got.section_relative == want.section_relative
    assert got.section_individual == want.section_individual
    assert got.rank_to_node == want.rank_to_node
    assert min(got.gpu_relative, key=got.gpu_relative.__getitem__) == SLOW
    # Odd ranks launch attention twice as big in twice the time: per unit of work they
    # are their peers' equals, so the median reads only the slow GPU as slow.
    assert min(got.gpu_relative_median, key=got.gpu_relative_median.__getitem__) == SLOW
    assert sorted(root["rank_info"]) == list(range(WORLD))
    assert all(r["got"] is None for r in on_leaders[1:])


def test_each_rank_gets_its_own_scores_from_its_leader(on_leaders: list[dict]) -> None:
    want = on_leaders[0]["want"]
    for rank, result in enumerate(on_leaders):
        own = result["own"]
        assert own.gpu_relative == {rank: want.gpu_relative[rank]}, rank
        assert own.section_relative["backward"] == {rank: want.section_relative["backward"][rank]}


def test_no_rank_holds_another_hosts_payloads(on_leaders: list[dict]) -> None:
    for rank, result in enumerate(on_leaders):
        # Two exchanges: a leader summarised its host's 2 payloads each time; a member
        # summarised nothing (its payload went to its leader).
        assert result["held"] == ([2, 2] if result["leader"] else []), rank
