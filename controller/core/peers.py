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

Separate from ``attribution`` so that its per-rank loop stays one pass over values
computed here in bulk (numpy, batched over groups of equal size).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, assert_never

import numpy as np
import numpy.typing as npt

from pacekeeper.controller.core.policy import Policy, Reference, ScoreKind
from pacekeeper.detector.score_report import (
    PeerSummary,
    RankScores,
    ScoreReport,
    peer_key,
    score_key,
)

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

LOO_MAX_GROUP = 32
"""Groups up to this size get an exact leave-one-out reference (a rank of a group of
two is compared with the other one, not with the mean of both)."""

MAD_TO_SIGMA = 1.4826
"""Median absolute deviation to standard deviation, for normally distributed noise."""


@dataclass(frozen=True, slots=True)
class Judged:
    """Per listed rank (report order), the score compared with ``thresholds.act``."""

    values: list[float | None]
    victims: dict[int, float] = field(default_factory=dict)
    """Rank -> wait share: below on the judged score because it waited."""
    culprits: dict[int, float] = field(default_factory=dict)
    """Rank -> busy score: the ranks the others wait for (busy score below ``act``),
    judged by it only when there are victims."""
    reported_below: frozenset[int] | None = None
    """Ranks below ``act`` on the scores as reported (victims left out); None: the
    judged values are the reported ones."""


def judge(report: ScoreReport, policy: Policy, get: Callable[[RankScores], float | None]) -> Judged:
    """The judged score of every listed rank (``get`` reads the policy's score)."""
    ranks = report.ranks
    sel = policy.score
    relative = sel.reference is Reference.PEER_MEDIAN
    waits = any(r.wait_share is not None for r in ranks)
    if not relative and not waits:
        return Judged([get(r) for r in ranks])
    groups = _Groups.of(ranks)
    act = policy.thresholds.act
    k = sel.min_deviations
    summaries = {p.peers: p for p in report.summary.peers} if report.truncated else {}
    if relative:
        values, reported = _peer_relative(ranks, policy, groups, summaries)
    else:
        values = np.fromiter((_nan(get(r)) for r in ranks), dtype=np.float64, count=len(ranks))
        reported = values.copy()
    if not waits:
        return Judged(_as_list(values), reported_below=_below(ranks, reported, act))
    wait = np.fromiter((_nan(r.wait_share) for r in ranks), dtype=np.float64, count=len(ranks))
    # The busy share is a time (longer is slower): its inverse is compared like a score.
    with np.errstate(divide="ignore"):
        pace = np.where(wait < 1.0, 1.0 / (1.0 - wait), np.nan)[:, None]
    ref, mad = groups.references(pace)
    q = _scores(pace, ref, mad, act, k)[:, 0]
    victims: dict[int, float] = {}
    culprits: dict[int, int] = {}  # rank -> row
    floor = policy.attribution.victim_min_wait_share
    least = groups.minimum(wait)  # what the peer waited for least waits
    for i in np.flatnonzero(np.isfinite(q)).tolist():
        v, qi = values[i], float(q[i])
        if math.isfinite(v) and v < act <= qi and wait[i] >= least[i] + floor:
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
    return Judged(_as_list(values), victims, named, frozenset(below))


def _below(ranks: Sequence[RankScores], reported: F64, act: float) -> frozenset[int]:
    with np.errstate(invalid="ignore"):
        low = np.flatnonzero(reported < act)
    return frozenset(ranks[i].rank for i in low.tolist())


def _nan(v: float | None) -> float:
    return math.nan if v is None else v


def _as_list(values: F64) -> list[float | None]:
    return [None if math.isnan(v) else v for v in values.tolist()]


