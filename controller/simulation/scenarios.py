"""Named scenarios with their ground truth: which ranks and nodes are broken, from when,
from when a fault counts as findable (a ramp: once it is 5% slower), when the job
restarts, and whether the workload alone makes ranks differ (imbalance, job-wide
pauses: where any hardware action is wrong)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from pacekeeper.controller.core.policy import Mode
from pacekeeper.controller.simulation.faults import FOUND_AT_SLOWDOWN
from pacekeeper.controller.simulation.models import (
    Fault,
    FaultKind,
    Imbalance,
    ImbalanceKind,
    JobSimulator,
    Layout,
    ModelParams,
)
from pacekeeper.controller.simulation.noise import DEFAULT_NOISE, NoiseScale
from pacekeeper.controller.simulation.noise_families import NoiseFamily
from pacekeeper.controller.simulation.pauses import DEFAULT_PAUSES, JobPause
from pacekeeper.controller.simulation.restarts import NO_RESTARTS, Restarts


@dataclass(frozen=True, slots=True)
class GroundTruth:
    faults: tuple[Fault, ...]
    imbalance: ImbalanceKind
    localisable: bool
    """False where per-rank timings cannot say where the fault is (a slow link)."""
    restarts: Restarts = NO_RESTARTS
    """When the job restarts (the runner plays them; a restart the ladder causes is only
    known once the run has happened: ``RunRecord.restarts_s``)."""
    pauses: tuple[JobPause, ...] = ()

    @property
    def faulty_ranks(self) -> frozenset[int]:
        return frozenset(r for f in self.faults for r in f.ranks)

    def faulty_nodes(self, layout: Layout) -> frozenset[int]:
        return frozenset(layout.node_of(r) for r in self.faulty_ranks)

    def start_s(self) -> float | None:
        return min((f.start_s for f in self.faults), default=None)

    def counted_from_s(self) -> float | None:
        """When the faults count for recall and time to find: a ramp once it reaches 5%
        (or its full size, if smaller); None: from their start."""
        ramps = [f for f in self.faults if f.ramp_s > 0]
        if not ramps:
            return None
        return min(f.start_s + f.ramp_s * min(1.0, FOUND_AT_SLOWDOWN / f.slowdown) for f in ramps)

    @property
    def workload_only(self) -> bool:
        """Nothing is broken, the workload makes ranks differ or stall together: every
        hardware action is wrong."""
        return self.imbalance is not ImbalanceKind.NONE or (bool(self.pauses) and not self.faults)

    @property
    def action_correct(self) -> bool:
        """Whether any action can be right: a fault that per-rank timings can place."""
        return bool(self.faults) and self.localisable


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    description: str
    kind: FaultKind | None
    slowdown: float = 0.0
    whole_node: bool = False
    imbalance: ImbalanceKind = ImbalanceKind.NONE
    count: int = 1
    """How many ranks (or, with ``whole_node``, nodes) the fault hits."""
    start_s: float | None = None
    """When it starts (None: on the report window a third into the run; 0: with the job)."""
    ramp_s: float = 0.0
    """The slowdown grows linearly to its full size over this long (0: at once)."""
    host_section: str = "forward_backward"
    """A host fault's section (``faults.HOST_SECTIONS``)."""
    noise: NoiseScale = DEFAULT_NOISE
    """Drift and jitter as multiples of the model's."""
    pauses: tuple[JobPause, ...] = ()
    """Job-wide pauses (every rank at once)."""
    restart_after_fault_s: tuple[float, ...] = ()
    """Restarts, seconds after the fault's start (with no fault: after a third of the
    run), on top of ``restarts.at_s``."""
    restarts: Restarts = NO_RESTARTS
    min_duration_s: float | None = None
    """The run length it needs to mean anything (a 3 h ramp reaches 5% late)."""
    mode: Mode | None = None
    """The mode it needs (a restart the ladder causes needs enforce); None: any."""
    history_s: float = 0.0
    """The controller's memory of these GPUs: they served a healthy job for this long
    just before this one (a cluster the controller has watched, where a job lands on a
    GPU that went bad since its last job); 0: a controller that has never seen them."""
    family: NoiseFamily | None = None
    """A noise family on top of ``noise`` (noise_families; the sampler's)."""
    throttle_on_s: float = 30.0
    throttle_period_s: float = 0.0
    """Throttling on a clock (``Fault.throttle_period_s``); 0: the on/off chain."""

    def prior_job(self, ranks: int, seed: int, params: ModelParams | None = None) -> JobSimulator:
        """The healthy job the GPUs served before (``history_s``): the same GPUs (the
        same static draws), the same noise, no fault."""
        return JobSimulator(ranks, params=self.noise.apply(params or ModelParams()), seed=seed)

    def build(
        self,
        ranks: int,
        duration_s: float,
        seed: int,
        params: ModelParams | None = None,
        exact_kernels: bool = False,
    ) -> tuple[JobSimulator, GroundTruth]:
        params = self.noise.apply(params or ModelParams())
        if self.family is not None:
            params = with_family_drift(params, self.family)
        layout = Layout(ranks, params.gpus_per_node)
        rng = np.random.default_rng([seed, 7])
        faults: tuple[Fault, ...] = ()
        anchor = max(1, round(duration_s / 3 / params.window_s)) * params.window_s
        if self.kind is not None:
            # Faults start on a report-window boundary (a third into the run unless
            # given), so "within N windows" counts whole windows; 0 is the job's start.
            at = duration_s / 3 if self.start_s is None else self.start_s
            lowest = 1 if self.start_s is None or self.start_s > 0 else 0
            start = max(lowest, round(at / params.window_s)) * params.window_s
            anchor = start
            by_node = self.whole_node or self.kind is FaultKind.SLOW_LINK
            pool = layout.nodes() if by_node else ranks
            if not 1 <= self.count <= pool:
                unit = "nodes" if by_node else "ranks"
                raise ValueError(f"--count {self.count}: the job has {pool} {unit}")
            if self.count == 1:  # the named scenarios' draw, kept: their traces stay put
                rank = int(rng.integers(ranks))
                picked = [layout.node_of(rank) if by_node else rank]
            else:
                picked = sorted(int(x) for x in rng.choice(pool, self.count, replace=False))
            chosen = (
                tuple(r for n in picked for r in layout.ranks_of_node(n))
                if by_node
                else tuple(picked)
            )
            faults = (
                Fault(
                    self.kind,
                    chosen,
                    start,
                    self.slowdown,
                    ramp_s=self.ramp_s,
                    host_section=self.host_section,
                    throttle_on_s=self.throttle_on_s,
                    throttle_period_s=self.throttle_period_s,
                ),
            )
        sim = JobSimulator(
            ranks,
            params=params,
            faults=faults,
            imbalance=Imbalance(kind=self.imbalance),
            seed=seed,
            exact_kernels=exact_kernels,
            pauses=self.pauses,
            noise=self.family,
        )
        at_s = (*self.restarts.at_s, *(anchor + x for x in self.restart_after_fault_s))
        restarts = replace(self.restarts, at_s=tuple(sorted(at_s)))
        truth = GroundTruth(
            faults,
            self.imbalance,
            self.kind is not FaultKind.SLOW_LINK,
            restarts=restarts,
            pauses=self.pauses,
        )
        return sim, truth


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("healthy", "no fault: spread, drift, noise, stalls, GC pauses only", None),
        Scenario(
            "slow-gpu-3", "one GPU 3% slower from a third into the run", FaultKind.SLOW_GPU, 0.03
        ),
        Scenario("slow-gpu-10", "one GPU 10% slower", FaultKind.SLOW_GPU, 0.10),
        Scenario("slow-gpu-20", "one GPU 20% slower", FaultKind.SLOW_GPU, 0.20),
        Scenario("slow-gpu-50", "one GPU 50% slower", FaultKind.SLOW_GPU, 0.50),
        Scenario(
            "slow-node-15", "all 8 GPUs of one node 15% slower", FaultKind.SLOW_NODE, 0.15, True
        ),
        Scenario(
            "throttling-30",
            "one GPU throttles 30% in bursts (~30 s on, ~150 s off)",
            FaultKind.THROTTLING,
            0.30,
        ),
        Scenario(
            "slow-link-50",
            "one node's link 50% slower: everyone waits longer, nobody computes slower",
            FaultKind.SLOW_LINK,
            0.50,
        ),
        Scenario(
            "imbalance-moving",
            "sequence-length imbalance: the slowest rank moves every step and window",
            None,
            imbalance=ImbalanceKind.MOVING,
        ),
        Scenario(
            "imbalance-last-stage",
            "pipeline: the last stage's nodes compute the LM head and loss (+20%)",
            None,
            imbalance=ImbalanceKind.LAST_STAGE,
        ),
    )
}

