"""A simulated job run through the detector's scoring, its tail statistic included, and
the real decision core, with every report and decision kept (``run_with_tails``).

``RealScoring.report`` plays each rank's tail statistic (``sectionTail``) with the
detector's own ``detector.tails.RecentTail``, so every simulated run carries the tails;
this module keeps the reports a test or bench wants to read afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pacekeeper.controller.core.decisions import Decision
from pacekeeper.controller.core.policy import PolicyDocument
from pacekeeper.controller.simulation.detection import RealScoring
from pacekeeper.controller.simulation.models import JobSimulator
from pacekeeper.controller.simulation.runner import Replayer
from pacekeeper.detector.score_report import ScoreReport


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
    replayer = Replayer(policy)
    out = TailRun()
    for _ in range(windows):
        w = sim.next_window()
        report = scoring.report(w)
        out.reports.append(report)
        out.decisions.extend((w.end_s, d) for d in replayer.step(report))
    return out
