"""``RealScoring.report`` carries each rank's tail statistic (``sectionTail``) as the
detector's ``PayloadBuilder`` does, so every simulated run (the sampled benchmark's
``judge_policies`` included) lets ``score.tail`` see a rank slow one window in three;
a restart starts every rank's tail anew."""

from __future__ import annotations

from pacekeeper.controller.simulation.detection import RealScoring
from pacekeeper.controller.simulation.faults_tail import periodic
from pacekeeper.controller.simulation.models import Fault, FaultKind, JobSimulator, ModelParams

P = ModelParams(kernels=8)
CULPRIT = 3


def _sim() -> JobSimulator:
    burst = Fault(
        FaultKind.THROTTLING, (CULPRIT,), start_s=0.0, slowdown=0.3,
        throttle_on_s=120.0, throttle_off_s=240.0,
    )  # fmt: skip
    return periodic(JobSimulator(16, params=P, faults=(burst,), seed=7))


def test_each_rank_reports_its_tail_and_the_bursting_rank_has_the_lowest() -> None:
    sim = _sim()
    scoring = RealScoring(sim.layout)
    reports = [scoring.report(sim.next_window()) for _ in range(8)]
    first = {r.rank: r.worst_tail() for r in reports[0].ranks}
    assert all(v is None for v in first.values())  # fewer windows than a tail needs
    last = {r.rank: r.worst_tail() for r in reports[-1].ranks}
    assert all(v is not None for v in last.values())
    culprit = last.pop(CULPRIT)
    assert culprit is not None and culprit < 0.85
    assert min(v for v in last.values() if v is not None) > 0.9


def test_a_restart_starts_every_tail_anew() -> None:
    sim = _sim()
    scoring = RealScoring(sim.layout)
    for _ in range(8):
        scoring.report(sim.next_window())
    scoring.restart()
    after = scoring.report(sim.next_window())
    assert all(r.worst_tail() is None for r in after.ranks)
