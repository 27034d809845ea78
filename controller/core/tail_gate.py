"""An intermittent finding needs its GPU: a rank slow only in its section tail while its
kernels kept pace is no disruptive step's cause.

``score.tail`` names a rank slow in a few of its last fifteen windows (intermittent
throttling: a GPU 30 % slower two minutes in every six). Its section times cannot say
*what* was slow. Under bursty host stalls (a data loader that stalls on 40 % of steps
for a few minutes, on ranks taken at random) every rank's sections have such windows,
and a rank that drew two bursts in fifteen minutes was restarted through its tail
(issue #38, sampled scenarios 85, 151, 187, 271, 433, 451: seven restarts of healthy
ranks in 10,240 GPU-days). Throttling slows the kernels in its slow windows; a loader
stall leaves them alone.

So the sequential test (``sequential.advance``) reads a rank found by its tail alone
(not by its host side, whose finding is the process's own) as its peers' median — no
evidence either way — unless its GPU was slow against its peers in some window the
tail still remembers. The GPU is judged as broadly as its kernels show it (the larger
of ``gpuIndividual`` and ``gpuIndividualMedian``, ``breadth``), against the job's
median of it, below ``thresholds.act``. Notices read the judged scores unchanged, so
such a rank is still named. Only policies judging ``gpuIndividual`` with a tail are
gated; a report without GPU scores leaves every score as it was.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from pacekeeper.controller.core import partial_slowdown
from pacekeeper.controller.core.attribution import Digest
from pacekeeper.controller.core.breadth import broad_scores, gpu_slow, read_as_peers
from pacekeeper.controller.core.ids import Rank
from pacekeeper.controller.core.policy import Policy
from pacekeeper.controller.core.policy_types import ScoreKind

TAIL_WINDOWS = 15
"""Report windows the detector's tail statistic looks back over (the detector's
``scoring.TAIL_WINDOWS``; the core reads the report schema only, so the figure is
repeated here and a test holds the two equal)."""
MAX_REMEMBERED = 1024
"""Ranks whose last slow GPU window a job keeps (the state's size bound, ~40 KB of the
job's ConfigMap); the oldest go first. A job with more GPUs slow at once than this is
slow as a whole, and the gate is no use to it."""


def memory_s(window_s: float) -> float:
    """How long a slow GPU window counts: as long as the tail remembers a window."""
    return float(TAIL_WINDOWS * window_s)


def remembered(
    slow_at: Mapping[Rank, datetime], slow: Iterable[Rank], at: datetime, keep_s: float
) -> dict[Rank, datetime]:
    """``slow_at`` with ``slow`` stamped ``at`` and stamps older than ``keep_s`` gone."""
    since = at - timedelta(seconds=keep_s)
    out = {r: t for r, t in slow_at.items() if t >= since}
    for r in slow:
        out[r] = at
    if len(out) > MAX_REMEMBERED:
        newest = sorted(out.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
        out = dict(newest[:MAX_REMEMBERED])
    return out


def gated(
    scores: Mapping[int, float],
    tail: Mapping[int, float],
    host_side: Mapping[int, float],
    slow_at: Mapping[Rank, datetime],
) -> Mapping[int, float]:
    """``scores`` with each rank found by its tail alone and no slow GPU window in
    ``slow_at`` (already trimmed to the tail's memory) read as the peers' median."""
    held = [r for r in tail if r in scores and r not in host_side and r not in slow_at]
    if not held:
        return scores
    return read_as_peers(scores, held)


def test_input(
    d: Digest, policy: Policy, slow_at: Mapping[Rank, datetime]
) -> tuple[Mapping[int, float], Mapping[Rank, datetime]]:
    """What the sequential test reads for digest ``d`` (a rank the peer check lowered
    within a healthy spread, ``Digest.peers_only``, at its score before the check; the
    broad GPU score; a rank whose fastest kernels kept pace, ``partial_slowdown``; then
    the gate), and the job's slow GPU windows after it."""
    act = policy.thresholds.act
    judged = d.judged_scores()
    for r, before in d.peers_only.items():
        # The tail's and the host side's findings stand (the tail has its own gate).
        if r in judged and r not in d.host_side and r not in d.tail:
            judged[r] = max(judged[r], before)
    scores = broad_scores(judged, d.report, policy.score.kind, act)
    findings = {*d.tail, *d.host_side}
    scores = partial_slowdown.held(
        scores, judged, d.report, kind=policy.score.kind, act=act, keep_findings=findings
    )
    if policy.score.kind is not ScoreKind.GPU_INDIVIDUAL or policy.score.tail is None:
        return scores, slow_at
    keep = remembered(slow_at, gpu_slow(d.report, act), d.at, memory_s(d.report.window_s))
    return gated(scores, d.tail, d.host_side, keep), keep
