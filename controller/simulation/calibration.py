"""Noise statistics measured on recorded traces, to calibrate the simulator's noise.

Pure numpy over ``Operations`` (controller/traces): per recorded rank and step, the
step's compute time (the sum of its ``SECTION`` operations: every microbatch's
forward and backward) and, per operation, its duration against the median of its
name on that rank in that step. From these:

* ``step_cv``: step-to-step variation of one rank's compute, robust (1.4826 MAD of
  ``x / median(x) - 1`` over the rank's steps, pooled over ranks);
* ``rank_spread``: rank-to-rank variation, the mean absolute pairwise difference of
  ranks' median compute relative to their peer group's median (the ranks of one
  pipeline stage do the same work; the model's ``static_pairwise_spread``);
* ``op_excess_kurtosis`` and ``op_p999_z``: the tails of single operations' durations
  (relative to their rank/step/name median, scaled by their own robust sigma): a
  normal has 0 and 3.09; ``tail_df`` is the Student-t degrees of freedom with the same
  kurtosis (``4 + 6 / k``; None where the tails are no heavier than a normal's);
* ``step_lag1``: lag-1 autocorrelation of one rank's step residuals over consecutive
  recorded steps (the traces record bursts of a few adjacent steps);
* ``step_rank_common``: the share of the step-to-step variance all ranks share (the
  whole job slowing in a step), the rest is each rank's own.

A rank whose median compute is ``outlier_ratio`` x its peer group's (a slowed worker,
the AR trace's rank 0) is left out: it is a fault, not noise.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import numpy.typing as npt

from pacekeeper.controller.traces.windows import Operations, Role

F64 = npt.NDArray[np.float64]
MAD_TO_SIGMA = 1.4826


@dataclass(frozen=True, slots=True)
class NoiseStats:
    ranks: int
    steps: int
    excluded_ranks: tuple[int, ...]
    step_cv: float
    rank_spread: float
    op_excess_kurtosis: float
    op_p999_z: float
    tail_df: float | None
    step_lag1: float
    step_rank_common: float

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _robust_sigma(x: F64) -> float:
    return float(MAD_TO_SIGMA * np.median(np.abs(x - np.median(x))))


def step_compute(ops: Operations) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], F64]:
    """Recorded ranks, steps, and the ranks x steps compute time (NaN: not recorded)."""
    section = np.array([bool(r & Role.SECTION) for r in ops.roles])[ops.name]
    ranks, r_idx = np.unique(ops.rank[section], return_inverse=True)
    steps, s_idx = np.unique(ops.step[section], return_inverse=True)
    out = np.zeros((ranks.size, steps.size))
    np.add.at(out, (r_idx, s_idx), ops.duration_s[section])
    seen = np.zeros_like(out, dtype=bool)
    seen[r_idx, s_idx] = True
    out[~seen] = np.nan
    return ranks, steps, out


def measure(
    ops: Operations,
    groups: dict[int, int] | None = None,
    *,
    outlier_ratio: float = 1.3,
) -> NoiseStats:
    """The noise statistics of ``ops``; ``groups``: each rank's peer group (the ranks
    doing the same work, e.g. its pipeline stage); None: one group."""
    ranks, steps, comp = step_compute(ops)
    if ranks.size < 2 or steps.size < 3:
        raise ValueError(
            "calibration needs >= 2 ranks and >= 3 steps of compute, "
            f"got {ranks.size} x {steps.size}"
        )
    group = np.array([(groups or {}).get(int(r), 0) for r in ranks])
    rank_med = np.nanmedian(comp, axis=1)
    rel = np.empty(ranks.size)
    for g in np.unique(group):
        m = group == g
        rel[m] = rank_med[m] / np.median(rank_med[m])
    keep = rel < outlier_ratio
    excluded = tuple(int(r) for r in ranks[~keep])
    comp, rel, group = comp[keep], rel[keep], group[keep]
    resid = comp / np.nanmedian(comp, axis=1, keepdims=True) - 1.0
    finite = resid[np.isfinite(resid)]
    step_cv = _robust_sigma(finite)
    diffs = [
        np.abs(a - b)
        for g in np.unique(group)
        for i, a in enumerate(rel[group == g])
        for b in rel[group == g][i + 1 :]
    ]
    spread = float(np.mean(diffs)) if diffs else 0.0
    # Lag 1 over consecutive recorded steps, pooled over ranks.
    a, b = resid[:, :-1].ravel(), resid[:, 1:].ravel()
    ok = np.isfinite(a) & np.isfinite(b)
    lag1 = float(np.corrcoef(a[ok], b[ok])[0, 1]) if ok.sum() > 2 else 0.0
    common = np.nanmean(resid, axis=0)
    total_var = float(np.nanvar(resid))
    common_share = float(np.var(common) / total_var) if total_var > 0 else 0.0
    z = _op_residuals(ops, set(excluded))
    kurt = float(np.mean(z**4) / np.mean(z**2) ** 2 - 3.0) if z.size > 10 else 0.0
    p999 = float(np.quantile(np.abs(z), 0.998)) if z.size > 10 else 0.0
    return NoiseStats(
        ranks=int(keep.sum()),
        steps=int(steps.size),
        excluded_ranks=excluded,
        step_cv=step_cv,
        rank_spread=spread,
        op_excess_kurtosis=kurt,
        op_p999_z=p999,
        tail_df=4.0 + 6.0 / kurt if kurt > 0 else None,
        step_lag1=lag1,
        step_rank_common=min(1.0, common_share),
    )


def _op_residuals(ops: Operations, excluded: set[int]) -> F64:
    """Each compute operation's duration against the median of its rank/step/name,
    scaled by the pooled robust sigma (a normal gives z ~ N(0, 1))."""
    section = np.array([bool(r & Role.SECTION) for r in ops.roles])[ops.name]
    keep = section & ~np.isin(ops.rank, list(excluded))
    rank, step, name, dur = ops.rank[keep], ops.step[keep], ops.name[keep], ops.duration_s[keep]
    key = np.stack([rank, step, name], axis=1)
    _, inv = np.unique(key, axis=0, return_inverse=True)
    inv = inv.ravel()
    order = np.argsort(inv, kind="stable")
    bounds = np.flatnonzero(np.diff(inv[order])) + 1
    rel = np.empty(dur.size)
    for chunk in np.split(order, bounds):
        rel[chunk] = dur[chunk] / np.median(dur[chunk]) - 1.0
    sigma = _robust_sigma(rel)
    return rel / sigma if sigma > 0 else np.zeros(0)
