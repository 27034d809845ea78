"""``imbalance.imbalance_of``: a rank that stays the slowest longer than any rank did
before it is a fault at once, not after 80 % of the history; runs as long as the
imbalance's own are judged by the fraction as before."""

from __future__ import annotations

from datetime import timedelta

import pytest
from controller_builders import T0, policy_doc

from pacekeeper.controller.core.imbalance import STAYS_MIN, imbalance_of
from pacekeeper.controller.core.state import HistoryEntry

POLICY = policy_doc().policies["default"]
RANK = 500


def _history(worsts: list[int | None]) -> list[HistoryEntry]:
    return [
        HistoryEntry(at=T0 + timedelta(minutes=i), worst_rank=w, below=(w,) if w else ())
        for i, w in enumerate(worsts)
    ]


def test_a_rank_slowest_three_times_after_moving_ones_is_a_fault() -> None:
    # Five reports whose slowest rank moved every time, then RANK three in a row: by the
    # fraction (3 of 8) it would be held as imbalance for four more reports.
    history = _history([1, 2, 3, 4, 5, RANK, RANK, RANK])
    assert imbalance_of(history, [RANK], POLICY) is None


def test_fewer_reports_than_the_minimum_are_still_imbalance() -> None:
    history = _history([1, 2, 3, 4, 5, 6, RANK, RANK])
    got = imbalance_of(history, [RANK], POLICY)
    assert got is not None and got["belowFraction"] == 0.25
    assert STAYS_MIN == 3


@pytest.mark.parametrize("earlier", [[7, 7, 7, 1, 2], [1, 7, 7, 7, 2], [None, 7, 7, 7, 2]])
def test_no_longer_than_the_imbalance_already_stayed_is_imbalance(
    earlier: list[int | None],
) -> None:
    # Rank 7 was the slowest three reports in a row before: skew that stays a while.
    history = _history([*earlier, RANK, RANK, RANK])
    got = imbalance_of(history, [RANK], POLICY)
    assert got is not None and got["distinctSlowest"] >= 3


def test_longer_than_the_imbalance_stayed_is_a_fault() -> None:
    history = _history([7, 7, 1, 2, RANK, RANK, RANK, RANK])[-8:]
    assert imbalance_of(history, [RANK], POLICY) is None
    # The same run, but another rank was the slowest last: it moved.
    moved = _history([7, 7, 1, RANK, RANK, RANK, RANK, 2])
    assert imbalance_of(moved, [RANK], POLICY) is not None


def _stalled(gpu_worsts: list[int | None]) -> list[HistoryEntry]:
    """Bursty host stalls: the judged slowest rank moves every report (ranks 1..8)
    whatever the GPU-judged slowest does."""
    return [
        HistoryEntry(
            at=T0 + timedelta(minutes=i), worst_rank=i + 1, below=(i + 1,), gpu_worst_rank=g
        )
        for i, g in enumerate(gpu_worsts)
    ]


def test_the_gpu_judged_slowest_amid_moving_stalls_is_a_fault() -> None:
    # Scenario 151 of the sampled space: a GPU 24 % slow among bursty host stalls was
    # never the judged slowest, and was held as imbalance seven reports of eight.
    history = _stalled([None, None, None, None, None, RANK, RANK, RANK])
    assert imbalance_of(history, [RANK], POLICY) is None


def test_a_moving_gpu_judged_slowest_is_still_imbalance() -> None:
    # Data skew moves the GPU-judged slowest as it moves the judged one.
    history = _stalled([None, 3, 9, 4, 7, 2, RANK, RANK])
    assert imbalance_of(history, [RANK], POLICY) is not None
    stayed_before = _stalled([9, 9, 9, 4, 7, RANK, RANK, RANK])
    assert imbalance_of(stayed_before, [RANK], POLICY) is not None


def test_entries_written_before_the_gpu_slowest_was_kept_change_nothing() -> None:
    # A state stored by an older controller reads gpu_worst_rank as None throughout.
    got = imbalance_of(_stalled([None] * 8), [RANK], POLICY)
    assert got is not None and got["distinctSlowest"] == 8


def test_the_digest_keeps_the_below_rank_with_the_lowest_gpu_score() -> None:
    from controller_builders import GPU_TAIL_POLICY, gpu_report

    from pacekeeper.controller.core.attribution import digest

    policy = policy_doc(GPU_TAIL_POLICY).policies["default"]
    gpu: list[tuple[float | None, float | None]] = [(1.0, 1.0)] * 32
    gpu[5] = (0.80, 0.80)  # a slow GPU
    gpu[20] = (0.90, 0.90)  # slower than act, faster than rank 5
    entry = digest(gpu_report(gpu), policy).to_history()
    assert entry.gpu_worst_rank == 5
    assert entry.worst_rank == 5 and set(entry.below) == {5, 20}
    # A rank slow in its tail only (a host stall's bursts) is the judged slowest; the
    # GPU-judged slowest is still the slow GPU.
    tails = [1.0] * 32
    tails[9] = 0.5
    stalled = digest(gpu_report(gpu, tails), policy).to_history()
    assert stalled.worst_rank == 9 and stalled.gpu_worst_rank == 5
    healthy = digest(gpu_report([(1.0, 1.0)] * 32), policy).to_history()
    assert healthy.gpu_worst_rank is None and healthy.worst_rank is None
    # A policy judging sections keeps no GPU-judged slowest.
    sections = policy_doc({"score": {"kind": "sectionRelative", "section": "step"}})
    assert digest(gpu_report(gpu), sections.policies["default"]).to_history().gpu_worst_rank is None
