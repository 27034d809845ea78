"""Host-side stragglers: a rank slow by its CPU side (a slow data loader, a busy CPU
starving the GPU of launches) while its GPU runs as fast as ever.

GPU scores time kernels, so they cannot see it; section scores can. A section's score
(schemaVersion 2: on each entry's own work, its time less its waits) is compared with
the same section of the rank's peers. Part of a section's time is the GPU's when the
CPU waits for it: a GPU 8% slower than its peers' median (a healthy one: same-SKU GPUs
differ that much) makes its compute sections 8% slower. So each section's time is first
divided by the GPU's speed against its peers when that is below 1 (its GPU relative
score over the peers' median): a fully GPU-bound section is then the same on every
rank, and a section with no GPU work (the data loader) only gains, so this never makes
a rank look slow. The rank's host score is the lowest of its sections so judged, each
with the peers' robust spread (``peer_stats.against``).

Two rules keep it to the machine:

* a rank whose GPU is slow is the GPU policy's: its sections are slow because of it;
* a host is shared by a node's ranks, so a host-side finding needs at least two ranks
  of the node, and half of its listed ranks, slow on the host side. One rank slower in
  a section is the job's own work (rank 0 logs, one rank writes the checkpoint), which
  no node action mends.

With ``one_rank`` (``score.hostSideOneRank``) a rank alone on its node counts too when
its host side became slow against its own recent past (``_lone``: its section
individual scores, its GPU's part out, against its peers' and behind them), so it is
a change, not work the rank always did (rank 0's logging scores 1.0 against its own
past). Its GPU is fine and its node's other ranks are: the rank's process is the
finding (``attribution`` makes it a rank finding, and the ladder's ``restartRank`` its
remedy), never the node.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import numpy as np

from pacekeeper.controller.core import rank_columns
from pacekeeper.controller.core.peer_stats import F64, Groups, against
from pacekeeper.detector.score_report import PeerSummary, RankScores, score_key

MIN_NODE_RANKS = 2
"""Ranks of one node that must be slow on the host side together."""


def host_scores(
    ranks: Sequence[RankScores],
    groups: Groups,
    summaries: Mapping[str, PeerSummary],
    gpu_slow: np.ndarray,
    *,
    act: float,
    k: float | None,
    gpu_ratio: F64 | None = None,
    one_rank: bool = False,
) -> F64:
    """Per listed rank (report order), its host score where it is a host-side straggler
    (below ``act``, its GPU not slow, its node agreeing, or with ``one_rank`` its own
    past agreeing); NaN elsewhere."""
    n = len(ranks)
    out = np.full(n, np.nan)
    if n < 2:
        return out
    names, raw = _sections(ranks)
    if not names:
        return out
    keys = [score_key("sectionRelative", name) for name in names]
    # The GPU's speed against its peers: ``peers`` has it already with the memory on.
    speed = _gpu_speed(ranks, groups, summaries) if gpu_ratio is None else _usable(gpu_ratio)
    adjusted = raw / np.minimum(speed, 1.0)[:, None]
    # A bounded report's peer summaries are of the sections as reported, not as adjusted:
    # the listed ranks' own statistics serve (they are the slowest, so a low bar).
    ref, mad = groups.references(adjusted, None, keys)
    judged = against(adjusted, ref, mad, act, k)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # rows with no section
        host = np.nanmin(judged, axis=1)
    with np.errstate(invalid="ignore"):
        slow = (host < act) & ~gpu_slow
    if one_rank:
        lone = _lone(ranks, names, adjusted < ref, groups, act, k)
        alone = np.isfinite(lone) & ~gpu_slow
        out[alone] = lone[alone]
    if not slow.any():
        return out
    node, index = rank_columns.node_codes(ranks)
    listed = np.bincount(node, weights=np.isfinite(host), minlength=len(index))
    below = np.bincount(node, weights=slow, minlength=len(index))
    agree = below >= np.maximum(MIN_NODE_RANKS, np.ceil(listed / 2))
    keep = slow & agree[node]
    out[keep] = np.fmin(out[keep], host[keep])
    return out


def _lone(  # noqa: PLR0917 (the ranks, their sections, and how to judge them)
    ranks: Sequence[RankScores],
    names: Sequence[str],
    behind: np.ndarray,
    groups: Groups,
    act: float,
    k: float | None,
) -> F64:
    """Per rank, how much its host side slowed against its own past, beside its peers'
    (``score.hostSideOneRank``); NaN where it did not, below ``act``.

    Each section's individual score (this window against the rank's own recent best)
    divided by its GPU's (``gpuIndividual``, when below 1): the GPU's part of a change
    taken out, a fully GPU-bound section then scores 1.0. Judged against the peers'
    median and spread of the same, so a change the whole job saw (a new phase of
    training) is no one's. Only sections where the rank is also behind its peers
    (``behind``: slower than their median, its GPU's part out) count: a rank that was
    faster and is now as fast as the rest is no straggler. Against its own past and not
    only its peers: a rank that always did more (rank 0 logs) has not changed, and a
    fast GPU hides a stall from the peer comparison (its sections are as slow as the
    median's) but not from its own past."""
    ind_names, ind_block = rank_columns.section_block(ranks, "section_individual")
    ind = rank_columns.aligned(ind_names, ind_block, list(names))
    gpu = _usable(rank_columns.floats(ranks, "gpu_individual"))
    change = ind / np.minimum(gpu, 1.0)[:, None]
    keys = [score_key("sectionIndividual", name) for name in names]
    ref, mad = groups.references(change, None, keys)
    judged = np.where(behind, against(change, ref, mad, act, k), np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # rows with no such section
        worst = np.nanmin(judged, axis=1)
    with np.errstate(invalid="ignore"):
        return np.where(worst < act, worst, np.nan)


def _sections(ranks: Sequence[RankScores]) -> tuple[list[str], F64]:
    """(section names, ranks x sections of their relative scores, NaN where none). The
    ranks of one job nearly always time the same sections in the same order: then the
    values are taken as they are, without a lookup per value (16,384 ranks a report)."""
    # One C pass over the mappings (a tuple per rank to compare shapes woke the garbage
    # collector, which then walks the whole report).
    block: tuple[list[str], F64] = rank_columns.section_block(ranks, "section_relative")
    return block


def _gpu_speed(
    ranks: Sequence[RankScores], groups: Groups, summaries: Mapping[str, PeerSummary]
) -> F64:
    """Per rank, its GPU relative score over its peers' median (1.0 where unknown)."""
    gpu = rank_columns.floats(ranks, "gpu_relative")
    ref, _ = groups.references(gpu[:, None], dict(summaries), ["gpuRelative"])
    with np.errstate(all="ignore"):
        speed = gpu / np.where(ref[:, 0] > 0, ref[:, 0], np.nan)
    return _usable(speed)


def _usable(speed: F64) -> F64:
    """1.0 where the GPU's speed is not known."""
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(speed) & (speed > 0), speed, 1.0)
