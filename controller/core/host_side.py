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
"""

from __future__ import annotations

import math
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
) -> F64:
    """Per listed rank (report order), its host score where it is a host-side straggler
    (below ``act``, its GPU not slow, its node agreeing); NaN elsewhere."""
    n = len(ranks)
    out = np.full(n, np.nan)
    names = sorted({name for r in ranks for name in r.section_relative})
    if not names or n < 2:
        return out
    keys = [score_key("sectionRelative", name) for name in names]
    raw = np.array(
        [[_nan(r.section_relative.get(name)) for name in names] for r in ranks], dtype=np.float64
    ).reshape(n, len(names))
    speed = _gpu_speed(ranks, groups, summaries)
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
    node_of = [r.node for r in ranks]
    listed: dict[str, int] = {}
    below: dict[str, int] = {}
    for i, node in enumerate(node_of):
        if math.isfinite(host[i]):
            listed[node] = listed.get(node, 0) + 1
            below[node] = below.get(node, 0) + bool(slow[i])
    for i in np.flatnonzero(slow).tolist():
        node = node_of[i]
        if below[node] >= max(MIN_NODE_RANKS, math.ceil(listed[node] / 2)):
            out[i] = host[i]
    return out


def _gpu_speed(
    ranks: Sequence[RankScores], groups: Groups, summaries: Mapping[str, PeerSummary]
) -> F64:
    """Per rank, its GPU relative score over its peers' median (1.0 where unknown)."""
    gpu = np.fromiter((_nan(r.gpu_relative) for r in ranks), dtype=np.float64, count=len(ranks))
    ref, _ = groups.references(gpu[:, None], dict(summaries), ["gpuRelative"])
    with np.errstate(all="ignore"):
        speed = gpu / np.where(ref[:, 0] > 0, ref[:, 0], np.nan)
    return np.where(np.isfinite(speed) & (speed > 0), speed, 1.0)


def _nan(v: float | None) -> float:
    return math.nan if v is None else v
