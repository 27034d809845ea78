"""Faults issue #18 added: ramps, slow from the job's start, host-side faults."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from pacekeeper.controller.simulation.faults import FOUND_AT_SLOWDOWN, Fault, FaultKind
from pacekeeper.controller.simulation.models import SECTIONS, JobSimulator, ModelParams
from pacekeeper.controller.simulation.scenarios import custom_scenario, get_scenario

P = ModelParams(kernels=12, stall_prob=0.0, gc_prob=0.0)
"""No stalls or GC pauses: a step's section times are its work, its wait and the fault."""
LOADER, FB, OPT = (SECTIONS.index(s) for s in ("dataloader", "forward_backward", "optimizer"))


def _compute_ratio(fault: Fault, windows: int) -> np.ndarray:
    """Per window, the faulty rank's kernel medians over a healthy twin's (same seed)."""
    healthy = JobSimulator(16, params=P, seed=4).windows(windows)
    faulty = JobSimulator(16, params=P, faults=(fault,), seed=4).windows(windows)
    r = fault.ranks[0]
    return np.array(
        [
            np.median(f.kernel_median_ns[r, : P.kernels] / h.kernel_median_ns[r, : P.kernels])
            for f, h in zip(faulty, healthy, strict=True)
        ]
    )


def test_a_ramp_grows_linearly_to_its_full_slowdown_and_then_stays() -> None:
    ramp = Fault(FaultKind.SLOW_GPU, (3,), start_s=120.0, slowdown=0.10, ramp_s=600.0)
    t = np.array([0.0, 120.0, 420.0, 720.0, 2000.0])
    assert ramp.level_at(t) == pytest.approx([0.0, 0.0, 0.05, 0.10, 0.10])
    assert ramp.reaches_s(FOUND_AT_SLOWDOWN) == pytest.approx(420.0)
    assert ramp.reaches_s(0.2) is None
    ratio = _compute_ratio(ramp, 14)
    mid_s = np.arange(14) * P.window_s + P.window_s / 2
    expected = 1.0 + ramp.level_at(mid_s)
    assert ratio == pytest.approx(expected, abs=0.004)
    assert ratio[-1] == pytest.approx(1.10, abs=0.004)


def test_a_fault_from_the_job_start_is_slow_in_the_first_window() -> None:
    sc = custom_scenario("gpu", 0.15, 1, 0.0)
    sim, gt = sc.build(16, 900.0, seed=2, params=P)
    assert gt.start_s() == 0.0
    (rank,) = gt.faulty_ranks
    healthy = JobSimulator(16, params=P, seed=2).next_window()
    first = sim.next_window()
    ratio = first.kernel_median_ns[rank, : P.kernels] / healthy.kernel_median_ns[rank, : P.kernels]
    assert np.median(ratio) == pytest.approx(1.15, abs=0.01)
    # Same rank as the scenario that starts a third in: only the timing differs.
    _, later = get_scenario("slow-gpu-10").build(16, 900.0, seed=2, params=P)
    _, from_start = get_scenario("slow-gpu-10-from-start").build(16, 900.0, seed=2, params=P)
    assert from_start.faulty_ranks == later.faulty_ranks
    assert from_start.start_s() == 0.0 and later.start_s() == 300.0


@pytest.mark.parametrize("section", ["forward_backward", "dataloader"])
def test_a_host_fault_grows_its_section_and_leaves_every_kernel_alone(section: str) -> None:
    node = tuple(range(8, 16))
    fault = Fault(FaultKind.SLOW_HOST, node, start_s=0.0, slowdown=0.1, host_section=section)
    host = JobSimulator(16, params=P, faults=(fault,), seed=5).next_window()
    base = JobSimulator(16, params=P, seed=5).next_window()
    # GPU side: bit for bit the healthy job's (a late launch does not slow a kernel).
    assert np.array_equal(
        host.kernel_median_ns[:, : P.kernels], base.kernel_median_ns[:, : P.kernels]
    )
    assert np.array_equal(
        host.kernel_total_ns[:, : P.kernels], base.kernel_total_ns[:, : P.kernels]
    )
    extra = 0.1 * P.step_s
    col = SECTIONS.index(section)
    grown = host.section_median_s[:, col] - base.section_median_s[:, col]
    assert grown[8:] == pytest.approx(extra, abs=1e-9)
    assert grown[:8] == pytest.approx(0.0, abs=1e-9)
    assert host.section_work_median_s is not None and base.section_work_median_s is not None
    work = host.section_work_median_s[:, col] - base.section_work_median_s[:, col]
    assert work[8:] == pytest.approx(extra, abs=1e-9)
    # The healthy node now waits for the slow one in the all-reduce.
    assert host.section_wait_s is not None and base.section_wait_s is not None
    waited = (host.section_wait_s[:, OPT] - base.section_wait_s[:, OPT]) / host.steps
    assert waited[:8].mean() == pytest.approx(extra, abs=0.02)
    assert waited[8:].mean() < waited[:8].mean()


def test_the_host_scenarios_hit_one_node_and_count_it_in_nodes() -> None:
    _, gt = get_scenario("slow-host-10").build(64, 1800.0, seed=1)
    (fault,) = gt.faults
    assert fault.kind is FaultKind.SLOW_HOST and fault.host_section == "forward_backward"
    assert len(gt.faulty_ranks) == 8 and len({r // 8 for r in gt.faulty_ranks}) == 1
    _, loader = get_scenario("slow-loader-10").build(64, 1800.0, seed=1)
    assert loader.faults[0].host_section == "dataloader"
    assert loader.faulty_ranks == gt.faulty_ranks
    _, two = custom_scenario("host", 0.1, 2, None).build(64, 1800.0, seed=1)
    assert len(two.faulty_ranks) == 16


def test_the_ramp_scenario_counts_from_five_percent_and_asks_for_the_time_to_get_there() -> None:
    sc = get_scenario("ramp-10-3h")
    _, gt = sc.build(64, 7200.0, seed=0)
    (fault,) = gt.faults
    assert (fault.start_s, fault.ramp_s, fault.slowdown) == (600.0, 10800.0, 0.10)
    assert gt.counted_from_s() == pytest.approx(600.0 + 10800.0 / 2)
    assert sc.min_duration_s is not None and sc.min_duration_s > gt.counted_from_s() + 600.0
    # A ramp that stops short of 5% counts once it is at its full size.
    short = replace(custom_scenario("gpu", 0.04, 1, 0.0), ramp_s=100.0)
    _, gt_short = short.build(16, 900.0, seed=0)
    assert gt_short.counted_from_s() == pytest.approx(100.0)


def test_bad_faults_are_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match="ramp_s"):
        Fault(FaultKind.SLOW_GPU, (1,), 0.0, 0.1, ramp_s=-1.0)
    with pytest.raises(ValueError, match="host_section"):
        Fault(FaultKind.SLOW_HOST, (1,), 0.0, 0.1, host_section="optimizer")
    with pytest.raises(ValueError, match="start_s"):
        Fault(FaultKind.SLOW_GPU, (1,), -5.0, 0.1)
