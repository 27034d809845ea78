"""Job-wide pauses hit every rank at once; noise scales drift and jitter, nothing else."""

from __future__ import annotations

import numpy as np
import pytest

from pacekeeper.controller.simulation.detection import RealScoring
from pacekeeper.controller.simulation.models import SECTIONS, JobSimulator, ModelParams
from pacekeeper.controller.simulation.noise import NoiseScale
from pacekeeper.controller.simulation.pauses import DEFAULT_PAUSES, JobPause, pause_times
from pacekeeper.controller.simulation.runner import simulate
from pacekeeper.controller.simulation.scenarios import get_scenario, with_options

P = ModelParams(kernels=12, stall_prob=0.0, gc_prob=0.0)
LOADER, FB, OPT = (SECTIONS.index(s) for s in ("dataloader", "forward_backward", "optimizer"))


def test_a_pause_hits_every_rank_in_the_same_step_once_per_period() -> None:
    pause = JobPause("ckpt", every_s=120.0, pause_s=10.0, jitter_cv=0.1)
    t = np.arange(180, dtype=np.float64) * P.step_s  # six minutes of 2 s steps
    got = pause_times((pause,), 32, t, P.step_s, np.random.default_rng(0))
    hit_steps = np.flatnonzero((got.untimed_s > 0).any(axis=0))
    assert hit_steps.tolist() == [60, 120]  # at 120 s and 240 s
    assert (got.untimed_s[:, hit_steps] > 0).all()  # every rank, in that step
    assert got.untimed_s[:, hit_steps].mean() == pytest.approx(10.0, rel=0.05)
    assert all((v == 0).all() for v in got.section_s.values())


def test_pauses_leave_the_gpu_alone_and_every_other_draw_unchanged() -> None:
    gc = JobPause("gc", every_s=20.0, pause_s=0.5, section="forward_backward", jitter_cv=0.2)
    evals = JobPause("eval", every_s=30.0, pause_s=5.0, jitter_cv=0.05)
    paused = JobSimulator(16, params=P, pauses=(gc, evals), seed=3).next_window()
    plain = JobSimulator(16, params=P, seed=3).next_window()
    assert np.array_equal(
        paused.kernel_median_ns[:, : P.kernels], plain.kernel_median_ns[:, : P.kernels]
    )
    assert np.array_equal(paused.section_median_s[:, LOADER], plain.section_median_s[:, LOADER])
    # The first minute holds two GC pauses (20 s, 40 s) in forward_backward, which move
    # its median by little, and one evaluation (30 s) between steps, in no section; the
    # window lasts as long as the slowest pauser of each paused step.
    assert paused.wall_s is not None and plain.wall_s is not None
    longer = paused.wall_s - plain.wall_s
    assert 2 * 0.5 + 5.0 <= longer <= 2 * 0.5 * 1.8 + 5.0 * 1.2
    fb_shift = paused.section_median_s[:, FB] - plain.section_median_s[:, FB]
    assert np.all(np.abs(fb_shift) < 0.05)
    # The slowest pauser is waited for: every other rank's all-reduce wait grows.
    assert paused.section_wait_s is not None and plain.section_wait_s is not None
    grown = paused.section_wait_s[:, OPT] - plain.section_wait_s[:, OPT]
    assert (grown > 0).sum() >= 15


def test_the_pause_scenario_breaks_nothing_and_every_hardware_action_is_wrong() -> None:
    sim, gt = get_scenario("job-pauses").build(64, 1800.0, seed=0)
    assert gt.faults == () and gt.pauses == DEFAULT_PAUSES
    assert gt.workload_only and not gt.action_correct
    assert sim.pauses == DEFAULT_PAUSES
    out = simulate("job-pauses", 64, 1800.0, seed=0)
    assert out.truth.imbalance  # node actions here are counted as on workload
    q = out.quality["pacekeeper"]
    assert q.false_actions == 0 and q.hardware_actions_on_imbalance == 0


def test_noise_scale_doubles_drift_and_jitter_with_the_same_draws() -> None:
    base = JobSimulator(400, params=P, seed=7)
    noisy_params = NoiseScale(drift=2.0, jitter=2.0).apply(P)
    noisy = JobSimulator(400, params=noisy_params, seed=7)
    assert np.array_equal(noisy._static.speed, base._static.speed)
    assert noisy._static.drift_amp == pytest.approx(2 * base._static.drift_amp)
    assert np.array_equal(noisy._static.drift_period_s, base._static.drift_period_s)
    assert noisy_params.kernel_jitter_cv == 2 * P.kernel_jitter_cv
    assert noisy_params.step_jitter_cv == 2 * P.step_jitter_cv
    assert noisy_params.section_jitter_cv == 2 * P.section_jitter_cv
    # Individual GPU scores of healthy ranks spread about twice as wide.
    spread = []
    for params in (P, noisy_params):
        sim = JobSimulator(400, params=params, seed=7)
        scoring = RealScoring(sim.layout)
        reps = [scoring.report(w) for w in sim.windows(6)]
        scores = np.array([r.gpu_individual for rep in reps[3:] for r in rep.ranks], dtype=float)
        spread.append(float(np.std(scores)))
    assert 1.6 < spread[1] / spread[0] < 2.4


def test_a_fast_drift_scenario_changes_only_the_drift_period() -> None:
    sc = get_scenario("slow-gpu-10-fast-drift")
    sim, _ = sc.build(200, 1800.0, seed=1)
    assert sim._static.drift_period_s.min() >= 1800.0
    assert sim._static.drift_period_s.max() <= 3600.0
    assert sim.p.drift_min == ModelParams().drift_min


def test_options_on_top_of_a_scenario_name_the_flag_when_bad() -> None:
    sc = with_options(get_scenario("slow-gpu-10"), ramp_s=600.0, drift_scale=3.0, pauses=True)
    assert sc.ramp_s == 600.0 and sc.noise.drift == 3.0 and sc.pauses == DEFAULT_PAUSES
    assert "ramping in over 600 s" in sc.description and "drift x3" in sc.description
    assert with_options(sc) is sc
    with pytest.raises(ValueError, match="--ramp: scenario 'healthy'"):
        with_options(get_scenario("healthy"), ramp_s=60.0)
    with pytest.raises(ValueError, match="--jitter-scale -1"):
        with_options(get_scenario("healthy"), jitter_scale=-1.0)
    with pytest.raises(ValueError, match="--restart-at -3"):
        with_options(get_scenario("healthy"), restart_at_s=(-3.0,))
