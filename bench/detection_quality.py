"""Detection quality, pacekeeper vs NVRx's rules.

By default over *sampled* scenarios (``bench/_sampled_quality.py``: noise families x
faults, parameters and seeds drawn from a hash of the scenario index, ``--policy PATH``
repeatable, ``--quick`` for tests). With ``--presets``, the named scenarios below:

Every scenario runs through the simulator (controller/simulation), the real detector
scoring and the real decision core; NVRx's published rule (0.75 on all four scores as
NVRx defaults, 0.75 on GPU scores only, and 0.7 on GPU scores as NeMo recipes use) is
scored on the same traces. Prints a table and writes bench/results/detection_quality.json.

    .venv/bin/python bench/detection_quality.py --presets [--ranks 1024 16384] [--seeds 2]
        [--jobs 1] [--suite all|original|issue18] [--ddp-overlap] [--no-collective-timing]
        [--no-gpu-uuid]

The simulated job times its collectives as the detector does by default (sections
scored on work, ``waitShare`` per rank) and names each rank's GPU (``gpuUuid``);
``--no-collective-timing`` plays a job that never turned that on, ``--ddp-overlap``
one whose gradient all-reduce runs inside backward, ``--no-gpu-uuid`` reports without
GPU identities (docs/simulator.md). A scenario that needs a longer run (the 3 h ramp)
gets it, one that needs enforce mode (the ladder's own restart) runs in it. After the
tables, issue #18's goals (``controller/simulation/goals.py``): recall within the time
limit per group of scenarios, false actions in the noisy runs, node actions where the
workload alone makes ranks differ.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from rich.console import Console

from pacekeeper.controller.core.policy import Mode
from pacekeeper.controller.core.policy_hardware import Confirm
from pacekeeper.controller.simulation import goals
from pacekeeper.controller.simulation.commands import quality_table
from pacekeeper.controller.simulation.detection import Instrumentation
from pacekeeper.controller.simulation.models import JobSimulator, ModelParams
from pacekeeper.controller.simulation.presets import simulation_policy
from pacekeeper.controller.simulation.quality import Quality, combine
from pacekeeper.controller.simulation.runner import simulate
from pacekeeper.controller.simulation.scenarios import (
    ISSUE_18_SCENARIOS,
    SCENARIOS,
    with_options,
)

RESULTS = Path(__file__).parent / "results" / "detection_quality.json"
KERNELS_AT: dict[int, int] = {}
"""Compute kernels per rank where not 200. Until 2026-11-30 16,384-rank runs used 24:
each rank's baselines were updated one key at a time (~15 us each); vectorized, 200
kernels at 16,384 ranks take ~5 s per simulated report window."""

Task = tuple[int, str, int, float, float, int | None]
"""ranks, scenario, seed, duration, step time, fixed kernel sampling (None: the rule)."""
MODE = Mode.DRY_RUN
DDP_OVERLAP = False
COLLECTIVE_TIMING = True
GPU_UUID = True
NOISE: tuple[float | None, float | None] = (None, None)
CONFIRM = Confirm.NONE
"""``--drift-scale``, ``--jitter-scale``: every scenario's drift and jitter multiples,
a noisy scenario's own 2x replaced too (None: the scenario's own)."""
_READ_BY_GOALS = {n for g in goals.RECALL_GOALS for n in g.scenarios} | {
    *goals.NOISY_SCENARIOS,
    *goals.WORKLOAD_SCENARIOS,
    "healthy",
}
SUITES = {
    "all": list(SCENARIOS),
    "original": [n for n in SCENARIOS if n not in ISSUE_18_SCENARIOS],
    "issue18": [n for n in SCENARIOS if n in ISSUE_18_SCENARIOS or n in _READ_BY_GOALS],
}
"""``issue18``: the new scenarios and every one a goal of issue #18 reads."""


def params_for(ranks: int, step_s: float, sample_every: int | None = None) -> ModelParams:
    """The job at ``step_s`` per step; compute stays 80% of the step, as by default."""
    base = ModelParams()
    return ModelParams(
        kernels=KERNELS_AT.get(ranks, 200),
        step_s=step_s,
        compute_s=base.compute_s * step_s / base.step_s,
        kernel_sample_every=sample_every,
        ddp_overlap=DDP_OVERLAP,
    )


