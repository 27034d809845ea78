"""The sequential test a disruptive step must pass: a one-sided CUSUM on each rank's
deviation from its peers, its noise scale learnt from the job's own reports.

Pure: ``advance`` takes the tests as the last report left them and one report's scores,
and returns the tests after it. docs/decision-rule.md derives the threshold from the
policy's ``safety.falseDisruptionsPerGpuDay`` and says where the rate does not hold.

Per report and rank, the deviation is ``e = median(log s) - log s`` over the ranks of
the report (positive: slower than the peers). Subtracting the peers each window removes
what every rank shares (a common drift, a job-wide slowdown); what a rank does relative
to its peers, including a drift of its own, is noise the scale must cover:

- the rank's own scale: the MAD of its in-control history (the windows before its
  current CUSUM run), a drift of its own included, or its window-to-window differences'
  MAD / sqrt 2 when larger; positive autocorrelation (drift, a skew that stays a few
  windows) inflates the variance by the pooled lag-1 factor (1 + rho) / (1 - rho);
- the peers' scale: the median of the ranks' own scales, and this window's spread of
  the deviations above their median (the upper half: a capped score censors the
  lower one).

The largest of these is the rank's scale. Standardized deviations are centred on the
peers' trimmed mean, clipped at ``CLIP`` (heavy tails move the statistic by at most
that), and enter the CUSUM as Bennett's log-likelihood bound, whose exponential is a
supermartingale under no change: the threshold ``log(windows per day / rate)`` then
bounds false alarms per GPU-day by the rate (Ville's inequality, once per CUSUM run).
A second CUSUM of the same deviations clipped at ``WIDE`` lets a slowdown of many
scales count for what it is, and the peers' record (``peer_extreme``) judges how far a
rank has stayed beyond what every other rank's history shows; the three share the rate
(``WIDE_SHARE``, ``EXTREME_SHARE``, union bound).

The scores are the judged ones: with ``score.tail`` a rank slow in two of its last
fifteen windows is judged low for as long as its tail remembers them, so a rank slow
2 minutes in every 6 gathers evidence across its bursts instead of decaying between
them (docs/decision-rule.md, "Intermittent slowdowns").
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Annotated

import numpy as np
from pydantic import ConfigDict, Field
from pydantic.alias_generators import to_camel

from pacekeeper.controller.core import peer_extreme
from pacekeeper.controller.core.ids import Rank
from pacekeeper.controller.core.peer_stats import F64, MAD_TO_SIGMA

SECONDS_PER_DAY = 86400.0
HISTORY = 32
"""Deviations a rank keeps (its in-control history is read from these)."""
MAX_RHO = 0.95
"""Largest lag-1 autocorrelation the variance inflation believes (a factor of 39); above
it the noise is a level, not noise, and the rate is not claimed (docs/decision-rule.md)."""
MIN_WINDOWS = 8
"""Reports a rank needs before its test may pass: the scales need that many."""
MIN_PEERS = 4
"""Ranks with a score a report needs before it moves any test: fewer give no peers'
median worth subtracting (a test that cannot move never passes)."""
CLIP = 6.0
"""Standardized deviations are clipped here: one wild window moves the statistic by at
most this much, whatever the tails."""
WIDE = 24.0
"""The clip of the second, wide statistic: a slowdown of many noise scales (a GPU 28 %
slower where the peers drift 1 %: x ~ 25-35) counts for what it is, where at ``CLIP``
every such window adds the same as one at 6 scales."""
WIDE_SHARE = 0.05
"""The share of the false-alarm rate the wide statistic spends (the clipped one spends
``1 - WIDE_SHARE - EXTREME_SHARE``). Each passes at its own threshold, so by the union
bound they together stay within the rate (docs/decision-rule.md, "Two clips")."""
EXTREME_SHARE = 0.05
"""The share the peers' record spends (``peer_extreme``; docs/decision-rule.md, "The
peers' record")."""
FLOOR = 1e-3
"""Smallest scale, in log-score units (0.1 %): finer than any report resolves, and it
keeps a job of identical scores from dividing by zero."""
MIN_THRESHOLD = math.log(20.0)
"""The threshold never drops below this (a false alarm at most one window in 20): with
windows of hours and a lax rate the formula would let a step pass on no evidence."""
Q75 = 0.6745
"""Upper quartile of the standard normal (the censored-spread estimate's divisor)."""

