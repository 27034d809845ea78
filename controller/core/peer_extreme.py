"""The third statistic of the sequential test: how far beyond its peers' pooled record a
rank has stayed for the last ``SPAN`` reports, read against a tail fitted to that record.

The CUSUMs of ``sequential.py`` assume nothing of the noise's shape but its variance and a
clip, so under drift (every rank a slow wave; pooled lag-1 autocorrelation 0.75-0.92) a
GPU ten scales slower than its peers gathers about one unit of evidence a report and waits
10-16 reports. What tells it from a drifting healthy rank is how far it sits, not how
long: the peers' record shows how far a healthy rank's deviation goes. This statistic
learns that from the job:

- per rank, the lowest of its last ``SPAN`` standardized deviations (the rank has been at
  least this far above its peers in every one of them: a stall or a burst of one window
  does not count, a persistent shift does);
- the same figure for every rank at every point of its kept history (about 30 a rank,
  30,000 at 1,024 ranks): the record;
- the record's tail beyond its ``QUANTILE`` quantile, fitted as a generalized Pareto law
  whose shape is never lighter than exponential (a shape estimated below 0, a bounded
  noise, is read as 0), with the scale at its upper 95 % bound; a rank's own values are
  left out of the fit that judges it;
- the evidence: -log of the fitted chance of a value as high as the rank's.

Under no fault a rank's figure is one more draw of what its peers have shown; where the
noise has no heavier tail than the fit (docs/decision-rule.md, "The peers' record"), the
chance that a healthy rank's evidence reaches ``h`` in a report is at most e^-h, and by the
union bound over reports a GPU-day holds the rate's share. Jobs too small to fill the
record (``MIN_RECORD`` values, ``MIN_TAIL`` of them in the tail) get no evidence from it.
"""

from __future__ import annotations

import numpy as np

from pacekeeper.controller.core.peer_stats import F64

SPAN = 3
"""Reports a rank must have stayed beyond its peers in: one wild window counts for nothing."""
QUANTILE = 0.99
"""Where the fitted tail begins."""
MIN_RECORD = 5000
"""Values the record needs before it judges anyone (1,024 ranks: five reports of span)."""
MIN_TAIL = 40
"""Values beyond the quantile the fit needs (its scale's bound is within ~25 % then)."""
MAX_RECORD = 262_144
"""The record is thinned to about this many values (every k-th, all ranks alike): the
131,072 ranks of the largest jobs need no 4 million values for a 1 % tail."""
Z95 = 1.645


def evidence(history: F64, scale: F64) -> F64:
    """Per rank (rows of ``history``: its deviations from its peers in log-score units,
    oldest first, NaN where it has none; ``scale``: its noise scale now), the evidence in
    nats that its lowest deviation over the last ``SPAN`` reports lies beyond what its
    peers' record shows. 0 where it has fewer than ``SPAN`` reports, stays within the
    record's quantile, or the record is too small."""
    n = history.shape[0]
    out = np.zeros(n)
    if history.shape[1] < SPAN or n == 0:
        return out
    z = history / np.where(scale > 0, scale, np.nan)[:, None]
    width = history.shape[1] - SPAN + 1
    lows = z[:, :width].copy()
    for k in range(1, SPAN):
        np.minimum(lows, z[:, k : k + width], out=lows)  # a NaN in the span stays NaN
    now = lows[:, -1]
    finite = np.isfinite(lows)
    if np.count_nonzero(finite) < MIN_RECORD:
        return out
    record = lows[finite]
    owner = np.broadcast_to(np.arange(n)[:, None], lows.shape)[finite]
    stride = -(-record.size // MAX_RECORD)
    if stride > 1:
        record, owner = record[::stride], owner[::stride]
    edge = float(np.quantile(record, QUANTILE))
    over = record > edge
    excess, whose = record[over] - edge, owner[over]
    judged = np.flatnonzero(np.isfinite(now) & (now > edge))
    if judged.size == 0:
        return out
    # Each judged rank's fit leaves its own values out: the tail's sums less its part.
    mine = np.bincount(whose, minlength=n)[judged]
    count: F64 = (excess.size - mine).astype(np.float64)
    s1 = float(excess.sum()) - np.bincount(whose, excess, minlength=n)[judged]
    s2 = float((excess * excess).sum()) - np.bincount(whose, excess * excess, minlength=n)[judged]
    sources: F64 = (np.unique(whose).size - (mine > 0)).astype(np.float64)
    in_record = record.size - np.bincount(owner, minlength=n)[judged]
    ok = count >= MIN_TAIL
    count, s1, s2 = np.maximum(count, 1), np.maximum(s1, 0.0), np.maximum(s2, 0.0)
    beyond = _beyond(s1 / count, s2 / count - (s1 / count) ** 2, count, sources, now[judged] - edge)
    share = (count + 1) / (in_record + 1)
    out[judged] = np.where(ok, -np.log(share) + beyond, 0.0)
    return out


def _beyond(mean: F64, var: F64, count: F64, sources: F64, at: F64) -> F64:
    """-log of the chance that an excess over the edge reaches ``at``, for excesses of
    ``mean`` and ``var`` (``count`` of them, from ``sources`` ranks): a generalized Pareto
    law fitted by its moments, its shape raised to an upper 95 % bound and never below 0
    (exponential), its scale raised to an upper 95 % bound. A rank's consecutive spans are
    alike, so the shape's bound counts ranks, not values: a tail that a few ranks make is
    read as the few draws it is."""
    with np.errstate(divide="ignore", invalid="ignore"):
        shape = np.where(var > 0, 0.5 * (1.0 - mean * mean / var), 0.0)
    shape = np.maximum(np.nan_to_num(shape, nan=0.0), 0.0)
    shape = shape + Z95 * (1.0 + shape) / np.sqrt(np.maximum(sources, 1))
    scale = mean * (1.0 - np.minimum(shape, 0.5)) * (1.0 + Z95 / np.sqrt(count))
    with np.errstate(divide="ignore", invalid="ignore"):
        got = np.log1p(shape * at / scale) / shape
    return np.where(mean > 0, np.nan_to_num(got, nan=0.0, posinf=0.0), 0.0)
