"""The simulator plays N ranks through the detector's own scoring code."""

from __future__ import annotations

import pytest

from pacekeeper.controller.simulation.detection import RealScoring
from pacekeeper.controller.simulation.models import (
    Fault,
    FaultKind,
    JobSimulator,
    ModelParams,
)

P = ModelParams(kernels=16)


def test_a_slowed_gpu_scores_its_slowdown_on_the_individual_gpu_score() -> None:
    sim = JobSimulator(16, params=P, faults=(Fault(FaultKind.SLOW_GPU, (5,), 180.0, 0.25),), seed=1)
    scoring = RealScoring(sim.layout)
    reports = [scoring.report(w) for w in sim.windows(5)]
    before, after = reports[2].ranks, reports[4].ranks
    assert before[5].gpu_individual == pytest.approx(1.0, abs=0.01)
    assert after[5].gpu_individual == pytest.approx(1 / 1.25, abs=0.01)
    assert all(r.gpu_individual > 0.98 for r in after if r.rank != 5)
    assert after[5].node == "node-00000" and after[9].node == "node-00001"


def test_reports_are_valid_wire_reports_without_communication_kernels() -> None:
    sim = JobSimulator(8, params=P, seed=2)
    rep = RealScoring(sim.layout).report(sim.next_window())
    assert rep.summary.world_size == 8 and len(rep.ranks) == 8
    steps = int(P.window_s // P.step_s)
    # 16 compute kernels, launched 1, 2 or 4 times per step; the 2 NCCL kernels are out.
    launches = int(sim._static.kernel_per_step.sum()) * steps
    assert {r.kernel_samples for r in rep.ranks} == {launches}
    assert set(rep.ranks[0].section_relative) == {"dataloader", "forward_backward", "optimizer"}
    assert rep.ranks[0].gpu_relative is not None and 0 < rep.ranks[0].gpu_relative <= 1.0
