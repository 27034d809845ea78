"""``reporting.ReportGenerator`` built from NVRx's constructor on 3 real gloo ranks: the
scores' values, gather_on_rank0's shapes and the name ids agreed across ranks.

Expected values by hand (report_generator_ranks): kernel A weighs 10x its median, B 1x;
rank 1 is 2x slow in A, rank 2 2x slow in B; the NCCL kernel (100x slow on rank 0) is
not scored. GPU relative: rank 1 (0.5 * 20 + 1 * 4) / 24, rank 2 (1 * 10 + 0.5 * 8) / 18.
Individual baselines are half of rank 0's times, so rank 0 scores 0.5 and ranks 1 and 2
half of their relative scores."""

from __future__ import annotations

import math
import pickle
from pathlib import Path
from typing import Any

import pytest
import report_generator_ranks

from pacekeeper.detector import Report
from pacekeeper.detector.local_world import spawn_world

WORLD = 3
Ranks = list[dict[bool, dict[str, Any]]]
GPU_REL = {0: 1.0, 1: 14 / 24, 2: 14 / 18}
GPU_IND = {0: 0.5, 1: 7 / 24, 2: 7 / 18}
FWD_REL = {0: 1.0, 1: 1 / 2, 2: 1 / 3}
FWD_IND = {0: 0.5, 1: 0.25, 2: 0.5 / 3}


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> list[dict[bool, dict[str, Any]]]:
    out = tmp_path_factory.mktemp("report_generator")
    spawn_world(report_generator_ranks.generate, WORLD, str(out))
    return [pickle.loads((out / f"rank{r}.pkl").read_bytes()) for r in range(WORLD)]


def _report(ranks: list[dict[bool, dict[str, Any]]], gather: bool, rank: int) -> Report | None:
    report: Report | None = pickle.loads(ranks[rank][gather]["report"])
    return report


def test_gathered_on_rank0_every_ranks_scores_by_value(ranks: Ranks) -> None:
    report = _report(ranks, True, 0)
    assert report is not None and report.rank is None and report.gather_on_rank0
    assert _report(ranks, True, 1) is None and _report(ranks, True, 2) is None
    assert report.gpu_relative_perf_scores == pytest.approx(GPU_REL)
    assert report.gpu_individual_perf_scores == pytest.approx(GPU_IND)
    assert report.section_relative_perf_scores["fwd"] == pytest.approx(FWD_REL)
    assert report.section_individual_perf_scores["fwd"] == pytest.approx(FWD_IND)
    assert report.rank_to_node == {r: f"node{r}" for r in range(WORLD)}
    # A section one rank ran is compared with itself there, NaN on the ranks without it.
    only = report.section_relative_perf_scores["only_rank0"]
    assert only[0] == pytest.approx(1.0) and math.isnan(only[1]) and math.isnan(only[2])
    flagged = report.identify_stragglers()["straggler_gpus_relative"]
    assert {s.rank for s in flagged} == {1}


def test_without_gather_each_rank_scores_itself_against_the_group(ranks: Ranks) -> None:
    for r in range(WORLD):
        report = _report(ranks, False, r)
        assert report is not None and report.rank == r
        assert report.gpu_relative_perf_scores == pytest.approx({r: GPU_REL[r]})
        assert report.gpu_individual_perf_scores == pytest.approx({r: GPU_IND[r]})
        assert report.section_relative_perf_scores["fwd"] == pytest.approx({r: FWD_REL[r]})
        assert report.rank_to_node == {r: f"node{r}"}
        assert "ncclDevKernel_AllReduce_Sum" not in report.local_kernel_summaries


@pytest.mark.parametrize("gather", [True, False])
def test_name_ids_are_the_same_on_every_rank(ranks: Ranks, gather: bool) -> None:
    tables = [(ranks[r][gather]["sections"], ranks[r][gather]["kernels"]) for r in range(WORLD)]
    assert all(t == tables[0] for t in tables)
    assert tables[0] == ({"fwd": 0, "only_rank0": 1}, {"A": 0, "B": 1})


def test_nvrx_rules_key_scores_by_rank_in_pg(tmp_path: Path) -> None:
    """As NVRx's: on a sub-group of global ranks 1 and 2, rank 1 is rank 0 of ``pg`` and
    reports for both under their ranks in ``pg``. Rank 1 is 2x slow in kernel A
    ((0.5 * 20 + 1 * 4) / 24), rank 2 in kernel B ((1 * 10 + 0.5 * 8) / 18); the NCCL
    kernel is not scored. The first window sets
    each rank's baseline (individual scores 1.0)."""
    spawn_world(report_generator_ranks.subgroup, WORLD, str(tmp_path))
    report = pickle.loads(pickle.loads((tmp_path / "sub1.pkl").read_bytes()))
    assert pickle.loads(pickle.loads((tmp_path / "sub2.pkl").read_bytes())) is None
    assert report.gpu_relative_perf_scores == pytest.approx({0: 14 / 24, 1: 14 / 18})
    assert report.section_relative_perf_scores["fwd"] == pytest.approx({0: 1.0, 1: 2 / 3})
    assert report.gpu_individual_perf_scores == pytest.approx({0: 1.0, 1: 1.0})
    assert report.rank_to_node == {0: "node1", 1: "node2"}