NOISE_2X = NoiseScale(drift=2.0, jitter=2.0)
FLEET_HISTORY_S = 1800.0
"""How long the GPUs of a "from the job's start" scenario served a healthy job before."""

FAST_DRIFT = NoiseScale(drift_period_s=(1800.0, 3600.0))
"""Drift of the model's 1-2% peak to peak with a 30-60 min period (issue #18's case)."""

ISSUE_18_SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("slow-gpu-5", "one GPU 5% slower", FaultKind.SLOW_GPU, 0.05),
        Scenario(
            "slow-gpu-10-from-start",
            "one GPU 10% slower from the job's start (a job placed on a GPU that went bad "
            "since its last job: the controller watched the GPUs serve a healthy job for "
            "30 min before)",
            FaultKind.SLOW_GPU,
            0.10,
            start_s=0.0,
            history_s=FLEET_HISTORY_S,
        ),
        Scenario(
            "slow-node-15-from-start",
            "all 8 GPUs of one node 15% slower from the job's start (after a healthy job, "
            "as slow-gpu-10-from-start)",
            FaultKind.SLOW_NODE,
            0.15,
            True,
            start_s=0.0,
            history_s=FLEET_HISTORY_S,
        ),
        Scenario(
            "slow-gpu-10-from-start-unseen",
            "one GPU 10% slower from the job's start, on GPUs the controller has never "
            "seen: within the healthy spread of one model (up to 14% from the median), "
            "which no per-rank timing tells from a healthy slow GPU",
            FaultKind.SLOW_GPU,
            0.10,
            start_s=0.0,
        ),
        Scenario(
            "slow-gpu-10-restart",
            "one GPU 10% slower; 5 min later the job restarts in place (fresh detector "
            "state, same GPU, 1 window down); found again after the restart",
            FaultKind.SLOW_GPU,
            0.10,
            restart_after_fault_s=(300.0,),
        ),
        Scenario(
            "slow-gpu-10-ladder-restart",
            "one GPU 10% slower; the ladder's own restartRank restarts the job (enforce); "
            "found again after the restart",
            FaultKind.SLOW_GPU,
            0.10,
            restarts=Restarts(on_restart_rank=True),
            mode=Mode.ENFORCE,
        ),
        Scenario(
            "healthy-restart",
            "no fault; the job restarts in place a third into the run",
            None,
            restart_after_fault_s=(0.0,),
        ),
        Scenario(
            "ramp-10-3h",
            "one GPU slowing linearly to 10% over 3 h from minute 10; counted once 5% "
            "slower (minute 100)",
            FaultKind.SLOW_GPU,
            0.10,
            start_s=600.0,
            ramp_s=10800.0,
            min_duration_s=7200.0,
        ),
        Scenario(
            "slow-host-10",
            "one node's 8 ranks +0.2 s of CPU time per step in forward_backward (a busy "
            "CPU launches late); GPU kernels unchanged",
            FaultKind.SLOW_HOST,
            0.10,
            True,
        ),
        Scenario(
            "slow-loader-10",
            "one node's 8 ranks +0.2 s per step in dataloader (a slow data loader); GPU "
            "kernels unchanged",
            FaultKind.SLOW_HOST,
            0.10,
            True,
            host_section="dataloader",
        ),
        Scenario(
            "job-pauses",
            "no fault; every rank stalls together: eval 30 s every 10 min, a 20 s "
            "checkpoint every 30 min, synchronised GC 0.3 s every 200 s",
            None,
            pauses=DEFAULT_PAUSES,
        ),
        Scenario(
            "healthy-noisy-2x", "no fault; drift and jitter at twice the model's", None,
            noise=NOISE_2X,
        ),
        Scenario(
            "slow-gpu-5-noisy-2x", "one GPU 5% slower; drift and jitter at twice the model's",
            FaultKind.SLOW_GPU, 0.05, noise=NOISE_2X,
        ),
        Scenario(
            "slow-gpu-10-noisy-2x", "one GPU 10% slower; drift and jitter at twice the model's",
            FaultKind.SLOW_GPU, 0.10, noise=NOISE_2X,
        ),
        Scenario(
            "slow-gpu-10-fast-drift",
            "one GPU 10% slower; every GPU drifts 1-2% with a 30-60 min period",
            FaultKind.SLOW_GPU, 0.10, noise=FAST_DRIFT,
        ),
    )
}  # fmt: skip
"""The cases issue #18 found the simulator never ran (docs/simulator.md)."""

