"""Workload imbalance: a job whose slowest rank keeps moving is its data, not a fault.

Pure: reads the job's history of reports (``HistoryEntry``) and the ranks' streaks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pacekeeper.controller.core.policy import Policy
from pacekeeper.controller.core.state import HistoryEntry


def imbalance_of(
    history: Sequence[HistoryEntry],
    ranks: Sequence[int],
    policy: Policy,
    streaks: Mapping[int, int] | None = None,
) -> dict[str, float | int] | None:
    """Evidence that these ranks are workload imbalance, or None when they look like a fault.

    The job counts as imbalanced when the slowest rank keeps moving: at least
    ``imbalanceMinDistinct`` different slowest ranks in the last ``imbalanceHistory``
    reports. In such a job a rank is still a fault when it was below the threshold in at
    least ``imbalanceMinBelowFraction`` of those reports (a slow GPU is slow every time;
    imbalance moves). A real fault that dominates makes the history settle on it, so the
    job stops counting as imbalanced within ``imbalanceHistory`` reports.

    ``streaks`` (rank -> consecutive reports below, the exact record) counts too: a
    history entry keeps only the ``HISTORY_BELOW_CAP`` lowest ranks, and amid a spread of
    lower ones (bursty host stalls on a hundred ranks) a GPU 21 % slow every report fell
    outside it and was held as imbalance for good (issue #38, sampled scenario 79).
    """
    cfg = policy.attribution
    recent = list(history[-cfg.imbalance_history :])
    worsts = {e.worst_rank for e in recent if e.worst_rank is not None}
    if len(worsts) < cfg.imbalance_min_distinct or not recent:
        return None
    best = 0.0
    for r in ranks:
        seen = sum(1 for e in recent if r in e.below)
        if streaks is not None:
            seen = max(seen, min(streaks.get(r, 0), len(recent)))
        best = max(best, seen / len(recent))
    if best >= cfg.imbalance_min_below_fraction:
        return None
    return {
        "distinctSlowest": len(worsts),
        "historyReports": len(recent),
        "belowFraction": round(best, 3),
    }
