"""Detection-quality arithmetic: pure functions over what a detector named and when.

Units of truth are *suspects*: a rank, or a node. Naming a rank is right when that rank
is faulty; naming a node is right when a faulty rank runs on it. A faulty rank counts as
found when it or its node is named after its fault started.

* precision = right distinct suspects / all distinct suspects named (1.0 if none named)
* recall    = faulty ranks found / faulty ranks (1.0 if nothing was broken)
* time to detect / act = first naming (any verdict) / first disruptive action on a
  faulty suspect, minus the fault's start
* a ramp counts from when it reaches 5% (``Truth.counted_from_s``): a naming before
  that is right and finds it at 0 s; a ramp that never gets there within the run is
  nothing to find (not counted in recall)
* after a restart (``Truth.found_after_s``) only namings in the new incarnation find
  the fault, timed from the restart: the question is whether it survives the restart
* false recoveries = ``Recovered`` decisions on a suspect that is still broken (every
  simulated fault lasts to the end of the run)
* false actions per 1,000 GPU-days = disruptive actions on healthy suspects, per
  ranks x simulated days / 1000
* hardware actions on imbalance = node actions (taint, drain, cordon) in an imbalance
  scenario, right or wrong: there the workload is slow, not the machine.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

SECONDS_PER_DAY = 86400.0


class SubjectKind(StrEnum):
    RANK = "rank"
    NODE = "node"


@dataclass(frozen=True, slots=True)
class Flag:
    """One report window's verdict on one suspect."""

    time_s: float
    kind: SubjectKind
    id: int
    disruptive: bool = False
    """An action that costs the job (restart, taint, drain, cordon, stopping the job)."""
    hardware: bool = False
    """A node action (taint, drain, cordon)."""
    probed: bool = False
    """A node action the job's confirmation probe confirmed (``confirm: probe``)."""


@dataclass(frozen=True, slots=True)
class Truth:
    faulty_ranks: frozenset[int]
    start_s: float | None
    gpus_per_node: int
    ranks: int
    duration_s: float
    imbalance: bool
    """The workload makes ranks differ (imbalance, pipeline structure, job-wide pauses):
    every hardware action is wrong."""
    counted_from_s: float | None = None
    """The faults count for recall and time to find from here (a ramp: when it reaches
    5%); None: from their start."""
    found_after_s: float | None = None
    """Only namings after this find the faults (the first restart after the fault
    started: found again in the new incarnation); None: any after the start."""

    @property
    def counts(self) -> bool:
        """Whether the run holds anything to find (a ramp may not get there in time)."""
        return self.counted_from_s is None or self.counted_from_s < self.duration_s

    def clock_s(self) -> float | None:
        """Where time to detect and to act are measured from."""
        marks = (self.start_s, self.counted_from_s, self.found_after_s)
        known = [x for x in marks if x is not None]
        return max(known) if known else None

    def finds(self, f: Flag, rank: int) -> bool:
        """``f`` finds faulty ``rank``: right, about it, and in the incarnation counted."""
        after = self.found_after_s
        return self.covers(f, rank) and self.is_right(f) and (after is None or f.time_s > after)

    def node_of(self, rank: int) -> int:
        return rank // self.gpus_per_node

    def is_right(self, f: Flag) -> bool:
        if self.start_s is None or f.time_s <= self.start_s:
            return False
        if f.kind is SubjectKind.RANK:
            return f.id in self.faulty_ranks
        return any(self.node_of(r) == f.id for r in self.faulty_ranks)

    def covers(self, f: Flag, rank: int) -> bool:
        if f.kind is SubjectKind.RANK:
            return f.id == rank
        return f.id == self.node_of(rank)


