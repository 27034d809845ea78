"""``imbalance.imbalance_of``: a rank below in most recent reports is a fault, not the
workload's moving imbalance, even when the capped history left it out."""

from __future__ import annotations

from datetime import timedelta

from controller_builders import T0, policy_doc

from pacekeeper.controller.core.attribution import HISTORY_BELOW_CAP
from pacekeeper.controller.core.imbalance import imbalance_of
from pacekeeper.controller.core.state import HistoryEntry

POLICY = policy_doc().policies["default"]
RANK = 500


def _history(with_rank: bool) -> list[HistoryEntry]:
    """Eight reports whose slowest rank moves; each lists the cap's worth of ranks below,
    RANK among them only ``with_rank``."""
    out = []
    for i in range(8):
        below = list(range(i, i + HISTORY_BELOW_CAP))
        if with_rank:
            below[-1] = RANK
        out.append(HistoryEntry(at=T0 + timedelta(minutes=i), worst_rank=i, below=tuple(below)))
    return out


def test_a_rank_in_every_capped_entry_is_a_fault() -> None:
    assert imbalance_of(_history(with_rank=True), [RANK], POLICY) is None


def test_a_rank_the_cap_left_out_is_imbalance_without_its_streak() -> None:
    got = imbalance_of(_history(with_rank=False), [RANK], POLICY)
    assert got is not None and got["belowFraction"] == 0.0


def test_its_streak_says_what_the_capped_history_could_not() -> None:
    history = _history(with_rank=False)
    assert imbalance_of(history, [RANK], POLICY, {RANK: 8}) is None
    assert imbalance_of(history, [RANK], POLICY, {RANK: 7}) is None  # 7/8 >= 0.8
    got = imbalance_of(history, [RANK], POLICY, {RANK: 6})  # 6/8 < 0.8: it moved
    assert got is not None and got["belowFraction"] == 0.75
