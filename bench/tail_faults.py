"""Issue 38's two missed faults, and a healthy heavy-tailed job, under the simulator's
benchmark policy and docs/policies/enforce-gpu.yaml, each as it is and with
``score.tail`` and ``score.hostSideOneRank`` added: found, acted on, the first
disruptive step, and disruptive steps on healthy ranks. The detector's real scoring and
tails (``controller.simulation.tail_reports``) and the real decision core; enforce mode,
no restarts (the first disruptive step is what counts).

    .venv/bin/python bench/tail_faults.py --ranks 64 --seeds 4
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _table import emit

from pacekeeper.controller.core.decisions import Verdict
from pacekeeper.controller.core.policy import (
    DISRUPTIVE_ACTIONS,
    Mode,
    PolicyDocument,
    load_policy_file,
)
from pacekeeper.controller.core.policy_tail import TailRule
from pacekeeper.controller.simulation.faults_tail import periodic
from pacekeeper.controller.simulation.models import Fault, FaultKind, JobSimulator, ModelParams
from pacekeeper.controller.simulation.presets import simulation_policy
from pacekeeper.controller.simulation.tail_reports import run_with_tails

ENFORCE_GPU = Path(__file__).resolve().parents[1] / "docs" / "policies" / "enforce-gpu.yaml"
START_S = 300.0
HEAVY = ModelParams(
    kernels=16, gc_prob=0.02, gc_max_s=1.0, stall_prob=0.01, section_jitter_cv=0.03,
    step_jitter_cv=0.01,
)  # fmt: skip
"""Frequent 1 s GC pauses, loader stalls in 1% of steps, triple section jitter."""


def _with_new(doc: PolicyDocument, name: str, host_act: float | None) -> PolicyDocument:
    """``doc`` with ``score.tail``, ``hostSideOneRank`` and ``hostSideAct`` on policy ``name``."""
    p = doc.policies[name]
    update = {"tail": TailRule(), "host_side_one_rank": True, "host_side_act": host_act}
    changed = p.model_copy(update={"score": p.score.model_copy(update=update)})
    return doc.model_copy(update={"policies": {**doc.policies, name: changed}})


def policies() -> dict[str, PolicyDocument]:
    sim = simulation_policy(Mode.ENFORCE)
    gpu = load_policy_file(ENFORCE_GPU)
    return {
        "benchmark": sim,
        "benchmark+tail+oneRank": _with_new(sim, "default", None),
        "enforce-gpu": gpu,
        # enforce-gpu acts at 0.75 (the spread of same-model GPUs); host time at 0.9.
        "enforce-gpu+tail+oneRank": _with_new(gpu, gpu.default_policy, 0.9),
    }


def scenario(name: str, ranks: int, seed: int) -> tuple[JobSimulator, int | None]:
    rng = np.random.default_rng([seed, 38])
    culprit = int(rng.integers(ranks))
    p = ModelParams(kernels=16)
    if name == "healthy, heavy tails":
        return JobSimulator(ranks, params=HEAVY, seed=seed), None
    if name == "host stall 0.2 s/step":
        f = Fault(FaultKind.SLOW_HOST, (culprit,), start_s=START_S, slowdown=0.1)
        return JobSimulator(ranks, params=p, faults=(f,), seed=seed), culprit
    markov = name == "throttle 30% (Markov 2 of 6 min)"
    start = START_S if markov else START_S + float(rng.uniform(0.0, 60.0))
    f = Fault(FaultKind.THROTTLING, (culprit,), start_s=start, slowdown=0.3,
              throttle_on_s=120.0, throttle_off_s=240.0)  # fmt: skip
    sim = JobSimulator(ranks, params=p, faults=(f,), seed=seed)
    return (sim if markov else periodic(sim)), culprit


SCENARIOS = (
    "burst 30% 2 of 6 min (periodic)",
    "throttle 30% (Markov 2 of 6 min)",
    "host stall 0.2 s/step",
    "healthy, heavy tails",
)


def one_run(
    sim: JobSimulator, culprit: int | None, doc: PolicyDocument, windows: int
) -> dict[str, Any]:
    run = run_with_tails(sim, windows, doc)
    found = acted = None
    first = ""
    false = 0
    for t, d in run.decisions:
        if d.action is None or d.verdict is not Verdict.ACT:
            continue
        ranks = set(d.evidence.get("ranks") or ())
        hit = culprit is not None and culprit in ranks
        if hit and found is None:
            found = t - START_S
        if d.action in DISRUPTIVE_ACTIONS:
            if hit and acted is None:
                acted, first = t - START_S, d.action.value
            if ranks - {culprit}:
                false += 1
    return {"found": found, "acted": acted, "first": first, "false": false}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--windows", type=int, default=40, help="60 s report windows per run")
    ap.add_argument("--out", type=Path, default=None, help="results folder (bench/results)")
    args = ap.parse_args()
    rows = []
    for pname, doc in policies().items():
        for sname in SCENARIOS:
            runs = []
            for seed in range(1, args.seeds + 1):
                sim, culprit = scenario(sname, args.ranks, seed)
                runs.append((culprit, one_run(sim, culprit, doc, args.windows)))
            faulty = [r for c, r in runs if c is not None]
            acted = [r["acted"] for r in faulty if r["acted"] is not None]
            rows.append(
                {
                    "policy": pname,
                    "scenario": sname,
                    "runs": len(runs),
                    "found": sum(r["found"] is not None for r in faulty) if faulty else "-",
                    "acted": len(acted) if faulty else "-",
                    "act s (median)": statistics.median(acted) if acted else "-",
                    "first step": ",".join(sorted({r["first"] for r in faulty if r["first"]}))
                    or "-",
                    "false disruptive": sum(r["false"] for _, r in runs),
                }
            )
    meta = {"ranks": args.ranks, "seeds": args.seeds, "windows": args.windows}
    emit("tail_faults", rows, title=f"issue 38 faults, {args.ranks} ranks", meta=meta,
         results_dir=args.out)  # fmt: skip


if __name__ == "__main__":
    main()
