"""Runs a scenario window by window through the real scoring and the real decision core.

Per report window: the simulator's summaries go through ``RealScoring`` (the detector's
own scoring code) into a ``ScoreReport``; the report joins the job's window of recent
reports and ``engine.decide`` (the controller's own core) decides. The world answers as
an ideal actuator would (``ClusterView.with_decisions``): in enforce mode marks appear on
nodes, in dry-run and observe nothing changes and the would-be actions are recorded.
The simulated job keeps running on its broken GPU either way (the simulator does not
model rescheduling), so a ladder can climb to its end.

The same window summaries are also scored with NVRx's rule (``nvrx_rule``), so both
detectors are judged on identical traces. ``replay`` re-decides on a recorded trace.

A restart (``restarts.Restarts``: at given times, or when the controller takes a
``restartRank``) gives every rank fresh detector state and NVRx fresh minima, starts a
new incarnation whose report sequence starts at 0, and costs its downtime in windows
without a report; the controller keeps its own state, as the operator does.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import IO, TYPE_CHECKING

import numpy as np

from pacekeeper.controller.core.attribution import score_getter
from pacekeeper.controller.core.decisions import Decision, Reason, Verdict
from pacekeeper.controller.core.engine import decide
from pacekeeper.controller.core.hardware_memory import HardwareMemory
from pacekeeper.controller.core.observations import (
    ClusterView,
    Window,
    cluster_from_reports,
    job_view,
)
from pacekeeper.controller.core.policy import DISRUPTIVE_ACTIONS, NODE_ACTIONS, PolicyDocument
from pacekeeper.controller.core.state import State
from pacekeeper.controller.simulation.detection import EPOCH, Instrumentation, RealScoring
from pacekeeper.controller.simulation.models import (
    JobSimulator,
    ModelParams,
    WindowSummary,
)
from pacekeeper.controller.simulation.nvrx_rule import (
    NVRX_RULES,
    NvrxRule,
    NvrxScorer,
    flagged,
)
from pacekeeper.controller.simulation.quality import Flag, Quality, SubjectKind, Truth, score_run
from pacekeeper.controller.simulation.restarts import NO_RESTARTS, RestartKind, Restarts
from pacekeeper.detector.score_report import RankScores, ScoreReport

if TYPE_CHECKING:
    from pacekeeper.controller.simulation.scenarios import GroundTruth, Scenario

REPORT_HISTORY = 32
"""Reports kept in the job's window (the engine needs its persistence and imbalance
history; older reports only cost time)."""


@dataclass
class RunRecord:
    """Everything a run produced, for quality scoring, plotting and the CLI."""

    ranks: int
    gpus_per_node: int
    window_s: float
    node_names: list[str]
    times_s: list[float] = field(default_factory=list)
    scores: list[np.ndarray] = field(default_factory=list)
    """Per window, per rank: the score the policy judges by (NaN: none)."""
    decisions: list[Decision] = field(default_factory=list)
    decision_times_s: list[float] = field(default_factory=list)
    ours: list[Flag] = field(default_factory=list)
    undos: list[Flag] = field(default_factory=list)
    """Our marks removed (undo decisions), by node."""
    recoveries: list[Flag] = field(default_factory=list)
    """Suspects the controller declared ``Recovered``."""
    nvrx: dict[str, list[Flag]] = field(default_factory=dict)
    restarts_s: list[float] = field(default_factory=list)
    """When the job restarted (the start of its downtime)."""
    incarnations: list[str] = field(default_factory=list)
    """Per report, the reporter's incarnation (``<base>.r<restarts>``)."""


def _subject(d: Decision, node_index: dict[str, int]) -> tuple[SubjectKind, int] | None:
    if d.subject.startswith("rank/"):
        return SubjectKind.RANK, int(d.subject[5:])
    node = d.node
    if node is not None and node in node_index:
        return SubjectKind.NODE, node_index[node]
    return None


def effective_verdict(d: Decision) -> Verdict:
    """What the decision does or, held only by observe/dry-run mode, would do (the
    engine keeps the would-be verdict in ``evidence['wouldBe']``)."""
    would = d.evidence.get("wouldBe")
    if d.verdict is Verdict.HOLD and d.reason is Reason.OBSERVE_MODE and would in ("act", "undo"):
        return Verdict(would)
    return d.verdict


