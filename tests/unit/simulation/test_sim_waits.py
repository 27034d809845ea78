"""The simulated job waits where a real one does, and the detector's collective timing
sees it: the all-reduce in ``optimizer`` (or in ``forward_backward`` under DDP overlap),
pipeline bubbles in ``forward_backward``, the culprit waiting least."""

from __future__ import annotations

import numpy as np
import pytest

from pacekeeper.controller.simulation.detection import RealScoring
from pacekeeper.controller.simulation.models import (
    SECTIONS,
    Fault,
    FaultKind,
    Imbalance,
    ImbalanceKind,
    JobSimulator,
    ModelParams,
)
from pacekeeper.controller.simulation.waits import Pipeline, group_max
from pacekeeper.detector.score_report import ScoreReport

FB = SECTIONS.index("forward_backward")
OPT = SECTIONS.index("optimizer")
# No GC pauses or loader stalls: one of them makes every other rank wait once, which
# moves the detector's work estimate (median entry minus *mean* wait) by its share.
QUIET = ModelParams(kernels=12, gc_prob=0.0, stall_prob=0.0)
CULPRIT = 5
SLOW = Fault(FaultKind.SLOW_GPU, (CULPRIT,), start_s=180.0, slowdown=0.2)


def _last_report(params: ModelParams, *, collective_timing: bool) -> ScoreReport:
    sim = JobSimulator(16, params=params, faults=(SLOW,), seed=3)
    scoring = RealScoring(sim.layout, collective_timing=collective_timing)
    reports = [scoring.report(w) for w in sim.windows(8)]
    return reports[-1]


def _section(report: ScoreReport, section: str) -> tuple[float, list[float]]:
    """(the culprit's individual score, the victims') on one section."""
    scores = {r.rank: r.section_individual[section] for r in report.ranks}
    culprit = scores.pop(CULPRIT)
    assert culprit is not None and all(v is not None for v in scores.values())
    return culprit, [v for v in scores.values() if v is not None]


def test_the_rank_everyone_waits_for_has_the_lowest_wait_share() -> None:
    report = _last_report(QUIET, collective_timing=True)
    shares = {r.rank: r.wait_share for r in report.ranks}
    assert all(s is not None for s in shares.values())
    culprit = shares.pop(CULPRIT)
    assert culprit is not None
    # Wider than the controller's victim floor (attribution.victimMinWaitShare, 0.05).
    assert all(s is not None and s >= culprit + 0.05 for s in shares.values())


def test_victims_score_their_optimizer_work_only_with_the_wait_taken_out() -> None:
    _, victims = _section(_last_report(QUIET, collective_timing=True), "optimizer")
    assert float(np.median(victims)) >= 0.9
    # Raw medians: the 0.3 s each victim now waits for the culprit is their "slowness".
    _, raw = _section(_last_report(QUIET, collective_timing=False), "optimizer")
    assert max(raw) <= 0.75


def test_ddp_overlap_moves_the_wait_into_backward_where_the_culprit_stands_out() -> None:
    ddp = ModelParams(kernels=12, gc_prob=0.0, stall_prob=0.0, ddp_overlap=True)
    culprit, victims = _section(_last_report(ddp, collective_timing=True), "forward_backward")
    assert culprit == pytest.approx(1 / 1.2, abs=0.02)
    assert min(victims) >= 0.98
    # Without the wait out, every victim's backward is as slow as the culprit's.
    culprit_raw, raw = _section(_last_report(ddp, collective_timing=False), "forward_backward")
    assert max(raw) <= 0.92
    assert culprit_raw >= min(raw)


def test_ddp_overlap_times_the_all_reduce_wait_inside_forward_backward() -> None:
    plain = JobSimulator(16, params=QUIET, faults=(SLOW,), seed=3).windows(4)[-1]
    ddp_params = ModelParams(kernels=12, gc_prob=0.0, stall_prob=0.0, ddp_overlap=True)
    ddp = JobSimulator(16, params=ddp_params, faults=(SLOW,), seed=3).windows(4)[-1]
    assert plain.section_wait_s is not None and ddp.section_wait_s is not None
    assert (plain.section_wait_s[:, FB] == 0).all() and (plain.section_wait_s[:, OPT] > 0).all()
    assert (ddp.section_wait_s[:, OPT] == 0).all() and (ddp.section_wait_s[:, FB] > 0).all()
    victims = np.arange(16) != CULPRIT
    assert (ddp.section_median_s[victims, FB] > plain.section_median_s[victims, FB]).all()
    # The hidden part of the transfer no longer adds to the step.
    assert ddp.wall_s is not None and plain.wall_s is not None and ddp.wall_s < plain.wall_s