MAX_TESTS = 1024
"""Ranks a job's tests are kept for beyond those of the latest report. A large job's
bounded Kubernetes report lists a few hundred of its worst ranks, a different few
hundred each time: kept for every rank ever listed, a 16,384-rank job's tests grew ~25
KiB a report and would pass a ConfigMap's 1 MiB within the hour (issue 42). Past the
bound, ranks absent from the report whose statistics are all zero go first, those
with the shortest history first: they carry no evidence, and a rank that comes back
must build ``MIN_WINDOWS`` windows before it can pass at all, from which its own scale
is learnt again. A rank with evidence, and every rank of the report, is always kept."""


@dataclass(frozen=True, slots=True)
class RankTest:
    """One rank's test as the last report left it (kept in ``JobState.tests``)."""

    __pydantic_config__ = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    history: Annotated[tuple[float, ...], Field(max_length=HISTORY)] = ()
    """Its deviations from its peers (log-score units), oldest first; a persisted state
    with more than ``HISTORY`` is refused where it is read (``State.from_dict``)."""
    cusum: float = 0.0
    run: int = 0
    """Reports since both statistics were last zero: the windows the scale leaves out."""
    scale: float = 0.0
    """The noise scale used in the last report (evidence)."""
    wide: float = 0.0
    """The CUSUM of the same deviations clipped at ``WIDE`` instead of ``CLIP``."""
    extreme: float = 0.0
    """This report's evidence from the peers' record (``peer_extreme``), in nats."""

    def passes(self, threshold: float) -> bool:
        """Any statistic at its share of the rate: ``threshold`` (the whole rate's,
        ``threshold()``) plus log(1 / share)."""
        if len(self.history) < MIN_WINDOWS:
            return False
        return (
            self.cusum >= threshold + NARROW_EXTRA
            or self.wide >= threshold + WIDE_EXTRA
            or self.extreme >= threshold + EXTREME_EXTRA
        )


_FRESH = RankTest()
"""A rank's test before its first report (one object: ``RankTest`` is frozen)."""

NARROW_EXTRA = -math.log1p(-WIDE_SHARE - EXTREME_SHARE)
WIDE_EXTRA = -math.log(WIDE_SHARE)
EXTREME_EXTRA = -math.log(EXTREME_SHARE)


def threshold(rate_per_gpu_day: float, window_s: float) -> float:
    """The CUSUM threshold for ``rate_per_gpu_day`` with reports every ``window_s``:
    false alarms per window are at most exp(-h), so h = log(windows per day / rate)."""
    windows_per_day = SECONDS_PER_DAY / window_s
    return max(math.log(windows_per_day / rate_per_gpu_day), MIN_THRESHOLD)


def shift_for(act: float) -> float:
    """The deviation the test is tuned to: a score at ``thresholds.act``."""
    return -math.log(min(max(act, 1e-6), 0.999))


