"""Each simulated rank's tail statistic (``sectionTail``), as the detector computes it.

The detector's ``PayloadBuilder`` keeps, per rank and section, its recent window times
(``detector.tails.RecentTail``) and reports their tail; ``RealScoring`` plays the rest
of each rank's detector. ``TailTracking`` plays this part with the same code, over the
same section times the rank is scored on (its work medians with collective timing on),
and adds the tails to ``RealScoring``'s report. ``run_with_tails`` runs a job through
both and the real decision core.

For the simulator's owner: ``RealScoring.report`` can call ``TailTracking.add`` on its
report (and ``TailTracking.restart`` from ``RealScoring.restart``: a restarted rank's
detector starts with no windows), which makes every run carry the tails.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pacekeeper.controller.core.decisions import Decision
from pacekeeper.controller.core.policy import PolicyDocument
from pacekeeper.controller.simulation.detection import RealScoring
from pacekeeper.controller.simulation.models import JobSimulator, WindowSummary
from pacekeeper.controller.simulation.runner import Replayer
from pacekeeper.detector.score_report import ScoreReport
from pacekeeper.detector.tails import RecentTail


class TailTracking:
    """One ``RecentTail`` per rank of a simulated job (row ``i`` is rank ``i``)."""

    def __init__(self, ranks: int, *, collective_timing: bool = True) -> None:
        self.ranks = ranks
        self.collective_timing = collective_timing
        self._tails = [RecentTail() for _ in range(ranks)]

    def restart(self) -> None:
        """Every rank's detector starts again: no windows remembered."""
        self._tails = [RecentTail() for _ in range(self.ranks)]

    def add(self, report: ScoreReport, w: WindowSummary) -> ScoreReport:
        """``report`` (of window ``w``) with each rank's tail over its windows so far."""
        sec = w.section_median_s
        if self.collective_timing and w.section_work_median_s is not None:
            sec = w.section_work_median_s
        ranks = []
        for r in report.ranks:
            scores = self._tails[r.rank].update(w.section_names, (sec[r.rank] * 1e9).tolist())
            tails = {n: v for n, v in zip(w.section_names, scores, strict=True) if math.isfinite(v)}
            ranks.append(r.model_copy(update={"section_tail": tails or None}))
        return ScoreReport.build(
            job=report.job,
            sequence=report.sequence,
            generated_at=report.generated_at,
            window_s=report.window_s,
            ranks=ranks,
            world_size=report.summary.world_size,
            kernel_timing=report.kernel_timing,
        )


@dataclass
class TailRun:
    """What a run with tails decided, by report window."""

    reports: list[ScoreReport] = field(default_factory=list)
    decisions: list[tuple[float, Decision]] = field(default_factory=list)
    """(end of the window, decision) in order."""


def run_with_tails(sim: JobSimulator, windows: int, policy: PolicyDocument) -> TailRun:
    """``windows`` report windows of ``sim`` through the detector's scoring and tails and
    the real decision core (no restarts: the world changes nothing)."""
    scoring = RealScoring(sim.layout, coords=sim.coords())
    tails = TailTracking(sim.layout.ranks)
    replayer = Replayer(policy)
    out = TailRun()
    for _ in range(windows):
        w = sim.next_window()
        report = tails.add(scoring.report(w), w)
        out.reports.append(report)
        out.decisions.extend((w.end_s, d) for d in replayer.step(report))
    return out
