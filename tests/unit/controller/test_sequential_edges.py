"""The sequential test's bookkeeping at its edges (``sequential``): the threshold's floor,
the shift's clamps, how many windows and peers a test needs, what a report records per
rank (its deviation from the peers, its run, the scale floor), and what a warm-up report
and a regroup leave. test_sequential_rule.py measures the rule's rates over noise; these
pin the counts and values the rule is built from."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from pacekeeper.controller.core import sequential as sq
from pacekeeper.controller.core.ids import Rank

SHIFT = sq.shift_for(0.9)
PEERS = dict.fromkeys(range(1, 6), 1.0)


def healthy(n: int, tests: dict[Rank, sq.RankTest] | None = None) -> dict[Rank, sq.RankTest]:
    out = dict(tests or {})
    for _ in range(n):
        out = sq.advance(out, {0: 1.0, **PEERS}, shift=SHIFT)
    return out


def test_threshold_is_the_log_of_windows_per_day_over_the_rate() -> None:
    assert sq.threshold(0.01, 60.0) == pytest.approx(math.log(1440 / 0.01))
    assert sq.threshold(0.5, 600.0) == pytest.approx(math.log(144 / 0.5))


def test_threshold_never_drops_below_its_floor() -> None:
    # 4 windows a day at 1 false alarm a day would be log 4: held at log 20.
    assert sq.threshold(1.0, 21600.0) == sq.MIN_THRESHOLD == math.log(20.0)
    assert sq.threshold(1.0, 86400.0 / 21) == pytest.approx(math.log(21.0))


def test_shift_is_the_log_deviation_of_a_score_at_act_clamped() -> None:
    assert sq.shift_for(0.5) == pytest.approx(math.log(2.0))
    assert sq.shift_for(0.999) == sq.shift_for(1.0) == pytest.approx(-math.log(0.999))
    assert sq.shift_for(0.0) == sq.shift_for(-1.0) == pytest.approx(-math.log(1e-6))
    assert sq.shift_for(1e-6) == pytest.approx(-math.log(1e-6))


def test_a_test_passes_from_min_windows_and_at_the_threshold() -> None:
    # Each statistic at its share of the rate: 0.9 for the clipped one, 0.05 the wide,
    # 0.05 the peers' record.
    enough = (0.1,) * sq.MIN_WINDOWS
    narrow, wide, record = 5.0 - math.log(0.9), 5.0 - math.log(0.05), 5.0 - math.log(0.05)
    assert math.isclose(sq.NARROW_EXTRA, -math.log(0.9))
    assert math.isclose(sq.WIDE_EXTRA, -math.log(0.05))
    assert math.isclose(sq.EXTREME_EXTRA, -math.log(0.05))
    assert sq.RankTest(history=enough, cusum=narrow).passes(5.0)
    assert not sq.RankTest(history=enough, cusum=narrow - 1e-9).passes(5.0)
    assert sq.RankTest(history=enough, wide=wide).passes(5.0)
    assert sq.RankTest(history=enough, extreme=record).passes(5.0)
    below = {"cusum": narrow - 1e-9, "wide": wide - 1e-9, "extreme": record - 1e-9}
    assert not sq.RankTest(history=enough, **below).passes(5.0)
    assert not sq.RankTest(history=enough[1:], cusum=50.0, wide=50.0, extreme=50.0).passes(5.0)


def test_fewer_peers_than_min_peers_move_nothing() -> None:
    start = {Rank(r): sq.RankTest(history=(0.0,), cusum=1.0, run=1) for r in range(6)}
    three = {0: 0.5, 1: 1.0, 2: 1.0, 3: float("nan"), 4: 0.0, 5: -1.0}
    assert sq.advance(start, three, shift=SHIFT) == start
    four = {**three, 3: 1.0}
    moved = sq.advance(start, four, shift=SHIFT)
    assert {r for r in moved if moved[r] != start[r]} == {0, 1, 2, 3}


def test_a_report_records_each_ranks_deviation_from_the_peers_median() -> None:
    got = sq.advance({}, {0: 0.5, 1: 1.0, 2: 1.0, 3: 1.0, 4: 2.0}, shift=SHIFT)
    # log(0.5) below the median of the logs; a score above 1 counts as 1.
    assert [got[Rank(r)].history for r in range(5)] == [(0.693147,), (0.0,), (0.0,), (0.0,), (0.0,)]
    faster = sq.advance({}, {0: 1.0, 1: 0.8, 2: 0.8, 3: 0.8, 4: 0.8}, shift=SHIFT)
    assert faster[Rank(0)].history == (round(math.log(0.8), 6),)


def test_until_some_rank_has_an_in_control_history_nothing_moves() -> None:
    tests = healthy(sq.MIN_WINDOWS - 1)
    slow = sq.advance(tests, {0: 0.3, **PEERS}, shift=SHIFT)
    assert slow[Rank(0)].cusum == 0.0 and slow[Rank(0)].run == 0
    assert len(slow[Rank(0)].history) == sq.MIN_WINDOWS


def test_a_slow_window_after_an_in_control_history_moves_only_the_slow_rank() -> None:
    tests = healthy(sq.MIN_WINDOWS)
    slow = sq.advance(tests, {0: 0.5, **PEERS}, shift=SHIFT)
    assert slow[Rank(0)].cusum > 0 and slow[Rank(0)].run == 1
    assert all(slow[Rank(r)].cusum == 0.0 and slow[Rank(r)].run == 0 for r in PEERS)
    again = sq.advance(slow, {0: 0.5, **PEERS}, shift=SHIFT)
    assert again[Rank(0)].cusum > slow[Rank(0)].cusum and again[Rank(0)].run == 2


def test_a_fast_window_brings_the_statistic_back_to_zero_not_below() -> None:
    tests = healthy(sq.MIN_WINDOWS)
    slow = sq.advance(tests, {0: 0.5, **PEERS}, shift=SHIFT)
    back = sq.advance(slow, {0: 1.0, 1: 0.5, 2: 0.5, 3: 0.5, 4: 0.5, 5: 0.5}, shift=SHIFT)
    assert back[Rank(0)].cusum == 0.0 and back[Rank(0)].run == 0


def test_identical_scores_give_the_floor_scale() -> None:
    tests = healthy(sq.MIN_WINDOWS + 2)
    assert {t.scale for t in tests.values()} == {sq.FLOOR}


def test_a_warm_up_report_teaches_the_history_and_moves_no_statistic() -> None:
    tests = healthy(sq.MIN_WINDOWS)
    warm = sq.advance(tests, {0: 0.3, **PEERS}, shift=SHIFT, learn_only=True)
    assert warm[Rank(0)].cusum == 0.0 and warm[Rank(0)].run == 0
    assert warm[Rank(0)].history[-1] == round(-math.log(0.3), 6)


def test_a_rank_keeps_its_newest_history_windows() -> None:
    tests = healthy(sq.HISTORY + 3)
    assert len(tests[Rank(0)].history) == sq.HISTORY
    slow = sq.advance(tests, {0: 0.5, **PEERS}, shift=SHIFT)
    assert len(slow[Rank(0)].history) == sq.HISTORY
    assert slow[Rank(0)].history[-1] == 0.693147


def test_a_rank_without_a_score_keeps_its_test() -> None:
    tests = healthy(sq.MIN_WINDOWS)
    got = sq.advance(tests, {0: float("nan"), **PEERS}, shift=SHIFT)
    assert got[Rank(0)] == tests[Rank(0)]
    assert len(got[Rank(1)].history) == sq.MIN_WINDOWS + 1


def test_a_rank_without_a_score_keeps_its_sums_but_not_its_peers_record() -> None:
    # The peers' record is one report's evidence: a rank absent from the next report
    # (its score NaN, or not listed) must not keep passing on the last one's.
    tests = healthy(sq.MIN_WINDOWS)
    tests[Rank(0)] = replace(tests[Rank(0)], cusum=3.0, wide=2.0, extreme=99.0)
    for scores in ({0: float("nan"), **PEERS}, PEERS, {0: 1.0}):
        got = sq.advance(tests, scores, shift=SHIFT)
        assert got[Rank(0)] == replace(tests[Rank(0)], extreme=0.0), scores
        assert not got[Rank(0)].passes(10.0)
    assert tests[Rank(0)].passes(10.0)  # the record alone passed before


def test_past_the_bound_absent_ranks_without_evidence_go_shortest_history_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sq, "MAX_TESTS", 8)
    tests = {Rank(r): sq.RankTest(history=(0.0,) * (r % 5 + 1)) for r in range(100, 110)}
    tests[Rank(100)] = replace(tests[Rank(100)], cusum=1.0)  # evidence: kept
    tests[Rank(101)] = replace(tests[Rank(101)], wide=1.0)
    got = sq.advance(tests, {0: 1.0, **PEERS}, shift=SHIFT)
    # 6 ranks reported + 10 kept = 16, over the bound of max(8, 6) by 8: of the 8 idle
    # absent ranks (102-109, histories of 3, 4, 5, 1, 2, 3, 4, 5), all go.
    assert set(got) == {Rank(r) for r in range(6)} | {Rank(100), Rank(101)}
    monkeypatch.setattr(sq, "MAX_TESTS", 12)
    got = sq.advance(tests, {0: 1.0, **PEERS}, shift=SHIFT)
    # Over by 4: the four shortest histories go (105: 1, 106: 2, then 102 and 107: 3).
    gone = {Rank(r) for r in (105, 106, 102, 107)}
    assert set(got) == ({Rank(r) for r in range(6)} | set(tests)) - gone


def test_every_rank_of_the_report_is_kept_whatever_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sq, "MAX_TESTS", 2)
    many = dict.fromkeys(range(20), 1.0)
    got = sq.advance(healthy(1), many, shift=SHIFT)
    assert set(got) == {Rank(r) for r in range(20)}
    # Too few peers to move anything: still bounded to 2, the reported rank kept and,
    # of the idle, the longest history (ranks 0-5 have two windows, 6-19 one), highest
    # rank last to go.
    few = sq.advance(got, {3: 1.0}, shift=SHIFT)
    assert set(few) == {Rank(3), Rank(5)}


def test_forget_keeps_the_in_control_history_and_restarts_every_statistic() -> None:
    tests = {
        Rank(0): sq.RankTest(history=(0.1, 0.2, 0.3, 0.9, 0.9), cusum=3.0, run=2, scale=0.05),
        Rank(1): sq.RankTest(history=(0.1, 0.2), cusum=0.0, run=0, scale=0.01),
        Rank(2): sq.RankTest(history=(0.9,), cusum=1.0, run=4, scale=0.02),
    }
    assert sq.forget(tests) == {
        Rank(0): sq.RankTest(history=(0.1, 0.2, 0.3), cusum=0.0, run=0, scale=0.05),
        Rank(1): sq.RankTest(history=(0.1, 0.2), cusum=0.0, run=0, scale=0.01),
        Rank(2): sq.RankTest(history=(), cusum=0.0, run=0, scale=0.02),
    }


def test_the_slow_run_is_left_out_of_the_scale() -> None:
    # After a long slow run the rank's own scale still comes from its in-control windows
    # (identical here: the floor), so the statistic keeps climbing at the same pace.
    tests = healthy(sq.MIN_WINDOWS)
    steps = []
    for _ in range(6):
        before = tests[Rank(0)].cusum
        tests = sq.advance(tests, {0: 0.5, **PEERS}, shift=SHIFT)
        steps.append(tests[Rank(0)].cusum - before)
        assert tests[Rank(0)].scale == sq.FLOOR
    assert steps == pytest.approx([steps[0]] * 6)


def _one_quiet_window(cusum: float, wide: float) -> sq.RankTest:
    """Rank 0's test after a window where every rank scores alike (each statistic falls
    by its own psi: ~0.90 clipped, ~0.99 wide), from the given statistics and run 3."""
    hist = tuple(0.001 * ((i * 7) % 5 - 2) for i in range(12))
    tests = {
        Rank(r): sq.RankTest(
            history=hist,
            cusum=cusum if r == 0 else 0.0,
            wide=wide if r == 0 else 0.0,
            run=3 if r == 0 else 0,
        )
        for r in range(16)
    }
    return sq.advance(tests, dict.fromkeys(range(16), 1.0), shift=SHIFT)[Rank(0)]


def test_the_run_lasts_while_either_statistic_is_above_zero() -> None:
    # The run (windows the in-control history leaves out) ends only when both are 0.
    wide_only = _one_quiet_window(0.0, 5.0)
    assert wide_only.cusum == 0.0 and wide_only.wide > 1.0 and wide_only.run == 4
    small_clipped = _one_quiet_window(1.5, 0.0)
    assert 0.0 < small_clipped.cusum <= 1.0 and small_clipped.wide == 0.0
    assert small_clipped.run == 4
    small_wide = _one_quiet_window(0.0, 1.5)
    assert small_wide.cusum == 0.0 and 0.0 < small_wide.wide <= 1.0 and small_wide.run == 4
    both_gone = _one_quiet_window(0.5, 0.5)
    assert both_gone.cusum == 0.0 and both_gone.wide == 0.0 and both_gone.run == 0


def test_forget_zeroes_both_statistics() -> None:
    t = sq.RankTest(history=(0.1, 0.2, 0.3), cusum=4.0, wide=9.0, run=1)
    after = sq.forget({Rank(0): t})[Rank(0)]
    assert (after.cusum, after.wide, after.run, after.history) == (0.0, 0.0, 0, (0.1, 0.2))
