"""Robust references: each rank measured against the ranks doing the same work, and the
rank the others wait for told from the ones that wait.

Relative scores arrive measured against the job's fastest rank: ``s_i = t_best / t_i``.
Then ``s_i / median(s_peers) = median(t_peers) / t_i``, the rank's time against its
peers' median, without the times (exact for one key; for the kernel-weighted GPU score
a close approximation). So the controller moves the reference itself, on every report —
version 1 reports and imported traces too — and the extreme minimum of a large job no
longer makes its healthy ranks look slow. Individual scores (against the rank's own
baseline) are divided by their peers' median individual score the same way: a change the
whole group shares — a slower network, everyone waiting longer for one slow rank in a
section that holds the collective — is not this rank's.

Peers are ``score_report.peer_key``'s: the same ``group``; else the same coordinates but
the replica ones (dp, tp, cp); else the whole job. A rank is compared with the *others*
of its group (leave-one-out median and median absolute deviation, exact up to
``LOO_MAX_GROUP`` members; beyond, the group's own, which one rank barely moves), and is
slow only when it is also ``minDeviations`` robust spreads below that median: a rank
within its peers' spread is raised to ``thresholds.act`` (not slow, not recovered). A
rank without a peer has no relative score under this reference. A bounded (truncated)
report lists only its worst ranks, so their peers' statistics come from
``summary.peers``, which covers every rank.

Wait shares (schemaVersion 2) give each rank a *busy score*: the same comparison on the
share of the window it did not spend waiting. In a synchronous job everyone's step
takes as long as the slowest rank's, so the rank the others wait for is the one that is
busy longest, and a rank that waits is not slow by its own work:

* a victim — below ``act`` on the judged score, busy score at or above ``act``, and
  waiting at least ``attribution.victimMinWaitShare`` of the window more than the peer
  that waits least (the one it waits for) — is judged by its busy score instead: never
  a suspect;
* a culprit — busy score below ``act`` — is named (``waitedFor``); when the report has
  victims (the policy's score holds waiting), it is also judged by its busy score when
  that is lower, so a section that contains the collective (where the culprit looks
  fastest) still localises it. Without victims the score measures each rank's own
  work, and a rank busy with work no score times (rank 0's logging in a real trace)
  is only named.

The scores as reported still count for one thing: when most ranks are below ``act``
on them (victims left out), the job is slow as a whole — typically a section that holds
a collective, where everyone but the rank they wait for looks slow — and
``attribution`` calls it job-wide before any rank is judged against its peers.

With the memory of hardware (``hardware_memory``, reports carrying ``gpuUuid``) each
listed rank also gets its GPU's *ratio* — its GPU relative score over its peers' median,
uncapped, what the memory learns from — and a ``GpuCalibration``: the GPU's learned speed
factor divides its GPU relative score before it is compared with its peers (the peers'
scores divided by theirs), so a GPU that is always 6 % slower than the median of its
model judges at 1.0 when it runs as it always does (and, as reported, against the
fastest rank so divided: the spread is no job-wide slowdown). Under ``gpuIndividual`` the policy
may also judge a GPU by that calibrated relative score (``peer_check``), where its
factor is known or it is slower than any factor could be: a GPU slow from the job's
start has a slow individual baseline, and only its peers say so.

Separate from ``attribution`` so that its per-rank loop stays one pass over values
computed here in bulk (numpy, batched over groups of equal size).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import assert_never

import numpy as np
import numpy.typing as npt

from pacekeeper.controller.core import host_side, rank_columns, tail
from pacekeeper.controller.core.peer_stats import F64, Groups, against
from pacekeeper.controller.core.policy import Policy, Reference, ScoreKind
from pacekeeper.controller.core.rank_columns import any_given
from pacekeeper.detector.score_report import (
    PeerSummary,
    RankScores,
    ScoreReport,
    score_key,
)


@dataclass(frozen=True, slots=True)
class GpuCalibration:
    """What the memory of hardware knows of each listed rank's GPU (report order)."""

    factors: F64
    """The GPU's learned speed factor against its peers' median; 1.0 where none."""
    known: npt.NDArray[np.bool_]
    """The GPU has a learned factor."""
    max_deviation: float
    """No factor lies further from 1 than this (``calibration.maxDeviation``)."""
    calibrate: bool = True
    """Divide GPU relative scores by the factors (``hardware.calibrate``)."""
    peer_check: bool = True
    """Judge ``gpuIndividual`` also by the calibrated relative score (``hardware.peerCheck``)."""
    names_gpus: bool = True
    """The report names its ranks' GPUs (``gpuUuid``): the memory learns from it."""
    band: float = 0.0
    """The calibration's track band: the peer check counts a calibrated relative score
    only this far below ``act`` (a factor follows a GPU within the band, so drift inside
    it is the GPU as it always was; the simulator's drift at twice the model's put healthy
    GPUs at 0.97 against a factor learned an hour before)."""


