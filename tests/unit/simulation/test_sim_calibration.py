"""Noise statistics from traces: right on traces made with known noise, and the figures
docs/simulator.md and the sampler quote match the real traces (read in place)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pacekeeper.controller.simulation import sampler
from pacekeeper.controller.simulation.calibration import measure
from pacekeeper.controller.traces.windows import Operations, Role

TRACES = Path("/work/shared/data/bytedance-straggler-traces")


def _ops(comp: np.ndarray, per_step: int = 16, op_cv: float = 0.02, seed: int = 0) -> Operations:
    """``comp``: ranks x steps compute; each step split in ``per_step`` forward ops with
    normal jitter ``op_cv``."""
    rng = np.random.default_rng(seed)
    ranks, steps = comp.shape
    r, s = np.meshgrid(np.arange(ranks), np.arange(steps), indexing="ij")
    r, s = np.repeat(r.ravel(), per_step), np.repeat(s.ravel(), per_step)
    dur = np.repeat(comp.ravel() / per_step, per_step) * (1 + op_cv * rng.standard_normal(r.size))
    return Operations(rank=r, step=s, name=np.zeros(r.size, dtype=np.int64),
                      start_s=np.zeros(r.size), duration_s=dur, names=("forward",),
                      roles=(Role.SECTION | Role.KERNEL,))  # fmt: skip


def test_known_noise_is_measured_back() -> None:
    rng = np.random.default_rng(1)
    ranks, steps, phi, cv = 40, 400, 0.6, 0.01
    e = np.zeros((ranks, steps))
    for j in range(1, steps):
        e[:, j] = phi * e[:, j - 1] + np.sqrt(1 - phi**2) * cv * rng.standard_normal(ranks)
    static = 1 + 0.02 * rng.standard_normal((ranks, 1))
    comp = 10.0 * static * (1 + e)
    comp[5] *= 2.0  # a slowed worker: left out
    st = measure(_ops(comp, op_cv=0.004))
    assert st.excluded_ranks == (5,)
    assert st.step_cv == pytest.approx(cv, rel=0.1)
    assert st.step_lag1 == pytest.approx(phi, abs=0.05)
    # Mean |X - Y| of two N(0, s^2) is 2 s / sqrt(pi).
    assert st.rank_spread == pytest.approx(2 * 0.02 / np.sqrt(np.pi), rel=0.25)
    assert (abs(st.op_excess_kurtosis) < 0.3 and st.tail_df is None) or st.tail_df > 20


def test_heavy_tailed_operations_are_seen_as_heavy() -> None:
    rng = np.random.default_rng(2)
    comp = np.full((8, 50), 10.0)
    ops = _ops(comp, op_cv=0.0)
    heavy = ops.duration_s * (1 + 0.02 * rng.standard_t(5, ops.duration_s.size))
    st = measure(Operations(ops.rank, ops.step, ops.name, ops.start_s, heavy, ops.names,
                            ops.roles))  # fmt: skip
    assert st.op_excess_kurtosis > 2.0
    assert st.tail_df is not None and st.tail_df < 10


def test_too_little_data_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="calibration needs"):
        measure(_ops(np.ones((1, 10))))


@pytest.mark.skipif(not TRACES.exists(), reason="the real traces are not on this machine")
def test_the_quoted_figures_match_the_real_traces() -> None:
    pytest.importorskip("pyarrow")
    from pacekeeper.controller.traces.parquet import read_meta, read_parquet

    def stats(name: str):
        meta = read_meta(TRACES / f"meta-{name}.yaml")
        ops, coords = read_parquet(TRACES / f"trace-{name}.parquet", meta)
        return measure(ops, {r: c["pp"] for r, c in coords.items()})

    ar, se = stats("AR"), stats("SE")
    fit = sampler.TRACE_FIT
    assert ar.excluded_ranks == (0,)  # the artifact's slowed worker
    assert ar.step_cv == pytest.approx(fit["step_cv"], rel=0.05)
    assert ar.step_lag1 == pytest.approx(fit["step_lag1"], abs=0.02)
    assert ar.tail_df == pytest.approx(fit["tail_df"], rel=0.05)
    assert se.tail_df == pytest.approx(fit["se_tail_df"], rel=0.05)
    assert se.step_cv > 10 * ar.step_cv  # sequence imbalance: a workload, not a GPU
