"""Each noise family makes the statistics it claims: heavy tails heavy, drift on the drawn
period, skew on the same ranks for ~its dwell, stalls in bursts; clock-driven bursts."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from pacekeeper.controller.simulation.faults import Fault, FaultKind, Throttle, step_effects
from pacekeeper.controller.simulation.models import JobSimulator, ModelParams
from pacekeeper.controller.simulation.noise_families import NoiseFamily, NoiseProcess
from pacekeeper.controller.simulation.scenarios import with_family_drift

P = ModelParams(kernels=12)


def _kurtosis(x: np.ndarray) -> float:
    x = x - x.mean()
    return float(np.mean(x**4) / np.mean(x**2) ** 2 - 3.0)


def test_student_t_jitter_is_heavy_tailed_and_normal_jitter_is_not() -> None:
    heavy = NoiseProcess(NoiseFamily("t", jitter_cv=0.01, tail_df=5.0), 2000, 2.0, 1).draw(30)
    light = NoiseProcess(NoiseFamily("n", jitter_cv=0.01), 2000, 2.0, 1).draw(30)
    # A t with 5 df has excess kurtosis 6; a normal 0.
    assert _kurtosis(heavy.speed.ravel()) > 3.0
    assert abs(_kurtosis(light.speed.ravel())) < 0.3
    # Both have the stated coefficient of variation.
    assert heavy.speed.std() == pytest.approx(0.01, rel=0.1)
    assert light.speed.std() == pytest.approx(0.01, rel=0.05)


def test_ar_jitter_has_its_lag1_autocorrelation_across_windows() -> None:
    proc = NoiseProcess(NoiseFamily("ar", jitter_cv=0.01, jitter_ar=0.7), 500, 2.0, 3)
    e = np.concatenate([proc.draw(30).speed - 1.0 for _ in range(4)], axis=1)
    lag1 = np.corrcoef(e[:, :-1].ravel(), e[:, 1:].ravel())[0, 1]
    assert lag1 == pytest.approx(0.7, abs=0.03)
    # Carried over the window boundary too (step 29 -> 30).
    across = np.corrcoef(e[:, 29], e[:, 30])[0, 1]
    assert across > 0.6


def test_drift_family_sets_amplitude_and_period_as_drawn() -> None:
    fam = NoiseFamily("d", drift_amp=(0.02, 0.02), drift_period_s=(600.0, 600.0))
    p = with_family_drift(ModelParams(kernels=12, step_jitter_cv=0.0, section_jitter_cv=0.0), fam)
    sim = JobSimulator(8, params=p, seed=2)
    speed = np.array([w.gpu_speed for w in sim.windows(40)])  # one per minute, 40 min
    rel = speed / speed.mean(axis=0) - 1.0
    assert rel.max(axis=0).min() == pytest.approx(0.02, abs=0.002)  # +-2%
    # Power at a 10-minute period: the FFT's peak sits at 40 min / 10 min = 4 cycles.
    spectrum = np.abs(np.fft.rfft(rel, axis=0)).sum(axis=1)
    assert int(np.argmax(spectrum[1:])) + 1 == 4


def test_data_skew_stays_on_the_same_ranks_for_about_its_dwell() -> None:
    proc = NoiseProcess(
        NoiseFamily("s", skew_share=0.01, skew_size=0.1, skew_dwell_windows=10.0), 1000, 2.0, 4
    )
    sets = [frozenset(np.flatnonzero(proc.draw(30).work[:, 0] > 1.0)) for _ in range(400)]
    assert all(len(s) == 10 for s in sets)
    changes = sum(a != b for a, b in itertools.pairwise(sets))
    mean_dwell = len(sets) / max(1, changes)
    assert 7.0 < mean_dwell < 14.0
    # Skew is work, not a slower GPU: gpu_speed leaves it out.
    fam = NoiseFamily("s", skew_share=0.5, skew_size=0.5)
    a = JobSimulator(16, params=P, seed=5).next_window()
    b = JobSimulator(16, params=P, seed=5, noise=fam).next_window()
    assert np.array_equal(a.gpu_speed, b.gpu_speed)
    assert (b.kernel_median_ns[:, :12] > a.kernel_median_ns[:, :12] * 1.3).any()


def test_stalls_come_in_bursts_on_the_host_side() -> None:
    fam = NoiseFamily("b", stall_bursts_per_h=6.0, stall_burst_s=120.0, stall_prob=0.5,
                      stall_s=1.0)  # fmt: skip
    proc = NoiseProcess(fam, 400, 2.0, 6)
    loader = np.concatenate([proc.draw(30).loader_s for _ in range(60)], axis=1)
    hit = loader > 0
    # ~6 bursts of 60 steps per hour, half their steps stalled: ~10% of steps.
    assert 0.05 < hit.mean() < 0.15
    # Bursty: a stalled step's neighbour stalls far more often than a random step.
    assert (hit[:, 1:] & hit[:, :-1]).sum() / hit[:, :-1].sum() > 3 * hit.mean()


def test_a_family_leaves_the_models_own_draws_alone() -> None:
    a = JobSimulator(16, params=P, seed=7).next_window()
    b = JobSimulator(16, params=P, seed=7, noise=NoiseFamily("none")).next_window()
    assert np.array_equal(a.kernel_median_ns, b.kernel_median_ns)


def test_clocked_bursts_are_slow_two_minutes_in_every_six() -> None:
    f = Fault(FaultKind.THROTTLING, (3,), 600.0, 0.3, throttle_on_s=120.0,
              throttle_period_s=360.0)  # fmt: skip
    t = np.arange(0.0, 2400.0, 2.0)
    eff = step_effects((f,), 8, t, step_s=2.0, throttle=Throttle(8, 2.0),
                       rng=np.random.default_rng(0))  # fmt: skip
    on = eff.compute[3] > 1.0
    assert not on[t < 600].any()
    assert on[t >= 600].mean() == pytest.approx(1 / 3, abs=0.01)
    assert on[(t >= 600) & (t < 720)].all() and not on[(t >= 720) & (t < 960)].any()
    with pytest.raises(ValueError, match="throttle_on_s"):
        Fault(FaultKind.THROTTLING, (3,), 0.0, 0.3, throttle_on_s=400.0, throttle_period_s=360.0)


def test_bad_family_parameters_are_named() -> None:
    with pytest.raises(ValueError, match="tail_df"):
        NoiseFamily("x", tail_df=2.0)
    with pytest.raises(ValueError, match="drift_period_s"):
        NoiseFamily("x", drift_period_s=(600.0, 300.0))