@dataclass(frozen=True, slots=True)
class Judged:
    """Per listed rank (report order), the score compared with ``thresholds.act``."""

    values: F64
    """NaN where a rank has no usable score."""
    victims: dict[int, float] = field(default_factory=dict)
    """Rank -> wait share: below on the judged score because it waited."""
    culprits: dict[int, float] = field(default_factory=dict)
    """Rank -> busy score: the ranks the others wait for (busy score below ``act``),
    judged by it only when there are victims."""
    reported_below: frozenset[int] | None = None
    """Ranks below ``act`` on the scores as reported (victims left out); None: the
    judged values are the reported ones."""
    gpu_ratio: list[float | None] | None = None
    """With a ``GpuCalibration``: each rank's GPU relative score over its peers' median,
    uncapped and uncalibrated (what the memory of hardware learns from); None: not
    computed."""
    host_side: dict[int, float] = field(default_factory=dict)
    """Rank -> host score: judged by its host side (``score.hostSide``, ``host_side``)."""
    tail: dict[int, float] = field(default_factory=dict)
    """Rank -> tail against its peers': slow in its tail (``score.tail``, ``tail``)."""
    waits_timed: bool = False
    """Some listed rank carries a wait share (read once here; ``attribution`` asks too)."""
    peers_only: dict[int, float] = field(default_factory=dict)
    """Rank -> its score before the peer check, for the ranks the check lowered whose GPU
    a healthy spread still explains read as broadly as its kernels show it
    (``_GpuPeers.checked``): named, but the lowering is no evidence for a disruptive
    step (``tail_gate.test_input``)."""

    def scores(self) -> list[float | None]:
        """``values`` as a list, None where a rank has no usable score (off the hot path)."""
        return _as_list(self.values)


def judge(
    report: ScoreReport,
    policy: Policy,
    get: Callable[[RankScores], float | None],
    calibration: GpuCalibration | None = None,
) -> Judged:
    """The judged score of every listed rank (``get`` reads the policy's score), with
    each GPU's learned factor applied when ``calibration`` is given."""
    ranks = report.ranks
    sel = policy.score
    relative = sel.reference is Reference.PEER_MEDIAN
    waits = any_given(ranks, "wait_share")
    if not relative and not waits and calibration is None:
        return Judged(np.fromiter((_nan(get(r)) for r in ranks), np.float64, len(ranks)))
    groups = Groups.of(ranks)
    act = policy.thresholds.act
    k = sel.min_deviations
    summaries = {p.peers: p for p in report.summary.peers} if report.truncated else {}
    gpu = (
        _GpuPeers.of(ranks, groups, summaries, calibration)
        if calibration is not None and _needs_gpu_peers(calibration, sel.kind)
        else None
    )
    ratio = None if gpu is None else _as_list(gpu.ratio)
    host: dict[int, float] = {}
    tails: dict[int, float] = {}
    peers_only: dict[int, float] = {}
    if relative:
        values, reported = _peer_relative(ranks, policy, groups, summaries, gpu, report.truncated)
        if gpu is not None and sel.kind is ScoreKind.GPU_INDIVIDUAL:
            before = values
            values, spread = gpu.checked(values, groups, summaries, act, k)
            if spread.any():
                numbers = rank_columns.numbers(ranks)[spread].tolist()
                peers_only = dict(zip(numbers, before[spread].tolist(), strict=True))
        if sel.host_side:
            ratios = None if gpu is None else gpu.ratio
            values, host = _with_host_side(
                ranks, values, groups, summaries, (act, sel.host_side_act or act), k, ratios,
                sel.host_side_one_rank,
            )  # fmt: skip
        if sel.tail is not None:
            values, tails = tail.with_tail(ranks, values, groups, summaries, sel.tail, act=act)
    else:
        values = np.fromiter((_nan(get(r)) for r in ranks), dtype=np.float64, count=len(ranks))
        reported = values.copy()
    if not waits:
        if not relative:
            return Judged(values, gpu_ratio=ratio)
        below = _below(ranks, reported, act)
        return Judged(
            values, reported_below=below, gpu_ratio=ratio, host_side=host, tail=tails,
            peers_only=peers_only,
        )  # fmt: skip
    wait = rank_columns.floats(ranks, "wait_share")
    # The busy share is a time (longer is slower): its inverse is compared like a score.
    with np.errstate(divide="ignore"):
        pace = np.where(wait < 1.0, 1.0 / (1.0 - wait), np.nan)[:, None]
    ref, mad = groups.references(pace)
    q = against(pace, ref, mad, act, k)[:, 0]
    victims: dict[int, float] = {}
    culprits: dict[int, int] = {}  # rank -> row
    floor = policy.attribution.victim_min_wait_share
    least = groups.minimum(wait)  # what the peer waited for least waits
    own_gpu = _slow_own_gpu(ranks, policy, groups, summaries)
    for i in np.flatnonzero(np.isfinite(q)).tolist():
        v, qi = values[i], float(q[i])
        victim = math.isfinite(v) and v < act <= qi and wait[i] >= least[i] + floor
        if victim and not own_gpu[i]:
            victims[ranks[i].rank] = round(float(wait[i]), 4)
            values[i] = qi
        elif qi < act:
            culprits[ranks[i].rank] = i
    if victims:
        # The score waits: the ranks waited for are judged by how long they are busy.
        # Without victims the score already measures the ranks' own work, and a rank
        # busy with work no score times (rank 0's logging) is only named.
        for i in culprits.values():
            v = values[i]
            values[i] = q[i] if not math.isfinite(v) else min(v, q[i])
    named = {rank: round(float(q[i]), 4) for rank, i in culprits.items()}
    below = _below(ranks, reported, act) - victims.keys()
    return Judged(
        values, victims, named, frozenset(below), ratio, host, tails, waits_timed=True,
        peers_only=peers_only,
    )  # fmt: skip


