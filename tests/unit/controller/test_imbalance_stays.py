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