SCENARIOS.update(ISSUE_18_SCENARIOS)


def get_scenario(name: str) -> Scenario:
    try:
        return SCENARIOS[name]
    except KeyError:
        known = ", ".join(SCENARIOS)
        raise ValueError(f"unknown scenario {name!r}; known: {known}") from None


FAULT_KINDS = {"gpu": FaultKind.SLOW_GPU, "node": FaultKind.SLOW_NODE,
               "throttling": FaultKind.THROTTLING, "link": FaultKind.SLOW_LINK,
               "host": FaultKind.SLOW_HOST}  # fmt: skip
BY_NODE = (FaultKind.SLOW_NODE, FaultKind.SLOW_LINK, FaultKind.SLOW_HOST)
"""Kinds that hit whole nodes (``--count`` counts nodes)."""


def custom_scenario(fault: str, slowdown: float, count: int, start_s: float | None) -> Scenario:
    """A scenario from magnitudes: ``count`` GPUs (or nodes, for ``node``, ``link`` and
    ``host``) ``slowdown`` slower (0.1: 10% more time; for ``host``, 10% of the step
    in CPU time) from ``start_s``. ValueError names the option."""
    kind = FAULT_KINDS.get(fault)
    if kind is None:
        raise ValueError(f"--fault {fault!r}: one of {', '.join(FAULT_KINDS)}")
    if not 0 < slowdown <= 10:
        raise ValueError(f"--slowdown {slowdown:g}: a fraction above 0 (0.1 = 10% slower)")
    if count < 1:
        raise ValueError(f"--count {count}: at least 1")
    if start_s is not None and start_s < 0:
        raise ValueError(f"--start {start_s:g}: seconds from the job's start, at least 0")
    by_node = kind in BY_NODE
    what = f"{count} {'node' if by_node else 'GPU'}{'s' if count > 1 else ''}"
    when = "a third into the run" if start_s is None else f"from {start_s:g} s"
    return Scenario(
        f"custom-{fault}", f"{what} {slowdown:.0%} slower ({kind.value}) {when}", kind,
        slowdown, whole_node=by_node, count=count, start_s=start_s,
    )  # fmt: skip


