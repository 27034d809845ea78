"""The tail statistic (``sectionTail``, schemaVersion 4): exact values on known windows,
its memory per section, and its way into the ScoreReport and back."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest

from pacekeeper.detector.compaction import compact
from pacekeeper.detector.reports import RankInfo, Report, to_score_report
from pacekeeper.detector.score_report import (
    SCHEMA_VERSION,
    JobIdentity,
    RankScores,
    ReportRejected,
    ScoreReport,
)
from pacekeeper.detector.scoring import TAIL_MIN_WINDOWS, TAIL_WINDOWS, tail_score
from pacekeeper.detector.tails import RecentTail

JOB = JobIdentity(name="train")
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_the_tail_is_the_first_quartile_over_the_second_highest_window() -> None:
    # Two slow windows (1.3 s) among eight of 1.0 s: healthy / slow.
    assert tail_score([1.0] * 8 + [1.3, 1.3]) == pytest.approx(1.0 / 1.3)
    # Five windows: the quartile is the (5 - 1) // 4 = 1st (0-based) smallest, 1.0;
    # the second-highest 1.2.
    assert tail_score([1.5, 1.0, 1.2, 0.9, 1.0]) == pytest.approx(1.0 / 1.2)
    # Nine windows: the (9 - 1) // 4 = 2nd (0-based) smallest, 1.0, over 1.4.
    assert tail_score([0.9, 0.95, 1.0, 1.05, 1.1, 1.2, 1.3, 1.4, 2.0]) == pytest.approx(1.0 / 1.4)
    # Half the windows slow (a burst out of phase with the windows): the quartile is
    # still a good window, where a median would be a slow one.
    assert tail_score([1.0] * 8 + [1.15] * 4 + [1.3] * 3) == pytest.approx(1.0 / 1.3)


def test_one_odd_window_moves_nothing_and_steady_is_one() -> None:
    assert tail_score([1.0] * 9 + [3.0]) == 1.0
    assert tail_score([2.0] * 10) == 1.0  # a steadily slower GPU: no tail of its own


def test_too_few_or_invalid_windows_give_no_tail() -> None:
    assert math.isnan(tail_score([1.0] * (TAIL_MIN_WINDOWS - 1)))
    # Invalid times (NaN, 0, negative, inf) are not windows.
    assert math.isnan(tail_score([1.0, 1.0, 1.0, math.nan, 0.0, -1.0, math.inf]))
    assert tail_score([1.0, 1.0, 1.0, math.nan, 2.0]) == pytest.approx(1.0 / 1.0)


def test_recent_tail_keeps_the_last_windows_slow_ones_too() -> None:
    tails = RecentTail()
    out = []
    for t in [1.0, 1.0, 1.3, 1.3, 1.0, 1.0, 1.0]:
        out.append(tails.update(["fb"], [t])[0])
    assert all(math.isnan(v) for v in out[:3])
    # [1.0, 1.0, 1.3, 1.3]: the smallest over the second-highest.
    assert out[3] == pytest.approx(1.0 / 1.3)
    assert out[-1] == pytest.approx(1.0 / 1.3)
    # After TAIL_WINDOWS healthy windows the slow ones have left the memory.
    for _ in range(TAIL_WINDOWS):
        last = tails.update(["fb"], [1.0])[0]
    assert last == 1.0


def test_recent_tail_is_bounded_by_keys() -> None:
    tails = RecentTail(max_keys=2)
    tails.update(["a", "b"], [1.0, 1.0])
    tails.update(["c"], [1.0])
    assert len(tails) == 2
    with pytest.raises(ValueError, match="windows must be >= 2"):
        RecentTail(windows=1)


def _report(tail: dict[str, float] | None) -> ScoreReport:
    report = Report(
        gpu_relative_perf_scores={0: 1.0, 1: 0.9},
        section_relative_perf_scores={"fb": {0: 1.0, 1: 0.95}},
        gpu_individual_perf_scores={},
        section_individual_perf_scores={},
        rank_to_node={0: "n0", 1: "n0"},
        local_section_summaries={},
        local_kernel_summaries={},
        generate_report_elapsed_time=0.0,
        gather_on_rank0=True,
        rank=0,
    )
    infos = {
        0: RankInfo(rank=0, node="n0", section_tail={"fb": 0.98, "loader": math.nan}),
        1: RankInfo(rank=1, node="n0", section_tail=tail),
    }
    return to_score_report(
        report, job=JOB, sequence=1, generated_at=NOW, window_s=60.0, rank_info=infos
    )


def test_the_tail_travels_in_the_score_report_and_reads_back() -> None:
    report = _report({"fb": 0.77})
    wire = report.to_wire()
    assert wire["schemaVersion"] == SCHEMA_VERSION >= 4
    # NaN (too few windows) is left out: a score that cannot be computed is absent.
    assert wire["ranks"][0]["sectionTail"] == {"fb": 0.98}
    assert wire["ranks"][1]["sectionTail"] == {"fb": 0.77}
    back = ScoreReport.from_wire(report.to_json())
    assert back.ranks[1].section_tail == {"fb": 0.77}
    assert back.ranks[1].worst_tail() == 0.77
    # Not a worst score: a policy judges the tail only when it says so.
    assert back.ranks[1].worst_score() == 0.9
    assert "sectionTail/fb" in back.summary.peers[0].spreads


def test_a_rank_without_a_tail_has_no_field_and_older_reports_read() -> None:
    wire = _report(None).to_wire()
    assert "sectionTail" not in wire["ranks"][1]
    old = {**wire, "schemaVersion": 3, "ranks": [wire["ranks"][1]]}
    assert ScoreReport.from_wire(old).ranks[0].section_tail is None


@pytest.mark.parametrize("bad", [-0.1, "0.5x", [0.5]])
def test_a_bad_tail_is_refused_naming_the_field(bad: object) -> None:
    wire = _report({"fb": 0.77}).to_wire()
    wire["ranks"][1]["sectionTail"] = {"fb": bad}
    with pytest.raises(ReportRejected, match=r"ranks\.1\.sectionTail\.fb"):
        ScoreReport.from_wire(wire)


def test_compaction_keeps_a_rank_slow_only_in_its_tail() -> None:
    ranks = [
        RankScores(rank=r, node=f"n{r // 8}", gpu_relative=0.99, section_tail={"fb": 0.99})
        for r in range(200)
    ]
    ranks[137] = ranks[137].model_copy(update={"section_tail": {"fb": 0.7}})
    report = ScoreReport.build(job=JOB, sequence=1, generated_at=NOW, window_s=60.0, ranks=ranks)
    small = compact(report, max_bytes=len(report.to_json()) // 4)
    assert small.truncated
    assert 137 in {r.rank for r in small.ranks}
