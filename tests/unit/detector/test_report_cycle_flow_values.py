"""Values of one report's steps in ``report_cycle.generate``, found by mutation (make
mutation, issue 41): which guard label counts a failed step and what the report is
then, the control exchange's verdict, the all-gather path (``gather_on_rank0=False``)
and what a non-reporting rank keeps of the gathered payloads, the report's own fields,
and the ScoreReport's world size and kernel-timing reason.

A real single-process ``RunState`` (no process group, kernel timing "none"); where a
test needs peers, the group's collective hands back this rank's own payload among
three others and the group reads as rank 1 of 4."""

from __future__ import annotations

import math
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from pacekeeper.detector import gather
from pacekeeper.detector import report_cycle as rc
from pacekeeper.detector.payload import RankPayload
from pacekeeper.detector.reports import RankInfo
from pacekeeper.detector.run_config import build_config
from pacekeeper.detector.run_state import RunState

BOTH = ["relative_perf_scores", "individual_perf_scores"]
NAMES = {7: "fwd"}
WORLD = gather.GroupInfo(
    distributed=True,
    group_rank=1,
    group_size=4,
    global_rank=1,
    world_size=4,
    global_ranks=(0, 1, 2, 3),
    backend="gloo",
)


def make_run(on_rank0: bool, scores: list[str] | None = None) -> RunState:
    cfg = build_config(scores or BOTH, on_rank0, 1, 60.0, "nodeA")
    return RunState.start(cfg, process_group=None, kernel_timing="none", job=None)


def generate(run: RunState, scores: list[str] | None = None) -> Any:
    return rc.generate(
        run,
        scores_to_compute=scores or run.config.scores_to_compute,
        gather_on_rank0=run.config.gather_on_rank0,
    )


def peer(rank: int) -> RankPayload:
    empty = RankPayload.empty(RankInfo(rank=rank, node=f"n{rank}"))
    return replace(
        empty,
        section_ids=np.array([7], dtype=np.uint64),
        section_median_ns=np.array([1e6 * (rank + 1)]),
        section_individual=np.array([1.0]),
        gpu_individual=1.0,
        names=dict(NAMES),
    )


def boom(*_: object, **__: object) -> Any:
    raise RuntimeError("injected")


def in_world(run: RunState, calls: list[tuple[Any, ...]], *, with_own: bool = True) -> None:
    """Rank 1 of 4: the collective records its arguments and hands back four payloads."""
    run.info = WORLD
    run.payloads.rank_info = RankInfo(rank=1, node="nodeA")
    run.refresh = lambda: WORLD  # type: ignore[method-assign]

    def collective(fn: Any, payload: RankPayload, info: gather.GroupInfo) -> list[RankPayload]:
        calls.append((fn, payload, info))
        return [peer(0), payload if with_own else peer(9), peer(2), peer(3)]

    run.group.collective = collective  # type: ignore[method-assign]


@pytest.mark.parametrize("on_rank0", [True, False])
def test_a_failed_group_read_is_counted_as_report_group(on_rank0: bool) -> None:
    run = make_run(on_rank0)
    run.refresh = boom  # type: ignore[method-assign]
    assert generate(run) is None
    assert run.guard.counts() == {"report.group": 1}


def test_a_failed_local_collect_still_reports_an_empty_payload() -> None:
    run = make_run(True)
    run.payloads.collect = boom  # type: ignore[method-assign]
    out = generate(run)
    assert out is not None
    report, _ = out
    assert report.local_section_summaries == {} and report.local_kernel_summaries == {}
    assert run.guard.counts() == {"report.local": 1}


@pytest.mark.parametrize("on_rank0", [True, False])
def test_a_failed_gather_is_counted_once_as_report_gather(on_rank0: bool) -> None:
    run = make_run(on_rank0)
    run.group.collective = boom  # type: ignore[method-assign]
    assert generate(run) is None
    assert run.guard.counts() == {"report.gather": 1}


def test_a_non_reporting_rank_gets_none_and_nothing_is_counted() -> None:
    run = make_run(True)
    run.group.collective = lambda *_: None  # type: ignore[method-assign]
    assert generate(run) is None
    assert run.guard.counts() == {}