def with_options(
    sc: Scenario,
    *,
    ramp_s: float | None = None,
    drift_scale: float | None = None,
    jitter_scale: float | None = None,
    restart_at_s: tuple[float, ...] = (),
    pauses: bool = False,
) -> Scenario:
    """``sc`` with the ``simulate`` command's model options on top: a ramp (``--ramp``),
    drift and jitter multiples (``--drift-scale``, ``--jitter-scale``), restarts at
    given times (``--restart-at``), job-wide pauses (``--pauses``). ValueError names the
    option."""
    notes = []
    if ramp_s is not None:
        if ramp_s < 0:
            raise ValueError(f"--ramp {ramp_s:g}: seconds, at least 0")
        if sc.kind is None or sc.kind is FaultKind.THROTTLING:
            raise ValueError(f"--ramp: scenario {sc.name!r} has no fault that can ramp")
        notes.append(f"ramping in over {ramp_s:g} s")
    for flag, v in (("--drift-scale", drift_scale), ("--jitter-scale", jitter_scale)):
        if v is not None and not 0 <= v <= 100:
            raise ValueError(f"{flag} {v:g}: a multiple of the model's, 0 to 100")
    noise = NoiseScale(
        drift=sc.noise.drift if drift_scale is None else drift_scale,
        jitter=sc.noise.jitter if jitter_scale is None else jitter_scale,
        drift_period_s=sc.noise.drift_period_s,
    )
    if noise != sc.noise:
        notes.append(noise.label())
    for t in restart_at_s:
        if t < 0:
            raise ValueError(f"--restart-at {t:g}: seconds from the job's start, at least 0")
    if restart_at_s:
        notes.append("restarts at " + ", ".join(f"{t:g} s" for t in restart_at_s))
    if pauses:
        notes.append("job-wide pauses")
    if not notes:
        return sc
    restarts = replace(sc.restarts, at_s=tuple(sorted((*sc.restarts.at_s, *restart_at_s))))
    return replace(
        sc,
        description=f"{sc.description}; {'; '.join(notes)}",
        ramp_s=sc.ramp_s if ramp_s is None else ramp_s,
        noise=noise,
        restarts=restarts,
        pauses=(*sc.pauses, *DEFAULT_PAUSES) if pauses else sc.pauses,
    )


def with_family_drift(params: ModelParams, family: NoiseFamily) -> ModelParams:
    """The model with a noise family's drift (the family's ranges where it sets them)."""
    lo, hi = family.drift_amp or (params.drift_min, params.drift_max)
    plo, phi = family.drift_period_s or (params.drift_period_min_s, params.drift_period_max_s)
    return replace(
        params, drift_min=lo, drift_max=hi, drift_period_min_s=plo, drift_period_max_s=phi
    )
