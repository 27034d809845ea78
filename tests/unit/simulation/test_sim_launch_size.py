"""Data skew that grows the launch (issue #38): a data-dependent kernel doing more work
is launched bigger, and the detector's real scoring reads it per unit of work, so a
skewed rank whose extra work grows its launches is not read as a slow GPU."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from pacekeeper.controller.simulation import sampler
from pacekeeper.controller.simulation.detection import RealScoring
from pacekeeper.controller.simulation.models import JobSimulator, ModelParams
from pacekeeper.controller.simulation.noise_families import BASE_THREADS, NoiseFamily
from pacekeeper.detector import scoring

P = ModelParams(kernels=48)
RANKS = 32


def _family(launch_share: float, dwell: float = 1e6) -> NoiseFamily:
    return NoiseFamily("data-skew", skew_share=0.1, skew_size=0.12, skew_dwell_windows=dwell,
                       skew_kernel_share=0.6, skew_launch_share=launch_share)  # fmt: skip


def test_grown_launches_carry_the_skew_and_the_others_keep_theirs() -> None:
    sim = JobSimulator(RANKS, params=P, noise=_family(0.5), seed=3)
    w = sim.next_window()
    assert w.kernel_threads is not None and w.kernel_threads.shape == w.kernel_median_ns.shape
    dd, grown = sim._skew_kernels, sim._grown
    assert dd is not None and grown is not None and sim._noise is not None
    assert not (grown & ~dd).any() and grown.sum() == round(0.5 * dd.sum())
    skewed = sim._noise.skewed
    k = P.kernels
    thr = w.kernel_threads[:, :k]
    assert np.isnan(w.kernel_threads[:, k:]).all()  # communication kernels: none
    assert (thr[~skewed] == BASE_THREADS).all() and (thr[:, ~grown] == BASE_THREADS).all()
    # A grown launch follows the kernel's time: both grew by the rank's skew factor.
    ratio = thr[np.ix_(skewed, grown)] / BASE_THREADS
    assert (ratio > 1.1).all()
    plain = JobSimulator(RANKS, params=P, noise=_family(0.5), seed=3).next_window()
    np.testing.assert_array_equal(plain.kernel_median_ns, w.kernel_median_ns)


def test_no_launch_share_reports_no_threads_and_draws_as_before() -> None:
    w = JobSimulator(RANKS, params=P, noise=_family(0.0), seed=3).next_window()
    assert w.kernel_threads is None


def _last_report(launch_share: float, windows: int = 6) -> tuple[np.ndarray, np.ndarray]:
    sim = JobSimulator(RANKS, params=P, noise=_family(launch_share), seed=3)
    real = RealScoring(sim.layout)
    reports = [real.report(w) for w in sim.windows(windows)]
    assert sim._noise is not None
    rel = np.array([r.gpu_relative_median for r in reports[-1].ranks], np.float64)
    return rel, sim._noise.skewed


def test_skew_that_grows_every_launch_keeps_the_skewed_ranks_gpu_relative_median() -> None:
    off, skewed = _last_report(0.0)
    on, skewed_on = _last_report(1.0)
    assert (skewed == skewed_on).all() and skewed.any()
    # Without launch sizes the skewed ranks read ~7% slower; read per unit of work they
    # score as their GPUs do, the same as with no skew at all.
    assert (off[skewed] < on[skewed] - 0.05).all()
    np.testing.assert_array_equal(off[~skewed], on[~skewed])  # peers: bit for bit
    same = JobSimulator(RANKS, params=P, noise=_family(0.0), seed=3)
    assert same._noise is not None
    speed = 1.0 / same._static.speed
    expect = speed / speed.max()
    assert on[skewed] == pytest.approx(expect[skewed], abs=0.03)


def test_feature_off_the_skewed_rank_reads_slow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scoring, "per_work_entry_scores", lambda c, s, t, n, k: s)
    off, skewed = _last_report(0.0)
    on, _ = _last_report(1.0)
    np.testing.assert_array_equal(off, on)
    assert (on[skewed] < np.median(on[~skewed]) - 0.03).all()


def test_the_individual_score_reads_a_grown_launch_per_unit_of_work() -> None:
    # Skew that comes and goes (dwell 3 windows): against its own baseline a skewed
    # window is slow unless its grown launches are read per unit of work.
    def lows(launch_share: float) -> float:
        sim = JobSimulator(RANKS, params=P, noise=_family(launch_share, dwell=3.0), seed=5)
        real = RealScoring(sim.layout)
        worst = []
        for w in sim.windows(16):
            ind = [r.gpu_individual_median for r in real.report(w).ranks]
            worst.append(min(v for v in ind if v is not None))
        return float(np.min(worst[4:]))

    assert lows(0.0) < 0.96
    assert lows(1.0) > 0.98


def test_the_sampler_draws_the_launch_share_last_and_every_other_draw_as_before() -> None:
    rows = []
    for i in range(240):
        s = sampler.sample("issue38", i)
        d = {k: v for k, v in s.draws.items() if k != "skew_launch_share"}
        rows.append([i, s.seed, s.family, s.fault, sorted(d.items())])
        if s.family == "data-skew":
            assert list(s.draws)[-1] == "skew_launch_share"
            assert s.scenario.family is not None
            assert s.scenario.family.skew_launch_share == s.draws["skew_launch_share"]
        else:
            assert "skew_launch_share" not in s.draws
    # The digest of the same draws before skew_launch_share existed (3b6703a).
    digest = hashlib.sha256(json.dumps(rows).encode()).hexdigest()
    assert digest == "ae172d61a1e54e1232f1674f8f983aaf6eec8a1664fa87afcba7c5d5c44f59a0"
    assert sampler.RANGES["skew_launch_share"] == (0.0, 1.0)
