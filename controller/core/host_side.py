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
its host side became slow: the same section is also below ``act`` against the rank's
own recent past (its individual score), so it is a change, not work the rank always
did (rank 0's logging scores 1.0 against its own past). Its GPU is fine and its node's
other ranks are: the rank's process is the finding (``attribution`` makes it a rank
finding, and the ladder's ``restartRank`` its remedy), never the node.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Mapping, Sequence

import numpy as np

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
    if not slow.any():
        return out
    index: dict[str, int] = {}
    node = np.fromiter(
        (index.setdefault(r.node, len(index)) for r in ranks), dtype=np.int64, count=n
    )
    listed = np.bincount(node, weights=np.isfinite(host), minlength=len(index))
    below = np.bincount(node, weights=slow, minlength=len(index))
    agree = below >= np.maximum(MIN_NODE_RANKS, np.ceil(listed / 2))
    keep = slow & agree[node]
    if one_rank:
        with np.errstate(invalid="ignore"):
            slow_sections = judged < act
        keep |= slow & _changed(ranks, names, slow_sections, act)
    out[keep] = host[keep]
    return out


def _changed(
    ranks: Sequence[RankScores], names: Sequence[str], slow: np.ndarray, act: float
) -> np.ndarray:
    """Per rank: some section slow against its peers (``slow``, ranks x ``names``) is
    also below ``act`` against the rank's own past (``sectionIndividual``); a rank
    without individual scores never is (nothing says its host side changed)."""
    out = np.zeros(len(ranks), dtype=np.bool_)
    for i in np.flatnonzero(slow.any(axis=1)).tolist():
        own = ranks[i].section_individual
        for j in np.flatnonzero(slow[i]).tolist():
            v = own.get(names[j])
            if v is not None and v < act:
                out[i] = True
                break
    return out


def _sections(ranks: Sequence[RankScores]) -> tuple[list[str], F64]:
    """(section names, ranks x sections of their relative scores, NaN where none). The
    ranks of one job nearly always time the same sections in the same order: then the
    values are taken as they are, without a lookup per value (16,384 ranks a report)."""
    tables = [r.section_relative for r in ranks]
    shapes = set(map(tuple, tables))
    names = sorted({name for shape in shapes for name in shape})
    if len(shapes) == 1:
        (shape,) = shapes
        # One flat pass, no list per rank: allocating 16,384 of them wakes the garbage
        # collector, which then walks the whole report (four times slower in place).
        flat = itertools.chain.from_iterable(map(dict.values, tables))
        count = len(ranks) * len(names)
        raw = np.fromiter(flat, dtype=np.float64, count=count).reshape(len(ranks), len(names))
        return names, raw[:, [shape.index(name) for name in names]]
    rows = [[t.get(name) for name in names] for t in tables]
    return names, np.array(rows, dtype=np.float64).reshape(len(ranks), len(names))


def _gpu_speed(
    ranks: Sequence[RankScores], groups: Groups, summaries: Mapping[str, PeerSummary]
) -> F64:
    """Per rank, its GPU relative score over its peers' median (1.0 where unknown)."""
    gpu = np.array([r.gpu_relative for r in ranks], dtype=np.float64)
    ref, _ = groups.references(gpu[:, None], dict(summaries), ["gpuRelative"])
    with np.errstate(all="ignore"):
        speed = gpu / np.where(ref[:, 0] > 0, ref[:, 0], np.nan)
    return _usable(speed)


def _usable(speed: F64) -> F64:
    """1.0 where the GPU's speed is not known."""
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(speed) & (speed > 0), speed, 1.0)