def flags_from_decisions(
    decisions: Iterable[Decision], time_s: float, node_index: dict[str, int], seen: set[str]
) -> list[Flag]:
    """Decisions that name a suspect: acts (taken or would-be), and holds carrying an
    action (awaiting its effect, budget, cooldown), which name the suspect only.

    A would-be action repeated in later reports counts once, by its action key, so
    dry-run and enforce count the same actions.
    """
    out = []
    for d in decisions:
        verdict = effective_verdict(d)
        if d.action is None or verdict is Verdict.UNDO:
            continue
        subj = _subject(d, node_index)
        if subj is None:
            continue
        disruptive = verdict is Verdict.ACT and d.action in DISRUPTIVE_ACTIONS
        key = d.action_key or f"{d.subject}:{d.action.value}:{time_s}"
        if disruptive and key in seen:
            disruptive = False
        if disruptive:
            seen.add(key)
        hardware = disruptive and d.action in NODE_ACTIONS
        probed = hardware and (d.evidence.get("probe") or {}).get("confirmed") is True
        out.append(Flag(time_s, subj[0], subj[1], disruptive, hardware, probed))
    return out


def undo_flags(
    decisions: Iterable[Decision], time_s: float, node_index: dict[str, int]
) -> list[Flag]:
    """Our marks removed (or that would be), by subject."""
    out = []
    for d in decisions:
        subj = _subject(d, node_index) if effective_verdict(d) is Verdict.UNDO else None
        if subj is not None:
            out.append(Flag(time_s, subj[0], subj[1]))
    return out


def recovery_flags(
    decisions: Iterable[Decision], time_s: float, node_index: dict[str, int]
) -> list[Flag]:
    """Suspects declared ``Recovered`` (a release, or a ladder closed for it)."""
    out = []
    for d in decisions:
        subj = _subject(d, node_index) if d.reason is Reason.RECOVERED else None
        if subj is not None:
            out.append(Flag(time_s, subj[0], subj[1]))
    return out


class Replayer:
    """Feeds reports to the real decision core one at a time, like the operator would."""

    def __init__(self, policy: PolicyDocument) -> None:
        self.policy = policy
        self.state = State()
        self.cluster: ClusterView | None = None
        self.reports: deque[ScoreReport] = deque(maxlen=REPORT_HISTORY)
        self._seen: set[str] = set()
        self.started_at: datetime | None = None
        """This incarnation's start as the operator sees it; None: the first report's."""

    def step(self, report: ScoreReport) -> list[Decision]:
        self.reports.append(report)
        if self.cluster is None:
            self.cluster = cluster_from_reports([report])
        first = self.reports[0].generated_at - timedelta(seconds=self.reports[0].window_s)
        started = self.started_at or min(first, EPOCH)
        jv = job_view(self.reports, started_at=started)
        now = report.generated_at
        out = decide(Window(jobs=(jv,), cluster=self.cluster), self.state, self.policy, now)
        self.state = out.next_state
        self.cluster = self.cluster.with_decisions(out.decisions)
        return list(out.decisions)


def judged_scores(report: ScoreReport, ranks: int, policy: PolicyDocument) -> np.ndarray:
    """Per rank, the score the default policy judges ranks by (NaN: not measured)."""
    resolved = policy.policy_for(None)
    get = score_getter(resolved[1].score) if resolved else _worst
    out = np.full(ranks, np.nan)
    for r in report.ranks:
        v = get(r)
        if v is not None:
            out[r.rank] = v
    return out


def _worst(r: RankScores) -> float | None:
    v = r.worst_score()
    return None if v is None else float(v)


