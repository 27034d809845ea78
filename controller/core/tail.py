"""Intermittent stragglers: a rank slow in a few windows out of many (``score.tail``).

Each rank's tail statistic (``RankScores.section_tail``: per section, the first
quartile of its last fifteen window times over their second-highest) is judged
against its peers' like any relative score (``peer_stats.against``: over the peers'
median, and beyond their robust spread). A rank's tail is its worst section's. A rank
whose tail is below ``tail.act`` gets a judged score below ``thresholds.act`` in
proportion, so the engine's persistence and ladder see it as slow for as long as its
tail remembers the slow windows.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import numpy as np

from pacekeeper.controller.core.peer_stats import F64, Groups, against
from pacekeeper.controller.core.policy_tail import TailRule
from pacekeeper.detector.score_report import PeerSummary, RankScores, score_key


def tail_scores(
    ranks: Sequence[RankScores],
    groups: Groups,
    summaries: Mapping[str, PeerSummary],
    rule: TailRule,
) -> F64:
    """Per listed rank (report order), its tail against its peers' where below
    ``rule.act``; NaN elsewhere (no tail, or a tail like its peers')."""
    n = len(ranks)
    out = np.full(n, np.nan)
    names = sorted({name for r in ranks for name in (r.section_tail or {})})
    if n < 2 or not names:
        return out
    raw = np.array(
        [[(r.section_tail or {}).get(name) for name in names] for r in ranks], dtype=np.float64
    )
    keys = [score_key("sectionTail", name) for name in names]
    ref, mad = groups.references(raw, dict(summaries), keys)
    judged = against(raw, ref, mad, rule.act, rule.min_deviations)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # rows with no tail
        worst = np.nanmin(judged, axis=1)
    with np.errstate(invalid="ignore"):
        slow = worst < rule.act
    out[slow] = worst[slow]
    return out


def with_tail(
    ranks: Sequence[RankScores],
    values: F64,
    groups: Groups,
    summaries: Mapping[str, PeerSummary],
    rule: TailRule,
    *,
    act: float,
) -> tuple[F64, dict[int, float]]:
    """``values`` lowered to ``act x tail / rule.act`` for each rank slow in its tail,
    and rank -> tail for those ranks."""
    ts = tail_scores(ranks, groups, summaries, rule)
    mapped = ts * (act / rule.act) if rule.act > 0 else ts
    with np.errstate(invalid="ignore"):
        lower = np.isfinite(mapped) & ~(values <= mapped)
    found = np.flatnonzero(np.isfinite(ts)).tolist()
    tails = {ranks[i].rank: round(float(ts[i]), 4) for i in found}
    return np.where(lower, mapped, values), tails