def duration_for(name: str, duration_s: float) -> float:
    """The run length: the asked one, or what the scenario needs to mean anything."""
    return max(duration_s, SCENARIOS[name].min_duration_s or 0.0)


def run_one(task: Task) -> tuple[Task, dict[str, Quality], float]:
    ranks, name, seed, duration, step_s, sample_every = task
    params = params_for(ranks, step_s, sample_every)
    t0 = time.perf_counter()
    sc = with_options(SCENARIOS[name], drift_scale=NOISE[0], jitter_scale=NOISE[1])
    policy = simulation_policy(sc.mode or MODE, CONFIRM)
    inst = Instrumentation(collective_timing=COLLECTIVE_TIMING, gpu_uuid=GPU_UUID)
    out = simulate(
        sc, ranks, duration_for(name, duration), seed, policy=policy, params=params,
        instrumentation=inst,
    )  # fmt: skip
    return task, out.quality, time.perf_counter() - t0


def _configure(  # noqa: PLR0917 - the pool's initializer takes them positionally
    mode: str,
    ddp_overlap: bool,
    collective_timing: bool,
    gpu_uuid: bool,
    drift_scale: float | None = None,
    jitter_scale: float | None = None,
    confirm_probe: bool = False,
) -> None:
    """Module settings for this process and, through ``initializer``, the pool's."""
    global MODE, DDP_OVERLAP, COLLECTIVE_TIMING, GPU_UUID, NOISE, CONFIRM
    MODE, DDP_OVERLAP, COLLECTIVE_TIMING = Mode(mode), ddp_overlap, collective_timing
    GPU_UUID, NOISE = gpu_uuid, (drift_scale, jitter_scale)
    CONFIRM = Confirm.PROBE if confirm_probe else Confirm.NONE


def print_goals(
    console: Console, ranks: int, runs: dict[str, list[dict[str, Quality]]]
) -> dict[str, object]:
    """Issue #18's goals at ``ranks``: a table per goal and detector, and the JSON."""
    from rich.table import Table

    detectors = list(next(iter(runs.values()))[0]) if runs else []
    table = Table(title=f"issue #18 goals at {ranks} ranks")
    for col in (
        "goal",
        "detector",
        "runs",
        "found",
        "recall",
        "in time",
        "prec",
        "false act.",
        "worst s",
        "limit s",
        "met",
    ):
        table.add_column(col, justify="left" if col in ("goal", "detector") else "right")
    recall = []
    for g in goals.RECALL_GOALS:
        for det in detectors:
            r = goals.judge_recall(g, det, runs)
            recall.append(r.to_dict())
            if r.runs == 0:
                continue
            table.add_row(
                g.name if det == detectors[0] else "", det, str(r.runs),
                f"{r.found}/{r.faulty}", f"{r.recall:.2f}" if r.recall is not None else "-",
                f"{r.recall_in_time:.2f}" if r.recall_in_time is not None else "-",
                f"{r.precision:.2f}", str(r.false_actions),
                "-" if r.worst_detect_s is None else f"{r.worst_detect_s:.0f}",
                f"{g.find_within_s:.0f}",
                "yes" if r.met else (f"no ({len(r.missing)} not run)" if r.missing else "no"),
            )  # fmt: skip
    console.print(table)
    noisy = [goals.false_actions(det, runs) for det in detectors]
    workload = {det: goals.node_actions_on_workload(det, runs) for det in detectors}
    for fa in noisy:
        if fa.scenarios:
            console.print(
                f"{ranks} ranks, {fa.detector}: {fa.false_actions} disruptive false actions in "
                f"{fa.gpu_days:.0f} GPU-days of noisy runs ({', '.join(fa.scenarios)}; the goal "
                f"asks 0 in {goals.FALSE_ACTION_GPU_DAYS:,.0f})"
            )
    hw = workload.get("pacekeeper", {})
    if hw:
        console.print(
            f"{ranks} ranks, pacekeeper: node actions where the workload alone differs: "
            + ", ".join(f"{n} {c}" for n, c in hw.items())
        )
    restart = next(g for g in goals.RECALL_GOALS if g.name == "surviving a restart")
    recovered = {
        n: sum(q["pacekeeper"].false_recoveries for q in runs[n] if "pacekeeper" in q)
        for n in restart.scenarios
        if n in runs
    }
    if recovered:
        console.print(
            f"{ranks} ranks, pacekeeper: 'Recovered' on the still-slow GPU after a restart: "
            + ", ".join(f"{n} {c}" for n, c in recovered.items())
        )
    return {
        "ranks": ranks,
        "recall": recall,
        "falseRecoveriesAfterRestart": recovered,
        "noisyFalseActions": [fa.to_dict() for fa in noisy],
        "nodeActionsOnWorkload": workload,
    }


