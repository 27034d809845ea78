"""A section is scored on each entry's work: its time less its own wait in collectives,
then the median (issue 17: median less the mean wait made a short section next to one
long wait, a peer's GC pause say, look many times faster than it was)."""

from __future__ import annotations

import time

import pytest

from pacekeeper.detector import collectives
from pacekeeper.detector.guard import Guard
from pacekeeper.detector.sections import SectionSummary, SectionTable


def _table() -> SectionTable:
    return SectionTable(
        backend=None, guard=Guard(), profiling_interval=1, capacity=64, max_sections=8
    )


def test_one_long_wait_does_not_make_the_section_look_fast() -> None:
    table = _table()
    handle = table.handle("optimizer", False, "here")
    for i in range(9):
        with handle:
            time.sleep(0.002)
            if i == 4:  # one entry waited 50x its work for a peer
                collectives.waited(100_000_000)
    with table.handle("forward", False, "here"):
        time.sleep(0.002)
    (opt, fwd) = sorted(table.drain(), key=lambda s: s.name, reverse=True)
    assert opt.name == "optimizer" and opt.wait_ns == 100_000_000
    # Every entry did ~2 ms of work: so does the median; the mean-wait rule said 0.
    assert 0.0019e9 <= opt.work_median_ns <= opt.median_ns < 0.05e9
    assert max(0.0, opt.median_ns - opt.wait_ns / opt.num) == 0.0
    assert fwd.work_median_ns == fwd.median_ns  # no wait: the work is the time


def test_each_entrys_own_wait_comes_off_its_own_time() -> None:
    table = _table()
    handle = table.handle("step", False, "here")
    for _ in range(5):
        with handle:
            time.sleep(0.003)
            collectives.waited(2_000_000)  # 2 of its ~3 ms were waiting
    (step,) = table.drain()
    assert step.work_median_ns == pytest.approx(step.median_ns - 2e6)
    assert step.work_median_ns < 0.5 * step.median_ns


def test_a_summary_made_without_waits_is_scored_on_its_time() -> None:
    s = SectionSummary("fwd", 1.0, 3.0, 2.0, 2.0, 0.5, 4, 0)
    assert s.work_median_ns == 2.0