def _needs_gpu_peers(cal: GpuCalibration, kind: ScoreKind) -> bool:
    """Whether the GPU ratios are of any use: the memory learns from them, a factor
    divides them, or the peer check reads them. A 16,384-rank report naming no GPU under
    a relative policy skips them (they cost more than the rest of its judgement)."""
    peer_check = cal.peer_check and kind is ScoreKind.GPU_INDIVIDUAL
    return cal.names_gpus or peer_check or (cal.calibrate and bool(cal.known.any()))


def _with_host_side(  # noqa: PLR0917 (the ranks, their peers, and how to judge them)
    ranks: Sequence[RankScores],
    values: F64,
    groups: Groups,
    summaries: dict[str, PeerSummary],
    acts: tuple[float, float],
    k: float | None,
    gpu_ratio: F64 | None = None,
    one_rank: bool = False,
) -> tuple[F64, dict[int, float]]:
    """``values`` (GPU scores) lowered to the host score of each host-side straggler,
    scaled by ``act / host_act`` (``acts``: ``thresholds.act`` and ``score.hostSideAct``)
    so a host score below its own line is below ``act``; ``gpu_ratio``: the GPU ratios
    when the memory of hardware computed them already; ``one_rank``: a rank alone on its
    node counts (``score.hostSideOneRank``)."""
    act, host_act = acts
    with np.errstate(invalid="ignore"):
        gpu_slow = values < act
    hs = host_side.host_scores(
        ranks, groups, summaries, gpu_slow, act=host_act, k=k, gpu_ratio=gpu_ratio,
        one_rank=one_rank,
    )  # fmt: skip
    judged = hs * (act / host_act) if host_act > 0 else hs
    with np.errstate(invalid="ignore"):
        lower = np.isfinite(judged) & ~(values <= judged)
    host = {ranks[i].rank: round(float(hs[i]), 4) for i in np.flatnonzero(lower).tolist()}
    return np.where(lower, judged, values), host


def _slow_own_gpu(
    ranks: Sequence[RankScores],
    policy: Policy,
    groups: Groups,
    summaries: dict[str, PeerSummary],
) -> npt.NDArray[np.bool_]:
    """Per rank: slow on a GPU score, so slow by its own work and never a victim. GPU
    scores leave the communication kernels out: no wait is in them. A 10% slower GPU
    that is not the job's slowest still waits for the slowest one, more than the floor;
    judged by its busy share it would pass as a victim (the simulator found every such
    GPU missed). Section scores are what can hold a wait; only they make victims."""
    sel = policy.score
    if sel.kind in (ScoreKind.GPU_RELATIVE, ScoreKind.GPU_INDIVIDUAL):
        return np.ones(len(ranks), dtype=np.bool_)  # the judged score holds no wait at all
    low = np.zeros(len(ranks), dtype=np.bool_)
    if sel.kind is not ScoreKind.WORST:
        return low
    act = policy.thresholds.act
    for kind in (ScoreKind.GPU_RELATIVE, ScoreKind.GPU_INDIVIDUAL):
        keys, raw = _matrix(ranks, kind, "")
        if sel.reference is Reference.PEER_MEDIAN:
            ref, mad = groups.references(raw, summaries, keys)
            raw = against(raw, ref, mad, act, sel.min_deviations)
        with np.errstate(invalid="ignore"):
            low |= (raw < act).any(axis=1)
    return low