def main() -> None:
    if "--presets" not in sys.argv[1:]:
        from _sampled_quality import main as sampled_main

        sampled_main(sys.argv[1:])
        return
    sys.argv.remove("--presets")
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, nargs="+", default=[1024, 16384])
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--seeds-16k", type=int, default=None, help="seeds at 16,384 ranks")
    ap.add_argument("--duration", type=float, default=1800.0)
    ap.add_argument("--scenarios", nargs="+", default=None, help="default: the --suite's")
    ap.add_argument("--suite", choices=list(SUITES), default="all")
    ap.add_argument("--jobs", type=int, default=1, help="processes (one run each)")
    ap.add_argument("--mode", choices=["dry-run", "enforce"], default="dry-run")
    ap.add_argument(
        "--confirm-probe",
        action="store_true",
        help="the policy's node actions need the job's confirmation probe (confirm: probe; "
        "asked and answered only in enforce mode)",
    )
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument(
        "--step-s",
        type=float,
        default=ModelParams().step_s,
        help="step time; kernels are sampled as the CUPTI backend would (cupti_ext.sampling)",
    )
    ap.add_argument(
        "--kernel-sample-every",
        type=int,
        default=None,
        help="trace kernels in one step in N instead (a fixed N, for comparison)",
    )
    ap.add_argument(
        "--ddp-overlap",
        action="store_true",
        help="the gradient all-reduce runs inside backward (its wait in forward_backward)",
    )
    ap.add_argument(
        "--no-collective-timing",
        action="store_true",
        help="the job never turned the detector's collective timing on (raw section medians)",
    )
    ap.add_argument(
        "--no-gpu-uuid",
        action="store_true",
        help="reports without each rank's GPU identity (no memory of hardware)",
    )
    ap.add_argument(
        "--drift-scale",
        type=float,
        default=None,
        help="every scenario's drift amplitude: the model's x this (replaces a scenario's own)",
    )
    ap.add_argument(
        "--jitter-scale",
        type=float,
        default=None,
        help="every scenario's step, kernel and section jitter: the model's x this",
    )
    args = ap.parse_args()
    if args.scenarios is None:
        args.scenarios = SUITES[args.suite]
    unknown = [n for n in args.scenarios if n not in SCENARIOS]
    if unknown:
        ap.error(f"unknown scenario {unknown[0]!r}; known: {', '.join(SCENARIOS)}")
    settings = (
        args.mode,
        args.ddp_overlap,
        not args.no_collective_timing,
        not args.no_gpu_uuid,
        args.drift_scale,
        args.jitter_scale,
        args.confirm_probe,
    )
    _configure(*settings)
    console = Console(width=132)

    def sample_every_at(ranks: int) -> int:
        params = params_for(ranks, args.step_s, args.kernel_sample_every)
        return JobSimulator(1, params=params).kernel_sample_every

    def seeds_at(ranks: int) -> int:
        return int(args.seeds_16k if ranks >= 16384 and args.seeds_16k else args.seeds)

    tasks = [
        (r, s, seed, args.duration, args.step_s, args.kernel_sample_every)
        for r in args.ranks
        for s in args.scenarios
        for seed in range(seeds_at(r))
    ]
    done: dict[Task, tuple[dict[str, Quality], float]] = {}
    t_all = time.perf_counter()
    if args.jobs > 1:
        with ProcessPoolExecutor(
            max_workers=args.jobs, initializer=_configure, initargs=settings
        ) as pool:
            for task, got, wall in pool.map(run_one, tasks):
                done[task] = (got, wall)
                console.log(f"{task[0]} ranks {task[1]} seed {task[2]}: {wall:.0f}s")
    else:
        for t in tasks:
            task, got, wall = run_one(t)
            done[task] = (got, wall)
            console.log(f"{task[0]} ranks {task[1]} seed {task[2]}: {wall:.0f}s")
    results: list[dict[str, object]] = []
    pooled: list[dict[str, object]] = []
    goal_docs: list[dict[str, object]] = []
    for ranks in args.ranks:
        kernels = KERNELS_AT.get(ranks, 200)
        rows: list[tuple[str, str, Quality]] = []
        per_detector: dict[str, list[Quality]] = {}
        by_scenario: dict[str, list[dict[str, Quality]]] = {}
        for name in args.scenarios:
            runs = [
                done[(ranks, name, seed, args.duration, args.step_s, args.kernel_sample_every)]
                for seed in range(seeds_at(ranks))
            ]
            by_scenario[name] = [r[0] for r in runs]
            for det in runs[0][0]:
                q = combine(r[0][det] for r in runs)
                per_detector.setdefault(det, []).append(q)
                rows.append((name, det, q))
                results.append(
                    {
                        "ranks": ranks,
                        "scenario": name,
                        "detector": det,
                        "seeds": seeds_at(ranks),
                        "durationS": duration_for(name, args.duration),
                        "mode": (SCENARIOS[name].mode or Mode(args.mode)).value,
                        "kernels": kernels,
                        "stepS": args.step_s,
                        "kernelSampleEvery": sample_every_at(ranks),
                        "wallS": round(sum(r[1] for r in runs), 1),
                        **q.to_dict(),
                    }
                )
        title = f"detection quality at {ranks} ranks ({seeds_at(ranks)} seeds, {args.mode})"
        console.print(quality_table(title, rows))
        for det, qs in per_detector.items():
            total = combine(qs)
            # Rule of three: zero events in n trials bounds the rate below 3/n (95%).
            bound = 1000.0 * max(3, total.false_actions * 2) / total.gpu_days
            pooled.append(
                {
                    "ranks": ranks,
                    "detector": det,
                    "gpuDays": round(total.gpu_days, 1),
                    "falseActions": total.false_actions,
                    "falseActionsPer1000GpuDays": total.false_actions_per_1000_gpu_days,
                    "upper95Per1000GpuDays": bound if total.false_actions == 0 else None,
                }
            )
            console.print(
                f"{ranks} ranks, {det}: {total.false_actions} false actions in "
                f"{total.gpu_days:.0f} GPU-days (all scenarios) = "
                f"{total.false_actions_per_1000_gpu_days:.2f} per 1,000 GPU-days"
                + (f" (95% upper bound {bound:.2f})" if total.false_actions == 0 else "")
            )
        ours = combine(per_detector.get("pacekeeper", []))
        console.print(
            f"{ranks} ranks, pacekeeper: {ours.hardware_actions} node actions, "
            f"{ours.probed_hardware_actions} of them confirmed by the job's probe"
        )
        goal_docs.append(print_goals(console, ranks, by_scenario))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "benchmark": "detection_quality",
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "jobs": args.jobs,
        "wallS": round(time.perf_counter() - t_all, 1),
        "windowS": ModelParams().window_s,
        "policy": simulation_policy(MODE, CONFIRM).model_dump(
            mode="json", by_alias=True, exclude_defaults=True
        ),
        "mode": args.mode,
        "ddpOverlap": args.ddp_overlap,
        "collectiveTiming": not args.no_collective_timing,
        "gpuUuid": not args.no_gpu_uuid,
        "driftScale": args.drift_scale,
        "jitterScale": args.jitter_scale,
        "pooledFalseActions": pooled,
        "goals": goal_docs,
        "results": results,
    }
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
