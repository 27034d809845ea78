"""Issue #18's detection goals, judged on scenario runs: pure arithmetic over ``Quality``.

Each goal groups the scenarios that test one claim (every slowdown of 5% or more, a GPU
slow from the job's start, a fault that survives a restart, a 3 h ramp, a host-side
fault, noise and drift at twice the model's) with the time a fault must be found in.
A faulty rank counts as found in time when its run's slowest find is within the limit
(``Quality`` keeps the worst time per run, not per rank). A goal is met with recall in
time of at least 0.95 and no disruptive false action in its runs (a rule that names
every rank finds everything). Beside recall: disruptive
false actions over the GPU-days of the noisy runs, and node actions where the
workload alone makes ranks differ (imbalance, pipeline structure, job-wide pauses).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pacekeeper.controller.simulation.quality import Quality

RECALL_GOAL = 0.95
FALSE_ACTION_GPU_DAYS = 10_000.0
"""The noisy runs must show zero disruptive false actions in at least this many GPU-days."""


@dataclass(frozen=True, slots=True)
class Goal:
    name: str
    scenarios: tuple[str, ...]
    find_within_s: float


RECALL_GOALS = (
    Goal(
        "slowdown >= 5%",
        ("slow-gpu-5", "slow-gpu-10", "slow-gpu-20", "slow-gpu-50", "slow-node-15"),
        300.0,
    ),
    Goal("slow from the job's start", ("slow-gpu-10-from-start", "slow-node-15-from-start"), 300.0),
    Goal("surviving a restart", ("slow-gpu-10-restart", "slow-gpu-10-ladder-restart"), 300.0),
    Goal("3 h ramp, from 5%", ("ramp-10-3h",), 600.0),
    Goal("host-side", ("slow-host-10", "slow-loader-10"), 300.0),
    Goal("noise and drift x2", ("slow-gpu-5-noisy-2x", "slow-gpu-10-noisy-2x"), 300.0),
    Goal("drift with a 30-60 min period", ("slow-gpu-10-fast-drift",), 300.0),
)
NOISY_SCENARIOS = (
    "healthy-noisy-2x",
    "slow-gpu-5-noisy-2x",
    "slow-gpu-10-noisy-2x",
    "slow-gpu-10-fast-drift",
)
WORKLOAD_SCENARIOS = ("imbalance-moving", "imbalance-last-stage", "job-pauses")


@dataclass(frozen=True, slots=True)
class GoalResult:
    goal: str
    detector: str
    runs: int
    faulty: int
    found: int
    found_in_time: int
    worst_detect_s: float | None
    find_within_s: float
    missing: tuple[str, ...]
    """The goal's scenarios that were not run."""
    named: int = 0
    right: int = 0
    false_actions: int = 0

    @property
    def precision(self) -> float:
        return self.right / self.named if self.named else 1.0

    @property
    def recall(self) -> float | None:
        return self.found / self.faulty if self.faulty else None

    @property
    def recall_in_time(self) -> float | None:
        return self.found_in_time / self.faulty if self.faulty else None

    @property
    def met(self) -> bool:
        r = self.recall_in_time
        return not self.missing and r is not None and r >= RECALL_GOAL and self.false_actions == 0

    def to_dict(self) -> dict[str, object]:
        return {
            "goal": self.goal,
            "detector": self.detector,
            "runs": self.runs,
            "faulty": self.faulty,
            "found": self.found,
            "foundInTime": self.found_in_time,
            "recall": self.recall,
            "recallInTime": self.recall_in_time,
            "precision": self.precision,
            "falseActions": self.false_actions,
            "worstDetectS": self.worst_detect_s,
            "findWithinS": self.find_within_s,
            "missing": list(self.missing),
            "met": self.met,
        }


def judge_recall(
    goal: Goal, detector: str, runs: Mapping[str, Sequence[Mapping[str, Quality]]]
) -> GoalResult:
    """``runs``: per scenario, one mapping of detector -> Quality per seed."""
    qs = [q[detector] for name in goal.scenarios for q in runs.get(name, ()) if detector in q]
    times = [q.time_to_detect_s for q in qs if q.time_to_detect_s is not None]
    in_time = sum(
        q.found
        for q in qs
        if q.time_to_detect_s is not None and q.time_to_detect_s <= goal.find_within_s
    )
    return GoalResult(
        goal=goal.name,
        detector=detector,
        runs=len(qs),
        faulty=sum(q.faulty for q in qs),
        found=sum(q.found for q in qs),
        found_in_time=in_time,
        worst_detect_s=max(times) if times else None,
        find_within_s=goal.find_within_s,
        missing=tuple(n for n in goal.scenarios if n not in runs),
        named=sum(q.named for q in qs),
        right=sum(q.right for q in qs),
        false_actions=sum(q.false_actions for q in qs),
    )


@dataclass(frozen=True, slots=True)
class FalseActions:
    detector: str
    false_actions: int
    gpu_days: float
    scenarios: tuple[str, ...]

    @property
    def per_1000_gpu_days(self) -> float:
        return 1000.0 * self.false_actions / self.gpu_days if self.gpu_days > 0 else 0.0

    @property
    def met(self) -> bool:
        return self.false_actions == 0 and self.gpu_days >= FALSE_ACTION_GPU_DAYS

    def to_dict(self) -> dict[str, object]:
        return {
            "detector": self.detector,
            "falseActions": self.false_actions,
            "gpuDays": self.gpu_days,
            "per1000GpuDays": self.per_1000_gpu_days,
            "scenarios": list(self.scenarios),
            "met": self.met,
        }


def false_actions(
    detector: str,
    runs: Mapping[str, Sequence[Mapping[str, Quality]]],
    scenarios: Iterable[str] = NOISY_SCENARIOS,
) -> FalseActions:
    ran = tuple(n for n in scenarios if n in runs)
    qs = [q[detector] for n in ran for q in runs[n] if detector in q]
    return FalseActions(
        detector,
        sum(q.false_actions for q in qs),
        sum(q.gpu_days for q in qs),
        ran,
    )


def node_actions_on_workload(
    detector: str,
    runs: Mapping[str, Sequence[Mapping[str, Quality]]],
    scenarios: Iterable[str] = WORKLOAD_SCENARIOS,
) -> dict[str, int]:
    """Per workload scenario run, the node actions taken (every one is wrong)."""
    return {
        n: sum(q[detector].hardware_actions_on_imbalance for q in runs[n] if detector in q)
        for n in scenarios
        if n in runs
    }