def advance(
    tests: Mapping[Rank, RankTest],
    scores: Mapping[int, float],
    *,
    shift: float,
    learn_only: bool = False,
) -> dict[Rank, RankTest]:
    """The tests after one report whose judged scores are ``scores`` (rank -> score;
    NaN or absent: no evidence, that rank's sums stay as they were, and its peers'
    record, which is one report's evidence, reads nothing). ``learn_only``: a
    warm-up report, which teaches the noise (the histories) and moves no statistic."""
    ranks = [Rank(r) for r, s in scores.items() if math.isfinite(s) and s > 0]
    current = set(ranks)
    if len(ranks) < MIN_PEERS:
        out = {r: replace(t, extreme=0.0) if t.extreme else t for r, t in tests.items()}
        return bounded(out, current)
    # The ranks of this report get their record's evidence anew below.
    out = {
        r: replace(t, extreme=0.0) if t.extreme and r not in current else t
        for r, t in tests.items()
    }
    logs = np.log(np.minimum(np.fromiter((scores[r] for r in ranks), np.float64), 1.0))
    e = float(np.median(logs)) - logs
    old = [tests.get(r, _FRESH) for r in ranks]
    own = _own(old)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # no rank has history yet
        pooled = np.nan_to_num(_nanmedian_rows(own.T), nan=0.0)
    q50, q75, q10, q90 = np.quantile(e, [0.5, 0.75, 0.1, 0.9])
    spread = float(q75 - q50) / Q75
    scale = np.fmax(np.nan_to_num(own[:, 0], nan=0.0), max(float(pooled[0]), spread, FLOOR))
    rho = min(max(float(pooled[1]), 0.0), MAX_RHO)
    centre = float(np.mean(np.clip(e, q10, q90)))
    z = (e - centre) / scale
    inflation = (1.0 + rho) / (1.0 - rho)
    # Until some rank has an in-control history the scales and the autocorrelation are
    # unknown: record, move nothing.
    moving = np.isfinite(own[:, 0]).any() and not learn_only
    step = _steps(z, shift / scale, CLIP, inflation) if moving else np.zeros_like(z)
    wide = _steps(z, shift / scale, WIDE, inflation) if moving else np.zeros_like(z)
    # Python floats from .tolist(), not a numpy index per rank: the same values, without a
    # scalar object made for each.
    histories = [(*t.history, round(d, 6))[-HISTORY:] for t, d in zip(old, e.tolist(), strict=True)]
    beyond = peer_extreme.evidence(_aligned(histories, right=True), scale) if moving else None
    extremes = beyond.tolist() if beyond is not None else [0.0] * len(ranks)
    columns = zip(
        ranks, old, histories, step.tolist(), wide.tolist(), scale.tolist(), extremes, strict=True
    )
    for r, t, h, dc, dw, sc, ex in columns:
        s = max(0.0, t.cusum + dc)
        w = max(0.0, t.wide + dw)
        out[r] = RankTest(
            history=h, cusum=s, run=t.run + 1 if s > 0 or w > 0 else 0, scale=sc, wide=w, extreme=ex
        )
    return bounded(out, current)


def bounded(tests: dict[Rank, RankTest], current: set[Rank]) -> dict[Rank, RankTest]:
    """``tests`` without the evidence-free ranks absent from ``current`` past
    ``MAX_TESTS`` (``MAX_TESTS``' docstring says which go first)."""
    excess = len(tests) - max(MAX_TESTS, len(current))
    if excess <= 0:
        return tests
    idle = [
        r
        for r, t in tests.items()
        if r not in current and t.cusum == 0.0 and t.wide == 0.0 and t.extreme == 0.0
    ]
    idle.sort(key=lambda r: (len(tests[r].history), r))
    gone = set(idle[:excess])
    return {r: t for r, t in tests.items() if r not in gone}


def _aligned(histories: list[tuple[float, ...]], *, right: bool) -> F64:
    """Ranks x ``HISTORY``: each history in its row's first columns (``right``: its
    last), NaN in the rest. The full histories (most, once a job has run ``HISTORY``
    reports) go in one array conversion rather than a slice assignment each (~1 us a
    rank)."""
    out = np.full((len(histories), HISTORY), np.nan)
    full = [i for i, h in enumerate(histories) if len(h) == HISTORY]
    if full:
        flat = itertools.chain.from_iterable(histories[i] for i in full)
        out[full] = np.fromiter(flat, np.float64, len(full) * HISTORY).reshape(-1, HISTORY)
    for i, h in enumerate(histories):
        if 0 < len(h) < HISTORY:
            if right:
                out[i, HISTORY - len(h) :] = h
            else:
                out[i, : len(h)] = h
    return out


