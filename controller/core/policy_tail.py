"""``score.tail``: judge each rank also by its tail statistic (``sectionTail``).

A rank throttled 2 minutes in every 6 is slow one report in three: its median-based
score falls below ``act`` in the slow windows and recovers in between, so a persistence
rule on consecutive reports never fires. The detector's tail statistic (schemaVersion
4, ``detector.scoring.tail_score``) stays low for fifteen windows after two slow ones; this
rule compares it with the rank's peers, as ``thresholds.act`` does a score.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, Strict

from .policy_types import PolicyModel, UnitInterval


class TailRule(PolicyModel):
    """A rank whose worst section tail, over its peers' median of it, is below ``act``
    and ``minDeviations`` robust spreads below that median counts as slow; its judged
    score becomes ``thresholds.act x tail / tail.act`` (a tail at ``tail.act`` judges as
    a score at ``thresholds.act``), so persistence, the ladder and recovery work on it
    as on any score."""

    act: UnitInterval = 0.85
    """A tail (the first quartile over the second-highest of the last fifteen window
    times, against the peers') strictly below this counts as slow: 0.85 finds windows
    18% slower than the rank's good ones, in two of its last fifteen reports."""
    min_deviations: Annotated[float, Strict(), Field(ge=0, le=100)] | None = 3.0
    """Also this many robust spreads (1.4826 x the peers' median absolute deviation of
    their tails) below the peers' median (null: no such test). Heavy-tailed jitter
    widens every rank's tail alike: the spread keeps it from naming one of them."""


def selector_problem(
    *, reference_peers: bool, host_side: bool, one_rank: bool, tail: TailRule | None
) -> str | None:
    """Why ``score.tail`` or ``score.hostSideOneRank`` cannot be used as given; None: fine."""
    if tail is not None and not reference_peers:
        return (
            "tail needs reference peerMedian: every rank's tail widens with the job's own "
            "jitter, and only its peers' tails say how much is normal"
        )
    if one_rank and not host_side:
        return (
            "hostSideOneRank and hostSideAct need hostSide: true (they widen and set the "
            "host-side rule; without hostSide there is no host-side rule)"
        )
    return None


def ladder_problem(*, one_rank: bool, restart_rank: bool) -> str | None:
    """Why ``score.hostSideOneRank`` cannot go with this ladder; None: fine."""
    if one_rank and not restart_rank:
        return (
            "score.hostSideOneRank needs ladder.restartRank.enabled: a rank alone slow on "
            "its host side is its process's finding, and without restartRank the ladder's "
            "next step would be a node action on a node whose other ranks are healthy"
        )
    return None