@dataclass(frozen=True, slots=True)
class Quality:
    named: int
    right: int
    faulty: int
    found: int
    time_to_detect_s: float | None
    time_to_act_s: float | None
    false_actions: int
    gpu_days: float
    hardware_actions_on_imbalance: int
    premature_undos: int = 0
    """Our marks removed from a node whose fault was still there (every simulated fault
    lasts to the end of the run)."""
    false_recoveries: int = 0
    """``Recovered`` decisions on a suspect whose fault was still there."""
    hardware_actions: int = 0
    """Node actions (taint, drain, cordon), right or wrong."""
    probed_hardware_actions: int = 0
    """Of those, the ones the job's confirmation probe confirmed."""

    @property
    def precision(self) -> float:
        return self.right / self.named if self.named else 1.0

    @property
    def recall(self) -> float:
        return self.found / self.faulty if self.faulty else 1.0

    @property
    def false_actions_per_1000_gpu_days(self) -> float:
        return 1000.0 * self.false_actions / self.gpu_days if self.gpu_days > 0 else 0.0

    def to_dict(self) -> dict[str, float | int | None]:
        return {
            "precision": self.precision,
            "recall": self.recall,
            "named": self.named,
            "right": self.right,
            "faulty": self.faulty,
            "found": self.found,
            "timeToDetectS": self.time_to_detect_s,
            "timeToActS": self.time_to_act_s,
            "falseActions": self.false_actions,
            "gpuDays": self.gpu_days,
            "falseActionsPer1000GpuDays": self.false_actions_per_1000_gpu_days,
            "hardwareActionsOnImbalance": self.hardware_actions_on_imbalance,
            "prematureUndos": self.premature_undos,
            "falseRecoveries": self.false_recoveries,
            "hardwareActions": self.hardware_actions,
            "probedHardwareActions": self.probed_hardware_actions,
        }


def score_run(
    flags: Iterable[Flag],
    truth: Truth,
    *,
    per_report_actions: bool = False,
    undos: Iterable[Flag] = (),
    recoveries: Iterable[Flag] = (),
) -> Quality:
    """Score one run. ``per_report_actions``: all disruptive flags of one report are one
    action (a rule that stops the job, as NeMo's ``stop_if_detected``, acts once per
    report however many ranks it names). ``recoveries``: suspects declared recovered."""
    items = sorted(flags, key=lambda f: f.time_s)
    suspects = {(f.kind, f.id) for f in items}
    right = {(f.kind, f.id) for f in items if truth.is_right(f)}
    clock = truth.clock_s()
    detect: list[float] = []
    act: list[float] = []
    found = 0
    counted = sorted(truth.faulty_ranks) if truth.counts else []
    for rank in counted:
        hits = [f for f in items if truth.finds(f, rank)]
        if hits:
            found += 1
            assert clock is not None
            # Named before a ramp reached the bar: found as soon as it counts.
            detect.append(max(0.0, hits[0].time_s - clock))
            acted = [f.time_s for f in hits if f.disruptive]
            if acted:
                act.append(max(0.0, acted[0] - clock))
    # A false action is one disruptive verdict per report on a suspect that is not broken.
    wrong = [f for f in items if f.disruptive and not truth.is_right(f)]
    false_actions = len({f.time_s for f in wrong}) if per_report_actions else len(wrong)
    hw = sum(1 for f in items if f.hardware) if truth.imbalance else 0
    return Quality(
        named=len(suspects),
        right=len(right),
        faulty=len(counted),
        found=found,
        time_to_detect_s=max(detect) if detect else None,
        time_to_act_s=max(act) if act else None,
        false_actions=false_actions,
        gpu_days=truth.ranks * truth.duration_s / SECONDS_PER_DAY,
        hardware_actions_on_imbalance=hw,
        premature_undos=sum(1 for u in undos if truth.is_right(u)),
        false_recoveries=sum(1 for r in recoveries if truth.is_right(r)),
        hardware_actions=sum(1 for f in items if f.hardware),
        probed_hardware_actions=sum(1 for f in items if f.hardware and f.probed),
    )


def combine(runs: Iterable[Quality]) -> Quality:
    """Micro-average over runs (seeds): counts add up, times take the worst."""
    rs = list(runs)
    tts = [q.time_to_detect_s for q in rs if q.time_to_detect_s is not None]
    tta = [q.time_to_act_s for q in rs if q.time_to_act_s is not None]
    return Quality(
        named=sum(q.named for q in rs),
        right=sum(q.right for q in rs),
        faulty=sum(q.faulty for q in rs),
        found=sum(q.found for q in rs),
        time_to_detect_s=max(tts) if tts else None,
        time_to_act_s=max(tta) if tta else None,
        false_actions=sum(q.false_actions for q in rs),
        gpu_days=sum(q.gpu_days for q in rs),
        hardware_actions_on_imbalance=sum(q.hardware_actions_on_imbalance for q in rs),
        premature_undos=sum(q.premature_undos for q in rs),
        false_recoveries=sum(q.false_recoveries for q in rs),
        hardware_actions=sum(q.hardware_actions for q in rs),
        probed_hardware_actions=sum(q.probed_hardware_actions for q in rs),
    )