def _steps(z: F64, delta: F64, clip: float, inflation: float) -> F64:
    """Each rank's CUSUM step for standardized deviations ``z`` clipped at ``clip``:
    Bennett's bound for a variable at most ``clip`` with mean at most 0 and variance at
    most v (this window's mean square of the clipped deviations, at least 1, times the
    autocorrelation's ``inflation``), at the lambda that is best for a shift of
    ``delta`` scales (capped at ``clip``)."""
    x = np.clip(z, -clip, clip)
    v = max(1.0, float(np.mean(x * x))) * inflation
    lam = np.log1p(np.minimum(delta, clip) * clip / v) / clip
    psi = v * (np.expm1(lam * clip) - lam * clip) / (clip * clip)
    out: F64 = lam * x - psi
    return out


def _own(tests: list[RankTest]) -> F64:
    """Per rank (rows): the scale of its in-control history (its deviations' MAD, drift
    included, or its differences' MAD / sqrt 2 when larger) and the lag-1
    autocorrelation of that history; NaN where it has fewer than ``MIN_WINDOWS``."""
    h = _aligned([t.history for t in tests], right=False)
    # Only the in-control part: the last ``run`` windows are out.
    keep = np.fromiter((len(t.history) - t.run for t in tests), np.intp, len(tests))
    h[np.arange(HISTORY)[None, :] >= keep[:, None]] = np.nan
    enough = np.count_nonzero(np.isfinite(h), axis=1) >= MIN_WINDOWS
    out = np.full((len(tests), 2), np.nan)
    if not enough.any():
        return out
    h = h[enough]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # rows of NaN tails
        scale = np.fmax(_mad(h), _mad(np.diff(h, axis=1)) / math.sqrt(2.0))
        pos = np.where(scale > 0, scale, np.nan)[:, None]
        z = np.clip((h - _nanmedian_rows(h)[:, None]) / pos, -CLIP, CLIP)
        z = z - np.nanmean(z, axis=1, keepdims=True)
        den = np.nansum(z * z, axis=1)
        lag = np.nansum(z[:, 1:] * z[:, :-1], axis=1)
        rho = np.where(den > 0, lag / np.where(den > 0, den, 1.0), np.nan)
    out[enough, 0] = scale
    out[enough, 1] = rho
    return out


def _mad(a: F64) -> F64:
    """Per row, 1.4826 x the median absolute deviation, NaNs left out."""
    med = _nanmedian_rows(a)[:, None]
    dev: F64 = MAD_TO_SIGMA * _nanmedian_rows(np.abs(a - med))
    return dev


def _nanmedian_rows(a: F64) -> F64:
    """``np.nanmedian(a, axis=1)``, the same values, by one sort of the rows: numpy's
    takes a masked-array path for rows with NaN that cost most of ``advance`` (0.19 of
    0.75 s at 37,000 ranks). NaN sorts last, so a row's k values lead it."""
    s = np.sort(a, axis=1)
    k = np.count_nonzero(~np.isnan(a), axis=1)
    out = np.full(a.shape[0], np.nan)
    rows = np.flatnonzero(k)
    kk = k[rows]
    out[rows] = (s[rows, (kk - 1) // 2] + s[rows, kk // 2]) / 2
    return out


def forget(tests: Mapping[Rank, RankTest]) -> dict[Rank, RankTest]:
    """After the job's pods changed (a restart, a drain): every statistic starts anew;
    a history keeps only its in-control part (the slow windows were no noise)."""
    return {
        r: replace(
            t,
            history=t.history[: max(0, len(t.history) - t.run)],
            cusum=0.0,
            wide=0.0,
            run=0,
            extreme=0.0,
        )
        for r, t in tests.items()
    }