def _peer_relative(
    ranks: Sequence[RankScores],
    policy: Policy,
    groups: _Groups,
    summaries: dict[str, PeerSummary],
) -> tuple[F64, F64]:
    """The policy's score of every rank against its peers, and as reported; for
    ``worst``, the lowest of all its scores, each against the peers' same score."""
    sel = policy.score
    keys, raw = _matrix(ranks, sel.kind, sel.section or "")
    ref, mad = groups.references(raw, summaries, keys)
    scores = _scores(raw, ref, mad, policy.thresholds.act, sel.min_deviations)
    if scores.shape[1] == 1:
        return scores[:, 0], raw[:, 0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows: nothing measured
        return _lowest(scores), _lowest(raw)


def _lowest(m: F64) -> F64:
    return np.asarray(np.nanmin(m, axis=1), dtype=np.float64)


def _matrix(ranks: Sequence[RankScores], kind: ScoreKind, section: str) -> tuple[list[str], F64]:
    """(``score_key`` of each column, ranks x columns) of the scores the policy's kind
    reads; NaN where a rank has none. One pass, no call per value: this runs on every
    rank of every report."""
    rows: list[Any]
    match kind:
        case ScoreKind.GPU_RELATIVE:
            keys, rows = ["gpuRelative"], [r.gpu_relative for r in ranks]
        case ScoreKind.GPU_INDIVIDUAL:
            keys, rows = ["gpuIndividual"], [r.gpu_individual for r in ranks]
        case ScoreKind.SECTION_RELATIVE:
            keys = [score_key("sectionRelative", section)]
            rows = [r.section_relative.get(section) for r in ranks]
        case ScoreKind.SECTION_INDIVIDUAL:
            keys = [score_key("sectionIndividual", section)]
            rows = [r.section_individual.get(section) for r in ranks]
        case ScoreKind.WORST:
            seen: set[str] = set()
            for r in ranks:
                seen.update(r.section_relative)
                seen.update(r.section_individual)
            names = sorted(seen)
            keys = [
                "gpuRelative",
                "gpuIndividual",
                *(score_key("sectionRelative", n) for n in names),
                *(score_key("sectionIndividual", n) for n in names),
            ]
            rows = [
                [
                    r.gpu_relative,
                    r.gpu_individual,
                    *map(r.section_relative.get, names),
                    *map(r.section_individual.get, names),
                ]
                for r in ranks
            ]
        case _:
            assert_never(kind)
    # None (not measured) becomes NaN.
    raw = np.array(rows, dtype=np.float64).reshape(len(ranks), len(keys))
    return keys, raw


def _scores(raw: F64, ref: F64, mad: F64, act: float, k: float | None) -> F64:
    """``raw / ref`` capped at 1; within ``k`` robust spreads of the reference: at least
    ``act``. NaN where either side is missing."""
    with np.errstate(all="ignore"):
        out = np.minimum(raw / np.where(ref > 0, ref, np.nan), 1.0)
        if k is not None:
            quiet = (ref - raw) < k * MAD_TO_SIGMA * mad
            out = np.where(quiet & (out < act), act, out)
    return np.asarray(out, dtype=np.float64)


@dataclass(frozen=True, slots=True)
class _Groups:
    """The listed ranks' peer groups: per group, its key and its members' indices."""

    keys: list[str]
    members: list[I64]

    @classmethod
    def of(cls, ranks: Sequence[RankScores]) -> _Groups:
        if all(r.group is None and not r.coords for r in ranks):  # no topology: one job
            return cls([""], [np.arange(len(ranks), dtype=np.int64)])
        index: dict[str, list[int]] = {}
        for i, r in enumerate(ranks):
            index.setdefault(peer_key(r), []).append(i)
        return cls(list(index), [np.asarray(v, dtype=np.int64) for v in index.values()])

    def minimum(self, values: F64) -> F64:
        """Per rank, the lowest value in its group (NaN: none)."""
        out = np.full(values.shape, np.nan)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN groups
            for idx in self.members:
                out[idx] = np.nanmin(values[idx])
        return out

    def references(
        self,
        raw: F64,
        summaries: dict[str, PeerSummary] | None = None,
        columns: Sequence[str] = (),
    ) -> tuple[F64, F64]:
        """Per rank and column, its peers' median and median absolute deviation (NaN:
        no peer). Groups of equal size are computed together."""
        ref = np.full(raw.shape, np.nan)
        mad = np.full(raw.shape, np.nan)
        by_size: dict[int, list[I64]] = {}
        for key, idx in zip(self.keys, self.members, strict=True):
            summary = (summaries or {}).get(key)
            if summary is not None:
                _from_summary(summary, columns, idx, ref, mad)
            else:
                by_size.setdefault(idx.size, []).append(idx)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices: no peer
            for size, groups in by_size.items():
                if size < 2:
                    continue
                idx = np.stack(groups)  # groups x size
                if size <= LOO_MAX_GROUP:
                    med, dev = _leave_one_out(raw[idx])
                else:
                    med, dev = _whole_group(raw[idx])
                ref[idx] = med
                mad[idx] = dev
        return ref, mad


def _leave_one_out(sub: F64) -> tuple[F64, F64]:
    """``sub``: groups x members x columns; per member, the others' median and MAD."""
    m = sub.shape[1]
    others = np.array([[j for j in range(m) if j != i] for i in range(m)], dtype=np.int64)
    rest = sub[:, others, :]  # groups x members x (members - 1) x columns
    med = np.nanmedian(rest, axis=2)
    dev = np.nanmedian(np.abs(rest - med[:, :, None, :]), axis=2)
    return med, dev


def _whole_group(sub: F64) -> tuple[F64, F64]:
    med = np.nanmedian(sub, axis=1)
    dev = np.nanmedian(np.abs(sub - med[:, None, :]), axis=1)
    enough = np.count_nonzero(np.isfinite(sub), axis=1) >= 2
    med = np.where(enough, med, np.nan)
    shape = sub.shape
    return np.broadcast_to(med[:, None, :], shape), np.broadcast_to(dev[:, None, :], shape)


def _from_summary(
    summary: PeerSummary, columns: Sequence[str], idx: I64, ref: F64, mad: F64
) -> None:
    for j, key in enumerate(columns):
        spread = summary.spreads.get(key)
        if spread is not None and spread.n >= 2:
            ref[idx, j] = spread.median
            mad[idx, j] = spread.mad