def test_earlier_pipeline_stages_wait_for_the_longer_last_stage_in_bubbles() -> None:
    im = Imbalance(kind=ImbalanceKind.LAST_STAGE, pipeline_stages=4)
    sim = JobSimulator(64, params=QUIET, imbalance=im, seed=1)
    w = sim.windows(2)[-1]
    assert w.section_wait_s is not None
    bubble = w.section_wait_s[:, FB] / w.steps
    last = np.arange(64) >= 48  # 8 nodes, 2 per stage: stage 3 is nodes 6 and 7
    extra = im.last_stage_extra * QUIET.compute_s
    # The last stage's extra work, less what the static spread gives back.
    assert bubble[~last].mean() == pytest.approx(extra, rel=0.25)
    assert bubble[last].mean() < 0.2 * bubble[~last].mean()
    report = RealScoring(sim.layout, coords=sim.coords()).report(w)
    shares = np.array([r.wait_share for r in report.ranks], dtype=float)
    assert shares[last].max() < shares[~last].min()
    coords = [r.coords for r in report.ranks]
    assert all(c is not None and c["pp"] == 3 for c in np.array(coords)[last])
    assert {c["pp"] for c in coords if c is not None} == {0, 1, 2, 3}


def test_a_slow_gpu_in_a_pipeline_makes_its_pipeline_and_its_stage_wait() -> None:
    im = Imbalance(kind=ImbalanceKind.LAST_STAGE, pipeline_stages=4, last_stage_extra=0.0)
    slow = Fault(FaultKind.SLOW_GPU, (20,), start_s=0.0, slowdown=0.3)  # stage 1
    sim = JobSimulator(64, params=QUIET, imbalance=im, faults=(slow,), seed=2)
    assert sim.pipeline is not None
    w = sim.next_window()
    assert w.section_wait_s is not None
    stage, replica = sim.pipeline.stage, sim.pipeline.replica
    pipeline = (replica == replica[20]) & (np.arange(64) != 20)
    bubble = w.section_wait_s[:, FB] / w.steps
    assert bubble[pipeline].min() > 0.3 * QUIET.compute_s * 0.7
    assert bubble[20] == 0.0
    stage_peers = (stage == stage[20]) & (np.arange(64) != 20)
    dp_wait = w.section_wait_s[:, OPT] / w.steps
    assert dp_wait[stage_peers].min() > dp_wait[20] + 0.2


def test_a_job_without_collective_timing_reports_raw_sections_and_no_wait_share() -> None:
    sim = JobSimulator(8, params=QUIET, faults=(SLOW,), seed=4)
    w = sim.next_window()
    on = RealScoring(sim.layout).report(w)
    off = RealScoring(sim.layout, collective_timing=False).report(w)
    assert all(r.wait_share is None for r in off.ranks)
    assert all(r.wait_share is not None for r in on.ranks)
    # The same window scored twice: only the sections that hold a wait differ.
    rel_on = {r.rank: r.section_relative for r in on.ranks}
    for r in off.ranks:
        assert r.section_relative["dataloader"] == rel_on[r.rank]["dataloader"]
        assert r.gpu_relative == next(x.gpu_relative for x in on.ranks if x.rank == r.rank)
    assert {r.rank: r.section_relative["optimizer"] for r in off.ranks} != {
        k: v["optimizer"] for k, v in rel_on.items()
    }


def test_pipeline_coordinates_are_stage_and_replica_over_nodes() -> None:
    p = Pipeline.over_nodes(64, 8, 4)  # 8 nodes, 2 per stage
    assert p.stage.tolist() == [r // 16 for r in range(64)]
    assert p.replica[[0, 8, 16, 24, 63]].tolist() == [0, 8, 0, 8, 15]
    assert p.coords()[17] == {"dp": 1, "pp": 1}
    with pytest.raises(ValueError, match="stages"):
        Pipeline.over_nodes(8, 8, 0)


def test_group_max_is_the_largest_value_of_each_rows_group() -> None:
    rng = np.random.default_rng(0)
    values = rng.random((9, 4))
    groups = np.array([2, 0, 1, 2, 0, 1, 2, 0, 1])
    got = group_max(values, groups)
    for r in range(9):
        assert (got[r] == values[groups == groups[r]].max(axis=0)).all()
    assert (group_max(values, None) == values.max(axis=0)).all()
