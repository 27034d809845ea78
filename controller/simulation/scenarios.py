"""Named scenarios with their ground truth: which ranks and nodes are broken, from when,
and whether the job is imbalanced by its workload (where any hardware action is wrong)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pacekeeper.controller.simulation.models import (
    Fault,
    FaultKind,
    Imbalance,
    ImbalanceKind,
    JobSimulator,
    Layout,
    ModelParams,
)


@dataclass(frozen=True, slots=True)
class GroundTruth:
    faults: tuple[Fault, ...]
    imbalance: ImbalanceKind
    localisable: bool
    """False where per-rank timings cannot say where the fault is (a slow link)."""

    @property
    def faulty_ranks(self) -> frozenset[int]:
        return frozenset(r for f in self.faults for r in f.ranks)

    def faulty_nodes(self, layout: Layout) -> frozenset[int]:
        return frozenset(layout.node_of(r) for r in self.faulty_ranks)

    def start_s(self) -> float | None:
        return min((f.start_s for f in self.faults), default=None)


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
    """When it starts (None: on the report window a third into the run)."""

    def build(
        self,
        ranks: int,
        duration_s: float,
        seed: int,
        params: ModelParams | None = None,
        exact_kernels: bool = False,
    ) -> tuple[JobSimulator, GroundTruth]:
        params = params or ModelParams()
        layout = Layout(ranks, params.gpus_per_node)
        rng = np.random.default_rng([seed, 7])
        faults: tuple[Fault, ...] = ()
        if self.kind is not None:
            # Faults start on a report-window boundary (a third into the run unless
            # given), so "within N windows" counts whole windows.
            at = duration_s / 3 if self.start_s is None else self.start_s
            start = max(1, round(at / params.window_s)) * params.window_s
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
            faults = (Fault(self.kind, chosen, start, self.slowdown),)
        sim = JobSimulator(
            ranks,
            params=params,
            faults=faults,
            imbalance=Imbalance(kind=self.imbalance),
            seed=seed,
            exact_kernels=exact_kernels,
        )
        truth = GroundTruth(faults, self.imbalance, self.kind is not FaultKind.SLOW_LINK)
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


def get_scenario(name: str) -> Scenario:
    try:
        return SCENARIOS[name]
    except KeyError:
        known = ", ".join(SCENARIOS)
        raise ValueError(f"unknown scenario {name!r}; known: {known}") from None


FAULT_KINDS = {"gpu": FaultKind.SLOW_GPU, "node": FaultKind.SLOW_NODE,
               "throttling": FaultKind.THROTTLING, "link": FaultKind.SLOW_LINK}  # fmt: skip


def custom_scenario(fault: str, slowdown: float, count: int, start_s: float | None) -> Scenario:
    """A scenario from magnitudes: ``count`` GPUs (or nodes, for ``node`` and ``link``)
    ``slowdown`` slower (0.1: 10% more time) from ``start_s``. ValueError names the option."""
    kind = FAULT_KINDS.get(fault)
    if kind is None:
        raise ValueError(f"--fault {fault!r}: one of {', '.join(FAULT_KINDS)}")
    if not 0 < slowdown <= 10:
        raise ValueError(f"--slowdown {slowdown:g}: a fraction above 0 (0.1 = 10% slower)")
    if count < 1:
        raise ValueError(f"--count {count}: at least 1")
    if start_s is not None and start_s < 0:
        raise ValueError(f"--start {start_s:g}: seconds from the job's start, at least 0")
    by_node = kind in (FaultKind.SLOW_NODE, FaultKind.SLOW_LINK)
    what = f"{count} {'node' if by_node else 'GPU'}{'s' if count > 1 else ''}"
    when = "a third into the run" if start_s is None else f"from {start_s:g} s"
    return Scenario(
        f"custom-{fault}", f"{what} {slowdown:.0%} slower ({kind.value}) {when}", kind,
        slowdown, whole_node=by_node, count=count, start_s=start_s,
    )  # fmt: skip
