"""Counting ramps, restarts and recoveries, and judging issue #18's goals, checked by hand."""

from __future__ import annotations

import pytest

from pacekeeper.controller.simulation import goals
from pacekeeper.controller.simulation.quality import Flag, Quality, SubjectKind, Truth, score_run
from pacekeeper.controller.simulation.scenarios import SCENARIOS

R, N = SubjectKind.RANK, SubjectKind.NODE


def truth(counted_from_s: float | None = None, found_after_s: float | None = None) -> Truth:
    # Rank 3 on node 0 of 2 nodes x 8; broken from 600 s; a two-hour run.
    return Truth(
        frozenset({3}), 600.0, 8, 16, 7200.0, False,
        counted_from_s=counted_from_s, found_after_s=found_after_s,
    )  # fmt: skip


def test_a_ramp_is_timed_from_when_it_reaches_the_bar_and_an_early_find_counts_at_zero() -> None:
    t = truth(counted_from_s=6000.0)
    late = score_run([Flag(6240.0, R, 3)], t)
    assert late.found == 1 and late.time_to_detect_s == 240.0
    early = score_run([Flag(4000.0, R, 3, disruptive=True)], t)
    assert early.found == 1 and early.time_to_detect_s == 0.0 and early.time_to_act_s == 0.0
    assert early.false_actions == 0  # it was slow already: not a wrong suspect


def test_a_ramp_that_never_reaches_the_bar_in_the_run_holds_nothing_to_find() -> None:
    q = score_run([], truth(counted_from_s=9000.0))
    assert q.faulty == 0 and q.recall == 1.0


def test_after_a_restart_only_a_naming_in_the_new_incarnation_finds_the_fault() -> None:
    t = truth(found_after_s=900.0)
    before = score_run([Flag(720.0, N, 0, disruptive=True)], t)
    assert before.found == 0 and before.recall == 0.0
    assert before.false_actions == 0 and before.right == 1
    again = score_run([Flag(720.0, N, 0), Flag(1140.0, N, 0, disruptive=True)], t)
    assert again.found == 1
    assert again.time_to_detect_s == 240.0 and again.time_to_act_s == 240.0


def test_recovered_on_a_node_still_broken_is_a_false_recovery() -> None:
    recov = [Flag(1500.0, N, 0), Flag(1500.0, N, 1), Flag(300.0, N, 0)]
    q = score_run([], truth(), recoveries=recov)
    assert q.false_recoveries == 1  # node 0 after the start; node 1 is healthy
    assert q.to_dict()["falseRecoveries"] == 1


def _q(found: int, faulty: int, detect: float | None, fa: int = 0, named: int = 1) -> Quality:
    return Quality(named, named, faulty, found, detect, None, fa, 10.0, 0)


def test_a_goal_needs_recall_in_time_and_no_false_action() -> None:
    g = goals.Goal("g", ("a", "b"), 300.0)
    runs = {
        "a": [{"pk": _q(1, 1, 120.0)}, {"pk": _q(1, 1, 420.0)}],
        "b": [{"pk": _q(8, 8, 60.0)}, {"pk": _q(0, 1, None)}],
    }
    r = goals.judge_recall(g, "pk", runs)
    assert (r.runs, r.faulty, r.found, r.found_in_time) == (4, 11, 10, 9)
    assert r.recall == pytest.approx(10 / 11) and r.recall_in_time == pytest.approx(9 / 11)
    assert r.worst_detect_s == 420.0 and not r.met
    fast = {"a": [{"pk": _q(20, 20, 60.0)}], "b": [{"pk": _q(1, 1, 60.0)}]}
    assert goals.judge_recall(g, "pk", fast).met
    noisy = {"a": [{"pk": _q(20, 20, 60.0, fa=1)}], "b": [{"pk": _q(1, 1, 60.0)}]}
    assert not goals.judge_recall(g, "pk", noisy).met
    assert goals.judge_recall(g, "pk", {"a": fast["a"]}).missing == ("b",)


def test_false_actions_of_the_noisy_runs_are_pooled_against_ten_thousand_gpu_days() -> None:
    runs = {
        "healthy-noisy-2x": [{"pk": _q(0, 0, None)}] * 3,
        "slow-gpu-10-noisy-2x": [{"pk": _q(1, 1, 60.0, fa=2)}],
        "healthy": [{"pk": _q(0, 0, None, fa=5)}],
    }
    fa = goals.false_actions("pk", runs)
    assert fa.false_actions == 2 and fa.gpu_days == pytest.approx(40.0)
    assert fa.per_1000_gpu_days == pytest.approx(50.0)
    assert fa.scenarios == ("healthy-noisy-2x", "slow-gpu-10-noisy-2x") and not fa.met
    clean = goals.false_actions("pk", {"healthy-noisy-2x": [{"pk": _q(0, 0, None)}]})
    assert clean.false_actions == 0 and not clean.met  # 10 GPU-days are not 10,000


def test_every_goal_reads_named_scenarios() -> None:
    named = {n for g in goals.RECALL_GOALS for n in g.scenarios}
    named |= {*goals.NOISY_SCENARIOS, *goals.WORKLOAD_SCENARIOS}
    assert named <= set(SCENARIOS)