def _below(ranks: Sequence[RankScores], reported: F64, act: float) -> frozenset[int]:
    with np.errstate(invalid="ignore"):
        low = reported < act
    return frozenset(rank_columns.numbers(ranks)[low].tolist())


def _nan(v: float | None) -> float:
    return math.nan if v is None else v


def _as_list(values: F64) -> list[float | None]:
    return [None if math.isnan(v) else v for v in values.tolist()]


def _peer_relative(  # noqa: PLR0917 (the ranks, their peers, and how to judge them)
    ranks: Sequence[RankScores],
    policy: Policy,
    groups: Groups,
    summaries: dict[str, PeerSummary],
    gpu: _GpuPeers | None = None,
    report_truncated: bool = False,
) -> tuple[F64, F64]:
    """The policy's score of every rank against its peers, and as reported; for
    ``worst``, the lowest of all its scores, each against the peers' same score. With
    ``gpu`` calibrating (and some factor known), the GPU relative column is divided by
    each GPU's factor, as judged and as reported."""
    sel = policy.score
    keys, raw = _matrix(ranks, sel.kind, sel.section or "")
    judged = reported = raw
    cal = None if gpu is None else gpu.calibration
    if cal is not None and cal.calibrate and keys[:1] == ["gpuRelative"] and cal.known.any():
        assert gpu is not None
        judged, reported = raw.copy(), raw.copy()
        judged[:, 0] = gpu.calibrated
        # As reported, too, the GPUs' spread is no slowdown: against the fastest rank
        # once each is divided by its factor. A bounded report may not list the fastest
        # rank: there each stays against the reported best (capped at 1).
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)  # no GPU score at all
            best = 1.0 if report_truncated else np.nanmax(gpu.calibrated)
            reported[:, 0] = np.minimum(gpu.calibrated / best, 1.0)
    ref, mad = groups.references(judged, summaries, keys)
    scores = against(judged, ref, mad, policy.thresholds.act, sel.min_deviations)
    if scores.shape[1] == 1:
        return scores[:, 0], reported[:, 0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows: nothing measured
        return _lowest(scores), _lowest(reported)


def _lowest(m: F64) -> F64:
    """Per row, its lowest value, NaN only where every value is. Column by column:
    ``nanmin(axis=1)`` reduces rows of ~10 in a strided inner loop (~11 ms at 131,072
    ranks on the 2-core VM), ``fmin`` over whole columns runs contiguous, in the same
    order of comparisons."""
    out = np.array(m[:, 0], dtype=np.float64)
    for j in range(1, m.shape[1]):
        np.fmin(out, m[:, j], out=out)
    return out


def _matrix(ranks: Sequence[RankScores], kind: ScoreKind, section: str) -> tuple[list[str], F64]:
    """(``score_key`` of each column, ranks x columns) of the scores the policy's kind
    reads; NaN where a rank has none. Built from whole columns (``rank_columns``), no
    Python step per rank: this runs on every rank of every report."""
    match kind:
        case ScoreKind.GPU_RELATIVE:
            return ["gpuRelative"], rank_columns.floats(ranks, "gpu_relative")[:, None]
        case ScoreKind.GPU_INDIVIDUAL:
            return ["gpuIndividual"], rank_columns.floats(ranks, "gpu_individual")[:, None]
        case ScoreKind.SECTION_RELATIVE:
            col = [r.section_relative.get(section) for r in ranks]
            return [score_key("sectionRelative", section)], np.array(col, np.float64)[:, None]
        case ScoreKind.SECTION_INDIVIDUAL:
            col = [r.section_individual.get(section) for r in ranks]
            return [score_key("sectionIndividual", section)], np.array(col, np.float64)[:, None]
        case ScoreKind.WORST:
            rel_names, rel = rank_columns.section_block(ranks, "section_relative")
            ind_names, ind = rank_columns.section_block(ranks, "section_individual")
            names = sorted({*rel_names, *ind_names})
            keys = [
                "gpuRelative",
                "gpuIndividual",
                *(score_key("sectionRelative", n) for n in names),
                *(score_key("sectionIndividual", n) for n in names),
            ]
            raw = np.empty((len(ranks), len(keys)), dtype=np.float64)
            raw[:, 0] = rank_columns.floats(ranks, "gpu_relative")
            raw[:, 1] = rank_columns.floats(ranks, "gpu_individual")
            k = len(names)
            raw[:, 2 : 2 + k] = rank_columns.aligned(rel_names, rel, names)
            raw[:, 2 + k :] = rank_columns.aligned(ind_names, ind, names)
            return keys, raw
        case _:
            assert_never(kind)


@dataclass(frozen=True, slots=True)
class _GpuPeers:
    """Each listed rank's GPU relative score against its peers, raw and calibrated."""

    calibration: GpuCalibration
    ratio: F64
    """Raw GPU relative score over the peers' median of them, uncapped (NaN: none)."""
    calibrated: F64
    """GPU relative score divided by the GPU's factor (NaN: none)."""
    broad_ratio: F64
    """``ratio`` read as broadly as the rank's kernels show it: the higher of its GPU
    relative score and its ``gpuRelativeMedian`` (v7) over the peers' median of each;
    ``ratio`` where the report carries no median. Never below ``ratio``."""

    @classmethod
    def of(
        cls,
        ranks: Sequence[RankScores],
        groups: Groups,
        summaries: dict[str, PeerSummary],
        calibration: GpuCalibration,
    ) -> _GpuPeers:
        raw = rank_columns.floats(ranks, "gpu_relative")
        ref, _ = groups.references(raw[:, None], summaries, ["gpuRelative"])
        with np.errstate(all="ignore"):
            ratio = raw / np.where(ref[:, 0] > 0, ref[:, 0], np.nan)
            calibrated = raw / calibration.factors
        broad_ratio = ratio
        if rank_columns.any_given(ranks, "gpu_relative_median"):
            med = rank_columns.floats(ranks, "gpu_relative_median")
            med_ref, _ = groups.references(med[:, None], summaries, ["gpuRelativeMedian"])
            with np.errstate(all="ignore"):
                med_ratio = med / np.where(med_ref[:, 0] > 0, med_ref[:, 0], np.nan)
            # fmax: a rank without a median (or peers with none) keeps its mean.
            broad_ratio = np.fmax(ratio, med_ratio)
        return cls(calibration, ratio, calibrated, broad_ratio)

    def checked(
        self,
        values: F64,
        groups: Groups,
        summaries: dict[str, PeerSummary],
        act: float,
        k: float | None,
    ) -> tuple[F64, npt.NDArray[np.bool_]]:
        """``values`` (individual scores against the peers'), lowered to the calibrated
        relative score where that is lower and means something: the GPU's factor is
        known, or it lies further below its peers than any factor may (so no spread
        between healthy GPUs explains it), and it is more than the track band below
        ``act``. And which lowered ranks a healthy spread still explains when read
        broadly: no known factor, and ``broad_ratio`` within the factor's range or
        within the track band of its edge.

        Those stay lowered (named; a pipeline stage's pattern stays whole), but are no
        evidence for a disruptive step. The relative score is a time-weighted mean,
        which data skew pulls down by the share of the kernels whose work follows the
        data, while a slow GPU slows the median kernel too: a GPU at the edge of the
        healthy spread with a heavier batch was restarted that way (issue #38, sampled
        scenario 64: median 0.87 of its peers', mean 0.77). And a healthy GPU drifts
        within the band, which is what the band is for: one at the spread's edge
        drifting 3 % slower sat at 0.848 and was restarted (scenario 290).
        docs/decision-rule.md, "The relative median"."""
        cal = self.calibration
        none = np.zeros(values.shape, dtype=np.bool_)
        if not cal.peer_check:
            return values, none
        column = self.calibrated[:, None]
        ref, mad = groups.references(column, summaries, ["gpuRelative"])
        rel = against(column, ref, mad, act, k)[:, 0]
        with np.errstate(invalid="ignore"):
            meaningful = cal.known | (self.ratio < 1.0 - cal.max_deviation)
            lower = np.isfinite(rel) & meaningful & ~(values <= rel) & (rel < act - cal.band)
            edge = 1.0 - cal.max_deviation - cal.band
            spread = lower & ~cal.known & ~(self.broad_ratio < edge)
        return np.where(lower, rel, values), spread
