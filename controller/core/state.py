"""Everything the core remembers between calls, as serialisable values.

The shell persists ``State`` (in the controller's own ConfigMaps on Kubernetes, the GCS
store on Ray) and hands it back on the next call, so a restarted
controller repeats nothing and loses nothing: streaks, ladder positions, attempt
counters, marks we own, action times (rate limits) and the breaker all live here.

Every field that may be absent has a default: a store that drops ``null`` (the API
server's merge patch does, even inside arrays) must not make a state unreadable.

Bounded: streaks exist only for ranks currently below the threshold, history keeps
``attribution.imbalanceHistory`` reports, stamps only the last hour.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from pydantic import ConfigDict, TypeAdapter, ValidationError
from pydantic.alias_generators import to_camel

from pacekeeper.controller.core.hardware_memory import HardwareMemory
from pacekeeper.controller.core.ids import JobKey, NodeName, Rank
from pacekeeper.controller.core.observations import MarkKind
from pacekeeper.controller.core.policy import ActionKind
from pacekeeper.controller.core.sequential import RankTest
from pacekeeper.controller.core.structure_pattern import Layout

STATE_VERSION = 1
MAX_LADDER_GPUS = 16
"""GPUs a ladder remembers as its suspects (a node has no more)."""

# camelCase on the wire, like every other object we write into Kubernetes.
_WIRE = ConfigDict(alias_generator=to_camel, populate_by_name=True)


@dataclass(frozen=True, slots=True)
class Streak:
    """A rank's run of consecutive reports below the act threshold."""

    __pydantic_config__ = _WIRE

    count: int
    since: datetime
    node: NodeName
    """Where the rank ran; a truncated report that omits the rank clears the streak only
    when this node's minimum is at or above the threshold."""


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One report, reduced to what imbalance detection needs."""

    __pydantic_config__ = _WIRE

    at: datetime
    worst_rank: int | None = None
    below: tuple[int, ...] = ()
    gpu_worst_rank: int | None = None
    """The slowest below rank judged by its own GPU score (neither its host side nor its
    tail lowered it); None: none such, or an entry written before it was kept."""


@dataclass(frozen=True, slots=True)
class LadderState:
    """One episode of one job on one node: where on the ladder, how many attempts."""

    __pydantic_config__ = _WIRE

    started_at: datetime
    step: ActionKind | None = None
    attempts: int = 0
    last_action_at: datetime | None = None
    simulated: bool = False
    """Progress made in observe/dry-run: never counted once the mode is enforce."""
    recover_count: int = 0
    recovering_since: datetime | None = None
    gpus: tuple[str, ...] = ()
    """The GPUs of the slow ranks the steps were taken for: the node recovers only when
    they score well against their peers again (``hardware_memory.unrecovered``)."""
    probe_id: str | None = None
    """The confirmation probe asked of the job for this episode (``confirm: probe``)."""
    probe_asked_at: datetime | None = None
    probe_confirmed: bool | None = None
    """The probe's answer: True, the node's hardware is slow; False, it is not; None:
    not answered yet."""
    human_override: str | None = None
    """The mark (``MarkKind`` value) a human removed during this episode: the node is
    theirs until the episode ends, and every decision on it says ``HumanOverride``."""

    def advanced(
        self, step: ActionKind, at: datetime, *, simulated: bool, gpus: tuple[str, ...] = ()
    ) -> LadderState:
        """The state after taking ``step`` at ``at`` (a repeat counts one more attempt)
        for the slow ranks on ``gpus``."""
        attempts = self.attempts + 1 if step == self.step else 1
        suspects = tuple(dict.fromkeys((*self.gpus, *gpus)))[-MAX_LADDER_GPUS:]
        return replace(
            self,
            step=step,
            attempts=attempts,
            last_action_at=at,
            simulated=self.simulated or simulated,
            recover_count=0,
            recovering_since=None,
            gpus=suspects,
        )

    def recovering(self, at: datetime) -> LadderState:
        return replace(
            self,
            recover_count=self.recover_count + 1,
            recovering_since=self.recovering_since or at,
        )

    def relapsed(self) -> LadderState:
        return replace(self, recover_count=0, recovering_since=None)


@dataclass(frozen=True, slots=True)
class ActionStamp:
    __pydantic_config__ = _WIRE

    at: datetime
    job: JobKey
    simulated: bool = False


@dataclass(frozen=True, slots=True)
class MarkRecord:
    """A mark we placed (or, when simulated, would have placed) on a node."""

    __pydantic_config__ = _WIRE

    applied_at: datetime
    holders: tuple[JobKey, ...]
    """Jobs whose ladders need the mark; undone when the last one lets go."""
    policy: str
    action_key: str
    seen: bool = False
    """Observed on the node at least once. A seen mark that disappears was removed by
    someone else (a human uncordon): we respect that and do not put it back."""
    simulated: bool = False


@dataclass(frozen=True, slots=True)
class NodeState:
    __pydantic_config__ = _WIRE

    marks: Mapping[MarkKind, MarkRecord] = field(default_factory=dict)
    cooldown_until: datetime | None = None
    cooldown_cause: str | None = None


@dataclass(frozen=True, slots=True)
class JobState:
    __pydantic_config__ = _WIRE

    first_seen_at: datetime
    last_report_at: datetime | None = None
    last_disruptive_at: datetime | None = None
    """Last disruptive action of any kind (``budgets.betweenActionsS``)."""
    regrouped_at: datetime | None = None
    """Last restart or drain: the job's pods changed, so reports from the warm-up after
    it are ignored and the streaks start anew."""
    streaks: Mapping[Rank, Streak] = field(default_factory=dict)
    history: tuple[HistoryEntry, ...] = ()
    ladders: Mapping[NodeName, LadderState] = field(default_factory=dict)
    policy_source: str | None = None
    """What chose the job's policy when not the document's default (an annotation)."""
    mode_source: str | None = None
    """What holds the job's mode where it is, when not the document or the policy."""
    layout: Layout | None = None
    """What the job's first judged reports showed, for a job whose reports carry no
    topology (``structure_pattern``)."""
    tests: Mapping[Rank, RankTest] = field(default_factory=dict)
    """Each rank's sequential test (``sequential``), when the policy states a
    false-disruption rate; bounded by ``sequential.HISTORY`` deviations a rank."""
    gpu_slow_at: Mapping[Rank, datetime] = field(default_factory=dict)
    """Each rank's last report with its GPU slow against its peers, within the section
    tail's memory (``tail_gate``): a finding by the tail alone needs one."""