def run_scenario(
    sim: JobSimulator,
    windows: int,
    policy: PolicyDocument,
    *,
    nvrx_rules: tuple[NvrxRule, ...] = NVRX_RULES,
    trace: IO[str] | None = None,
    on_window: Callable[[int], None] | None = None,
    instrumentation: Instrumentation | None = None,
    restarts: Restarts = NO_RESTARTS,
    history: tuple[JobSimulator, int] | None = None,
) -> RunRecord:
    """``instrumentation``: what the job turned on in the detector (default: collective
    timing, topology and GPU identities, as ``Detector.initialize`` and ``set_topology``
    give them); ``restarts``: when the job restarts. ``windows`` counts the job's
    clock, downtime included. ``history``: an earlier job on the same GPUs and its
    windows, played through the same controller just before (its decisions are not
    this run's; what it leaves is the memory of hardware)."""
    layout = sim.layout
    names = [layout.node_name(n) for n in range(layout.nodes())]
    rec = RunRecord(layout.ranks, layout.gpus_per_node, sim.p.window_s, names)
    node_index = {n: i for i, n in enumerate(names)}
    inst = instrumentation or Instrumentation()
    scoring = RealScoring(
        layout,
        coords=sim.coords() if inst.topology else None,
        collective_timing=inst.collective_timing,
        gpu_uuids=inst.gpu_uuid,
    )
    replayer = Replayer(policy)
    if history is not None:
        replayer.state = State(hardware=prior_memory(history[0], history[1], policy, inst))
    nvrx = NvrxScorer()
    rec.nvrx = {r.name: [] for r in nvrx_rules}
    i = 0
    restart_now = False
    while i < windows:
        begin = sim.clock_s
        if restart_now or restarts.due(begin, begin + sim.steps_per_window * sim.p.step_s):
            restart_now = False
            rec.restarts_s.append(begin)
            scoring.restart()
            nvrx = NvrxScorer()
            down = min(restarts.downtime_windows, windows - i)
            sim.skip(down)
            for j in range(i, i + down):
                if on_window is not None:
                    on_window(j)
            i += down
            if restarts.kind is RestartKind.RESUBMITTED:
                replayer.started_at = EPOCH + timedelta(seconds=sim.clock_s)
            if i >= windows:
                break
        w: WindowSummary = sim.next_window()
        report = scoring.report(w)
        if trace is not None:
            trace.write(report.to_json() + "\n")
        t = w.end_s
        rec.times_s.append(t)
        rec.incarnations.append(scoring.incarnation)
        rec.scores.append(judged_scores(report, layout.ranks, policy))
        decisions = replayer.step(report)
        for d in decisions:
            # The shell writes the request to the job's control; its next report answers.
            request = (d.evidence.get("probe") or {}).get("request")
            if d.reason is Reason.AWAITING_PROBE and request:
                scoring.ask_probe(str(request))
        rec.decisions.extend(decisions)
        rec.decision_times_s.extend([t] * len(decisions))
        rec.ours.extend(flags_from_decisions(decisions, t, node_index, replayer._seen))
        rec.undos.extend(undo_flags(decisions, t, node_index))
        rec.recoveries.extend(recovery_flags(decisions, t, node_index))
        ns = nvrx.score(w)
        for rule in nvrx_rules:
            hit = np.flatnonzero(flagged(ns, rule))
            # NeMo's stop_if_detected stops the job on any flag (quality counts one
            # action per report, see ``score_run(per_report_actions=True)``).
            rec.nvrx[rule.name].extend(Flag(t, SubjectKind.RANK, int(r), True) for r in hit)
        # The pod is evicted now; the job is back after its downtime.
        restart_now = restarts.triggered_by(decisions)
        if on_window is not None:
            on_window(i)
        i += 1
    return rec


def prior_memory(
    prior: JobSimulator, windows: int, policy: PolicyDocument, inst: Instrumentation
) -> HardwareMemory:
    """The memory of hardware an earlier job of ``windows`` on ``prior``'s GPUs leaves,
    ending where this run's clock starts."""
    scoring = RealScoring(
        prior.layout,
        "sim-prior",
        coords=prior.coords() if inst.topology else None,
        collective_timing=inst.collective_timing,
        gpu_uuids=inst.gpu_uuid,
        epoch=EPOCH - timedelta(seconds=windows * prior.p.window_s),
    )
    replayer = Replayer(policy)
    for _ in range(windows):
        replayer.step(scoring.report(prior.next_window()))
    return replayer.state.hardware


