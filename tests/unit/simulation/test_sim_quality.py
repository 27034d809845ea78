"""Detection-quality arithmetic on small cases checked by hand."""

from __future__ import annotations

import pytest

from pacekeeper.controller.simulation.quality import (
    Flag,
    SubjectKind,
    Truth,
    combine,
    score_run,
)

R, N = SubjectKind.RANK, SubjectKind.NODE


def truth(faulty: set[int], start: float | None = 600.0, imbalance: bool = False) -> Truth:
    # 16 ranks on 2 nodes of 8, one simulated day: 16 GPU-days.
    return Truth(frozenset(faulty), start, 8, 16, 86400.0, imbalance)


def test_one_right_rank_and_one_wrong_rank_give_half_precision_full_recall() -> None:
    flags = [Flag(660, R, 3), Flag(720, R, 3), Flag(720, R, 12)]
    q = score_run(flags, truth({3}))
    assert (q.named, q.right) == (2, 1)
    assert q.precision == 0.5
    assert q.recall == 1.0
    assert q.time_to_detect_s == 60.0
    assert q.time_to_act_s is None  # nothing disruptive


def test_naming_the_node_of_a_faulty_rank_counts_as_right_and_finds_it() -> None:
    q = score_run([Flag(780, N, 0, disruptive=True, hardware=True)], truth({5}))
    assert q.precision == 1.0 and q.recall == 1.0
    assert q.time_to_detect_s == 180.0 and q.time_to_act_s == 180.0
    assert q.false_actions == 0


def test_flags_before_the_fault_started_are_wrong() -> None:
    q = score_run([Flag(300, R, 3, disruptive=True), Flag(900, R, 3)], truth({3}))
    assert q.right == 1 and q.named == 1  # one suspect, right once the fault was there
    assert q.false_actions == 1
    assert q.time_to_detect_s == 300.0


def test_false_actions_per_thousand_gpu_days() -> None:
    flags = [Flag(100, R, 1, disruptive=True), Flag(200, N, 1, disruptive=True)]
    q = score_run(flags, truth(set(), start=None))
    assert q.gpu_days == pytest.approx(16.0)
    assert q.false_actions == 2
    assert q.false_actions_per_1000_gpu_days == pytest.approx(125.0)  # 1000 * 2 / 16
    assert q.recall == 1.0 and q.precision == 0.0


def test_a_rule_that_stops_the_job_acts_once_per_report() -> None:
    flags = [Flag(60, R, r, disruptive=True) for r in (1, 2, 3)] + [Flag(120, R, 4, True)]
    q = score_run(flags, truth(set(), start=None), per_report_actions=True)
    assert q.false_actions == 2
    assert score_run(flags, truth(set(), start=None)).false_actions == 4


def test_recall_counts_each_faulty_rank_and_time_takes_the_slowest_found() -> None:
    flags = [Flag(660, R, 1), Flag(900, R, 2)]
    q = score_run(flags, truth({1, 2, 3}))
    assert q.found == 2 and q.faulty == 3
    assert q.recall == pytest.approx(2 / 3)
    assert q.time_to_detect_s == 300.0


def test_hardware_actions_count_only_in_imbalance_scenarios() -> None:
    flags = [Flag(60, N, 1, disruptive=True, hardware=True), Flag(120, R, 2, disruptive=True)]
    assert score_run(flags, truth(set(), None, imbalance=True)).hardware_actions_on_imbalance == 1
    assert score_run(flags, truth(set(), None)).hardware_actions_on_imbalance == 0


def test_nothing_named_and_nothing_broken_is_perfect() -> None:
    q = score_run([], truth(set(), start=None))
    assert (q.precision, q.recall, q.false_actions) == (1.0, 1.0, 0)


def test_combine_adds_counts_and_keeps_the_worst_time() -> None:
    a = score_run([Flag(660, R, 3)], truth({3}))
    b = score_run([Flag(840, R, 3), Flag(840, R, 9, disruptive=True)], truth({3}))
    c = combine([a, b])
    assert (c.named, c.right, c.faulty, c.found) == (3, 2, 2, 2)
    assert c.precision == pytest.approx(2 / 3)
    assert c.time_to_detect_s == 240.0
    assert c.false_actions == 1 and c.gpu_days == pytest.approx(32.0)


def test_removing_a_mark_from_a_node_that_is_still_broken_is_a_premature_undo() -> None:
    undos = [Flag(2000, N, 0), Flag(2000, N, 1), Flag(300, N, 0)]
    q = score_run([], truth({5}), undos=undos)
    assert q.premature_undos == 1  # node 0 after the start; node 1 is healthy