def test_failed_scoring_and_conversion_have_their_own_labels(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = make_run(True)
    monkeypatch.setattr(rc, "score_payloads", boom)
    assert generate(run) is None
    assert run.guard.counts() == {"report.score": 1}
    monkeypatch.undo()
    run = make_run(True)
    monkeypatch.setattr(rc, "to_score_report", boom)
    out = generate(run)
    assert out is not None
    assert out[1]() is None
    assert run.guard.counts() == {"report.convert": 1}


class Control:
    def __init__(self, verdict: object) -> None:
        self.verdict = verdict
        self.calls: list[tuple[object, object]] = []

    def exchange(self, run: object, info: object) -> object:
        self.calls.append((run, info))
        if isinstance(self.verdict, Exception):
            raise self.verdict
        return self.verdict


def test_the_control_exchange_gates_the_report() -> None:
    run = make_run(True)
    run.control = ok = Control(True)  # type: ignore[assignment]
    assert generate(run) is not None
    assert ok.calls == [(run, run.info)]
    run.control = Control(False)  # type: ignore[assignment]
    assert generate(run) is None
    assert run.guard.counts() == {}
    run.control = Control(RuntimeError("broadcast"))  # type: ignore[assignment]
    assert generate(run) is None
    assert run.guard.counts() == {"control.exchange": 1}


def test_a_non_reporting_rank_all_gathers_and_keeps_only_its_own_payload() -> None:
    run = make_run(False)
    calls: list[tuple[Any, ...]] = []
    in_world(run, calls)
    out = generate(run)
    assert out is not None
    report, convert = out
    assert len(calls) == 1
    fn, payload, info = calls[0]
    # The exchange all-gathers on a flat group (each rank scores itself), and on the
    # tree hands each rank its host's scores (tests/multiprocess/test_report_tree.py).
    assert fn.func is rc._exchange and fn.keywords["gather_on_rank0"] is False
    assert info == WORLD
    assert isinstance(payload, RankPayload) and payload.info.rank == 1
    assert report.rank == 1 and report.gather_on_rank0 is False
    for scores in (report.gpu_relative_perf_scores, report.gpu_individual_perf_scores):
        assert list(scores) == [1] and math.isnan(scores[1])
    assert list(report.rank_to_node) == [1]
    assert run.seen_sections == {}  # only rank 0 of a gathered report keeps the table
    sr = convert()
    assert sr is not None
    assert [r.rank for r in sr.ranks] == [1]
    assert sr.summary.world_size == 4
    assert run.guard.counts() == {}


def test_a_rank_whose_own_payload_is_missing_still_lists_itself() -> None:
    run = make_run(False)
    in_world(run, [], with_own=False)
    out = generate(run)
    assert out is not None
    assert list(out[0].gpu_relative_perf_scores) == [1]
    assert run.guard.counts() == {}


def test_the_reporter_lists_every_rank_and_the_sections_they_named() -> None:
    run = make_run(True)
    calls: list[tuple[Any, ...]] = []
    in_world(run, calls)
    out = generate(run)
    assert out is not None
    report, convert = out
    assert calls[0][0].func is rc._exchange and calls[0][0].keywords["gather_on_rank0"]
    assert report.rank == 1 and report.gather_on_rank0 is True
    assert sorted(report.gpu_relative_perf_scores) == [0, 1, 2, 3]
    assert list(run.seen_sections) == ["fwd"]
    assert list(report.section_relative_perf_scores) == ["fwd"]
    sr = convert()
    assert sr is not None and sr.summary.world_size == 4


def test_individual_only_without_gathering_scores_this_rank_alone() -> None:
    run = make_run(False, ["individual_perf_scores"])
    run.group.collective = boom  # type: ignore[method-assign]  # never called
    out = generate(run)
    assert out is not None
    report, _ = out
    assert list(report.gpu_individual_perf_scores) == [0]
    assert report.gpu_relative_perf_scores == {}
    assert run.guard.counts() == {}


def test_the_elapsed_time_is_in_milliseconds(monkeypatch: pytest.MonkeyPatch) -> None:
    run = make_run(True)
    ticks = iter([1_000_000, 3_500_000])
    monkeypatch.setattr(rc, "time", SimpleNamespace(perf_counter_ns=lambda: next(ticks)))
    out = generate(run)
    assert out is not None
    assert out[0].generate_report_elapsed_time == pytest.approx(2.5)


def test_the_kernel_timing_names_the_backend_and_why() -> None:
    run = make_run(True)
    out = generate(run)
    assert out is not None
    sr = out[1]()
    assert sr is not None
    assert sr.kernel_timing.backend == "none"
    assert sr.kernel_timing.reason == run.choice.reason == "requested by argument"