def read_trace(path: str | Path) -> Iterator[ScoreReport]:
    """Reports from a JSONL trace (one ScoreReport wire dict per line); a bad line
    raises naming the file and line."""
    p = Path(path)
    with p.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                yield ScoreReport.from_wire(line)
            except ValueError as e:
                raise ValueError(f"{p}:{n}: {e}") from e


def replay(reports: Iterable[ScoreReport], policy: PolicyDocument) -> list[tuple[float, Decision]]:
    """Decide on recorded reports in order; returns (seconds since the first report's
    window start, decision) for every decision."""
    rp = Replayer(policy)
    out: list[tuple[float, Decision]] = []
    t0 = None
    for r in reports:
        if t0 is None:
            t0 = r.generated_at - timedelta(seconds=r.window_s)
        for d in rp.step(r):
            out.append(((r.generated_at - t0).total_seconds(), d))
    return out


def decision_json(t_s: float, d: Decision) -> str:
    return json.dumps({"timeS": t_s, **d.to_dict()}, default=str)


@dataclass(frozen=True, slots=True)
class Outcome:
    """One scenario run, scored: ``quality`` maps detector name ("pacekeeper",
    "nvrx-0.75", "nvrx-0.75-gpu", "nvrx-0.7-gpu") to its scores on the same trace."""

    scenario: str
    record: RunRecord
    truth: Truth
    quality: dict[str, Quality]


def truth_of(gt: GroundTruth, rec: RunRecord, ranks: int, duration_s: float) -> Truth:
    """What quality scores a run against: the scenario's truth, and the restarts that
    happened (the first at or after the fault's start must be survived)."""
    start = gt.start_s()
    after = None
    if start is not None:
        after = next((t for t in rec.restarts_s if t >= start), None)
    return Truth(
        faulty_ranks=gt.faulty_ranks,
        start_s=start,
        gpus_per_node=rec.gpus_per_node,
        ranks=ranks,
        duration_s=duration_s,
        imbalance=gt.workload_only,
        counted_from_s=gt.counted_from_s(),
        found_after_s=after,
    )


def _history(
    sc: Scenario, ranks: int, seed: int, p: ModelParams
) -> tuple[JobSimulator, int] | None:
    windows = int(sc.history_s // p.window_s)
    return (sc.prior_job(ranks, seed, p), windows) if windows > 0 else None


def simulate(
    scenario: str | Scenario,
    ranks: int,
    duration_s: float,
    seed: int,
    *,
    policy: PolicyDocument | None = None,
    params: ModelParams | None = None,
    trace_path: str | Path | None = None,
    on_window: Callable[[int], None] | None = None,
    instrumentation: Instrumentation | None = None,
) -> Outcome:
    """Build the scenario, run it through the real scoring and engine, score it.
    ``params``: the job's model (``ModelParams.ddp_overlap`` and the rest);
    ``instrumentation``: what the job turned on in the detector. Without ``policy``, the
    simulation policy in the scenario's mode (``Scenario.mode``, else dry-run)."""
    from pacekeeper.controller.simulation.presets import simulation_policy
    from pacekeeper.controller.simulation.scenarios import get_scenario

    sc = get_scenario(scenario) if isinstance(scenario, str) else scenario
    p = params or ModelParams()
    windows = int(duration_s // p.window_s)
    if windows < 1:
        raise ValueError(
            f"duration {duration_s}s is shorter than one report window ({p.window_s}s)"
        )
    sim, gt = sc.build(ranks, windows * p.window_s, seed, params=p)
    doc = policy or (simulation_policy(sc.mode) if sc.mode else simulation_policy())
    run = partial(
        run_scenario,
        sim,
        windows,
        doc,
        on_window=on_window,
        instrumentation=instrumentation,
        restarts=gt.restarts,
        history=_history(sc, ranks, seed, p),
    )
    if trace_path is not None:
        with Path(trace_path).open("w", encoding="utf-8") as fh:
            rec = run(trace=fh)
    else:
        rec = run()
    truth = truth_of(gt, rec, ranks, windows * sim.p.window_s)
    quality = {"pacekeeper": score_run(rec.ours, truth, undos=rec.undos, recoveries=rec.recoveries)}
    for name, flags in rec.nvrx.items():
        quality[name] = score_run(flags, truth, per_report_actions=True)
    return Outcome(sc.name, rec, truth, quality)