@dataclass(frozen=True, slots=True)
class ClusterState:
    __pydantic_config__ = _WIRE

    nodes: Mapping[NodeName, NodeState] = field(default_factory=dict)
    stamps: tuple[ActionStamp, ...] = ()
    """Disruptive actions in the last hour (rate limits)."""
    breaker_demand: Mapping[str, datetime] = field(default_factory=dict)
    """Distinct (job, node) subjects that wanted a disruptive action, and when first."""
    breaker_open_until: datetime | None = None


@dataclass(frozen=True, slots=True)
class State:
    __pydantic_config__ = _WIRE

    jobs: Mapping[JobKey, JobState] = field(default_factory=dict)
    cluster: ClusterState = ClusterState()
    hardware: HardwareMemory = field(default_factory=HardwareMemory)
    """What every job's reports taught about each GPU (``hardware_memory``). The
    Kubernetes shell stores it apart, in shards (``state_store``)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (for CR status or annotations)."""
        out: dict[str, Any] = _ADAPTER.dump_python(self, mode="json", by_alias=True)
        out["stateVersion"] = STATE_VERSION
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> State:
        """Inverse of ``to_dict``; raises ``StateError`` naming the field on bad input."""
        body = dict(data)
        version = body.pop("stateVersion", STATE_VERSION)
        if version != STATE_VERSION:
            raise StateError(f"stateVersion {version!r} is not {STATE_VERSION}")
        try:
            return _ADAPTER.validate_python(body)
        except ValidationError as e:
            first = e.errors()[0]
            loc = ".".join(str(p) for p in first["loc"])
            raise StateError(f"state.{loc}: {first['msg']}") from e

    def job(self, key: JobKey, now: datetime) -> JobState:
        return self.jobs.get(key) or JobState(first_seen_at=now)


class StateError(ValueError):
    """Persisted state that cannot be read back; the message names the field."""


_ADAPTER: TypeAdapter[State] = TypeAdapter(State)
