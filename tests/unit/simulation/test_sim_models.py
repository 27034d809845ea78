"""The simulator's generative models, pinned to their documented distributions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pacekeeper.controller.simulation.models import (
    COMM_KERNEL_NAMES,
    LAST_STAGE_KERNEL_NAMES,
    SECTIONS,
    Fault,
    FaultKind,
    Imbalance,
    ImbalanceKind,
    JobSimulator,
    ModelParams,
    sigma_for_pairwise_spread,
    truncated_normal,
)

SMALL = ModelParams(kernels=12)
FB = SECTIONS.index("forward_backward")
OPT = SECTIONS.index("optimizer")


def test_static_spread_makes_two_gpus_differ_by_eight_percent_on_average() -> None:
    p = ModelParams(kernels=4, static_clip_sigmas=50.0)
    sim = JobSimulator(4000, params=p, seed=3)
    log_speed = np.log(sim._static.speed)
    a, b = log_speed[:2000], log_speed[2000:]
    assert abs(np.abs(a - b).mean() - 0.08) < 0.005
    assert sigma_for_pairwise_spread(0.08) == pytest.approx(0.08 * math.sqrt(math.pi) / 2)


def test_static_spread_is_clipped_at_two_sigmas_by_default() -> None:
    sim = JobSimulator(5000, params=SMALL, seed=1)
    sigma = sigma_for_pairwise_spread(SMALL.static_pairwise_spread)
    assert np.abs(np.log(sim._static.speed)).max() <= 2.0 * sigma + 1e-12
    z = truncated_normal(np.random.default_rng(0), 10000, 1.5)
    assert np.abs(z).max() <= 1.5
    assert 0.7 < z.std() < 0.8  # a standard normal cut at 1.5 sigma has sd ~0.74


def test_drift_amplitude_and_kernel_budget_follow_the_parameters() -> None:
    sim = JobSimulator(500, params=SMALL, seed=2)
    st = sim._static
    assert st.drift_amp.min() >= SMALL.drift_min and st.drift_amp.max() <= SMALL.drift_max
    assert st.drift_period_s.min() >= SMALL.drift_period_min_s
    step_ns = float((st.kernel_base_ns * st.kernel_per_step).sum())
    assert step_ns == pytest.approx(SMALL.compute_s * 1e9)


def test_same_seed_gives_identical_windows_and_another_seed_does_not() -> None:
    a = JobSimulator(16, params=SMALL, seed=5).next_window()
    b = JobSimulator(16, params=SMALL, seed=5).next_window()
    c = JobSimulator(16, params=SMALL, seed=6).next_window()
    assert np.array_equal(a.kernel_median_ns, b.kernel_median_ns)
    assert not np.array_equal(a.kernel_median_ns, c.kernel_median_ns)


def test_slow_gpu_slows_only_its_rank_and_only_from_its_start() -> None:
    fault = Fault(FaultKind.SLOW_GPU, (3,), start_s=120.0, slowdown=0.2)
    sim = JobSimulator(16, params=SMALL, faults=(fault,), seed=1)
    w = sim.windows(4)
    fb = np.array([x.section_median_s[:, FB] for x in w])  # windows x ranks
    ratio = fb[3] / fb[0]
    assert ratio[3] == pytest.approx(1.2, abs=0.02)
    others = np.delete(ratio, 3)
    assert np.all(np.abs(others - 1.0) < 0.02)
    # Everyone else now waits for rank 3 in the all-reduce; rank 3 waits least.
    assert int(np.argmin(w[3].section_median_s[:, OPT])) == 3


def test_slow_link_shows_as_communication_wait_not_compute() -> None:
    fault = Fault(FaultKind.SLOW_LINK, tuple(range(8)), start_s=60.0, slowdown=0.5)
    sim = JobSimulator(16, params=SMALL, faults=(fault,), seed=1)
    before, _, after = sim.windows(3)
    n = SMALL.kernels
    ratio = after.kernel_median_ns[:, :n] / before.kernel_median_ns[:, :n]
    assert np.all(np.abs(ratio - 1.0) < 0.03)
    # The transfer takes 50% longer for everyone; the optimizer's update does not.
    transfer = SMALL.allreduce_share * SMALL.optimizer_s
    grown = after.section_median_s[:, OPT] - before.section_median_s[:, OPT]
    assert np.all(np.abs(grown - 0.5 * transfer) < 0.02)
    # ...and all of it is time in the collective, which the detector counts as wait.
    assert before.section_wait_s is not None and after.section_wait_s is not None
    waited = (after.section_wait_s[:, OPT] - before.section_wait_s[:, OPT]) / after.steps
    assert np.all(np.abs(waited - 0.5 * transfer) < 0.01)
    comm = [after.kernel_names.index(k) for k in COMM_KERNEL_NAMES]
    assert np.all(after.kernel_median_ns[:, comm] > before.kernel_median_ns[:, comm])


def test_throttling_switches_on_and_off_in_bursts() -> None:
    fault = Fault(FaultKind.THROTTLING, (0,), start_s=0.0, slowdown=0.3)
    sim = JobSimulator(8, params=SMALL, faults=(fault,), seed=4)
    t = np.arange(30000) * SMALL.step_s
    states = sim._throttle_states(np.array([0]), t, fault)[0]
    duty = states.mean()
    assert 0.13 < duty < 0.21  # ~30 s on, ~150 s off -> 1/6
    switches = np.count_nonzero(np.diff(states))
    assert 500 < switches < 1000


def test_last_stage_runs_extra_kernels_that_other_stages_never_run() -> None:
    im = Imbalance(kind=ImbalanceKind.LAST_STAGE, pipeline_stages=4)
    sim = JobSimulator(64, params=SMALL, imbalance=im, seed=1)
    w = sim.next_window()
    extra = [w.kernel_names.index(k) for k in LAST_STAGE_KERNEL_NAMES]
    ran = np.isfinite(w.kernel_median_ns[:, extra]).all(axis=1)
    assert np.array_equal(np.flatnonzero(ran), np.arange(48, 64))
    # The last stage works longer; the earlier stages spend the difference waiting.
    assert w.section_wait_s is not None
    work = w.section_median_s[:, FB] - w.section_wait_s[:, FB] / w.steps
    assert work[48:].mean() > 1.15 * work[:48].mean()


def test_moving_imbalance_moves_the_slowest_rank_between_windows() -> None:
    im = Imbalance(kind=ImbalanceKind.MOVING)
    sim = JobSimulator(64, params=SMALL, imbalance=im, seed=1)
    slowest = {int(np.argmax(w.section_median_s[:, FB])) for w in sim.windows(8)}
    assert len(slowest) >= 4


def test_gc_pauses_and_stalls_hit_single_steps_and_leave_medians_alone() -> None:
    p = ModelParams(kernels=4, gc_prob=0.02, stall_prob=0.02)
    quiet = JobSimulator(256, params=ModelParams(kernels=4, gc_prob=0, stall_prob=0), seed=1)
    noisy = JobSimulator(256, params=p, seed=1)
    a, b = quiet.next_window(), noisy.next_window()
    assert np.median(b.section_median_s[:, 0] / a.section_median_s[:, 0]) == pytest.approx(
        1.0, abs=0.01
    )
    # ...but the all-reduce waits for whoever stalled, so everyone's optimizer grows.
    assert b.section_median_s[:, OPT].mean() > a.section_median_s[:, OPT].mean()


def _log_ratio(exact: bool, seed: int) -> np.ndarray:
    p = ModelParams(kernels=16, static_clip_sigmas=2.0)
    sim = JobSimulator(64, params=p, seed=seed, exact_kernels=exact)
    vals = []
    for w in sim.windows(3):
        med = w.kernel_median_ns[:, : p.kernels]
        vals.append(np.log(med / sim._static.kernel_base_ns[None, :]))
    return np.concatenate([v.ravel() for v in vals])


def test_window_median_shortcut_matches_per_invocation_generation() -> None:
    exact = _log_ratio(True, 11)
    fast = _log_ratio(False, 11)
    # Same seed, same static draws: compare the distributions over ranks x kernels.
    assert fast.mean() == pytest.approx(exact.mean(), abs=0.002)
    assert fast.std() == pytest.approx(exact.std(), rel=0.05)
    grid = np.quantile(exact, np.linspace(0.05, 0.95, 19))
    ks = np.abs((exact[:, None] <= grid).mean(0) - (fast[:, None] <= grid).mean(0)).max()
    assert ks < 0.05


def test_window_median_shortcut_keeps_the_sampling_noise_of_a_median() -> None:
    # Per-rank kernel medians around the rank's own level: the spread must be the
    # sampling spread of a median, sqrt(pi/2) * cv / sqrt(n), in both modes.
    p = ModelParams(kernels=40, step_jitter_cv=0.0, drift_min=0.0, drift_max=0.0)
    for exact in (True, False):
        sim = JobSimulator(32, params=p, seed=2, exact_kernels=exact)
        w = sim.next_window()
        st = sim._static
        ratio = w.kernel_median_ns[:, : p.kernels] / st.kernel_base_ns / st.speed[:, None]
        n = st.kernel_per_step * w.steps
        z = (ratio - 1.0) / (p.kernel_jitter_cv * np.sqrt(math.pi / 2 / n))
        assert z.std() == pytest.approx(1.0, abs=0.12), exact


def test_bad_fault_rank_is_refused_naming_the_rank() -> None:
    with pytest.raises(ValueError, match="rank 99"):
        JobSimulator(16, faults=(Fault(FaultKind.SLOW_GPU, (99,), 0.0, 0.1),))


def test_stall_and_gc_durations_follow_their_documented_laws() -> None:
    # With every step hit, the window medians expose the laws: exponential stalls
    # (median = mean x ln 2) on the data loader, uniform GC pauses (median 0.3 s) on compute.
    base = ModelParams(kernels=4, gc_prob=0.0, stall_prob=0.0)
    hit = ModelParams(kernels=4, gc_prob=1.0, stall_prob=1.0)
    a = JobSimulator(2000, params=base, seed=1).next_window()
    b = JobSimulator(2000, params=hit, seed=1).next_window()
    stall = np.median(b.section_median_s[:, 0] - a.section_median_s[:, 0])
    assert stall == pytest.approx(hit.stall_mean_s * math.log(2), rel=0.05)
    gc = np.median(b.section_median_s[:, FB] - a.section_median_s[:, FB])
    assert gc == pytest.approx((hit.gc_min_s + hit.gc_max_s) / 2, abs=0.02)


def test_the_default_job_is_traced_every_step_as_the_backend_would() -> None:
    sim = JobSimulator(8, seed=1)
    assert sim.kernel_sample_every == 1
    w = sim.next_window()
    steps = int(sim.p.window_s // sim.p.step_s)
    compute = slice(0, sim.p.kernels)
    assert (w.kernel_count[:, compute] == sim._static.kernel_per_step * steps).all()


def test_a_fast_step_job_is_sampled_and_its_kernel_counts_show_it() -> None:
    fast = ModelParams(kernels=200, step_s=0.1, compute_s=0.08)
    sim = JobSimulator(8, params=fast, seed=2)
    n = sim.kernel_sample_every
    assert n > 1  # ~470 kernels every 100 ms: tracing them all would cost ~0.9%
    w = sim.next_window()
    traced = -(-int(fast.window_s // fast.step_s) // n)  # steps 0, n, 2n, ... of the window
    per_step = sim._static.kernel_per_step
    assert (w.kernel_count[:, : fast.kernels] == per_step * traced).all()
    assert np.isfinite(w.kernel_median_ns[:, : fast.kernels]).all()


def test_a_window_without_a_traced_step_has_no_kernel_samples() -> None:
    rare = ModelParams(kernels=6, kernel_sample_every=100)  # 30 steps per window
    sim = JobSimulator(4, params=rare, seed=3)
    first, second = sim.next_window(), sim.next_window()
    assert (first.kernel_count[:, :6] == sim._static.kernel_per_step).all()  # step 0
    assert (second.kernel_count[:, :6] == 0).all()
    assert np.isnan(second.kernel_median_ns[:, :6]).all()
