"""One simulated job judged by several policies at once, and by NVRx's rules.

Scoring a window (the detector's own code, per rank) costs ~95% of a run; deciding
costs the rest. A sampled scenario has no restarts, no memory of earlier jobs and no
confirmation probe, so what a policy decides never changes the reports: the job is
simulated and scored once and every policy's own decision core (a ``Replayer`` each,
with its own state) reads the same reports. ``runner.simulate`` stays the path for
scenarios whose reports depend on the decisions (restarts, probes).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from pacekeeper.controller.simulation.detection import Instrumentation, RealScoring
from pacekeeper.controller.simulation.models import ModelParams
from pacekeeper.controller.simulation.nvrx_rule import NVRX_RULES, NvrxScorer, flagged
from pacekeeper.controller.simulation.quality import Flag, Quality, SubjectKind, Truth, score_run
from pacekeeper.controller.simulation.runner import Replayer, flags_from_decisions

if TYPE_CHECKING:
    from pacekeeper.controller.core.policy import PolicyDocument
    from pacekeeper.controller.simulation.scenarios import Scenario

NVRX_PREFIX = "nvrx:"


def judge_policies(
    sc: Scenario,
    ranks: int,
    duration_s: float,
    seed: int,
    policies: Mapping[str, PolicyDocument],
    *,
    params: ModelParams | None = None,
) -> dict[str, Quality]:
    """Quality per policy name, and per NVRx rule as ``nvrx:<rule>``."""
    if sc.history_s or sc.restarts.at_s or sc.restart_after_fault_s or sc.restarts.on_restart_rank:
        raise ValueError(f"scenario {sc.name!r}: restarts and history need runner.simulate")
    p = params or ModelParams()
    windows = int(duration_s // p.window_s)
    if windows < 1:
        raise ValueError(f"duration {duration_s}s is shorter than one report window")
    sim, gt = sc.build(ranks, windows * p.window_s, seed, params=p)
    layout = sim.layout
    names = [layout.node_name(n) for n in range(layout.nodes())]
    node_index = {n: i for i, n in enumerate(names)}
    inst = Instrumentation()  # the detector's defaults, as runner.simulate plays them
    scoring = RealScoring(
        layout,
        coords=sim.coords(),
        collective_timing=inst.collective_timing,
        gpu_uuids=inst.gpu_uuid,
    )
    replayers = {name: Replayer(doc) for name, doc in policies.items()}
    flags: dict[str, list[Flag]] = {name: [] for name in policies}
    nvrx = NvrxScorer()
    nvrx_flags: dict[str, list[Flag]] = {r.name: [] for r in NVRX_RULES}
    for _ in range(windows):
        w = sim.next_window()
        report = scoring.report(w)
        for name, rp in replayers.items():
            decisions = rp.step(report)
            flags[name].extend(flags_from_decisions(decisions, w.end_s, node_index, rp._seen))
        ns = nvrx.score(w)
        for rule in NVRX_RULES:
            hit = np.flatnonzero(flagged(ns, rule))
            nvrx_flags[rule.name].extend(Flag(w.end_s, SubjectKind.RANK, int(r), True) for r in hit)
    truth = Truth(
        faulty_ranks=gt.faulty_ranks,
        start_s=gt.start_s(),
        gpus_per_node=layout.gpus_per_node,
        ranks=ranks,
        duration_s=windows * p.window_s,
        imbalance=gt.workload_only,
        counted_from_s=gt.counted_from_s(),
    )
    out = {name: score_run(f, truth) for name, f in flags.items()}
    for name, f in nvrx_flags.items():
        out[NVRX_PREFIX + name] = score_run(f, truth, per_report_actions=True)
    return out
