"""Detection quality, pacekeeper vs NVRx's rules, per scenario at 1,024 and 16,384 ranks.

Every scenario runs through the simulator (controller/simulation), the real detector
scoring and the real decision core; NVRx's published rule (0.75 on all four scores as
NVRx defaults, 0.75 on GPU scores only, and 0.7 on GPU scores as NeMo recipes use) is
scored on the same traces. Prints a table and writes bench/results/detection_quality.json.

    .venv/bin/python bench/detection_quality.py [--ranks 1024 16384] [--seeds 2] [--jobs 1]
        [--ddp-overlap] [--no-collective-timing]

The simulated job times its collectives as the detector does by default (sections
scored on work, ``waitShare`` per rank); ``--no-collective-timing`` plays a job that
never turned that on, ``--ddp-overlap`` one whose gradient all-reduce runs inside
backward (docs/simulator.md).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from rich.console import Console

from pacekeeper.controller.core.policy import Mode
from pacekeeper.controller.simulation.commands import quality_table
from pacekeeper.controller.simulation.detection import Instrumentation
from pacekeeper.controller.simulation.models import JobSimulator, ModelParams
from pacekeeper.controller.simulation.presets import simulation_policy
from pacekeeper.controller.simulation.quality import Quality, combine
from pacekeeper.controller.simulation.runner import simulate
from pacekeeper.controller.simulation.scenarios import SCENARIOS

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


def run_one(task: Task) -> tuple[Task, dict[str, Quality], float]:
    ranks, name, seed, duration, step_s, sample_every = task
    params = params_for(ranks, step_s, sample_every)
    t0 = time.perf_counter()
    policy = simulation_policy(MODE)
    out = simulate(
        name, ranks, duration, seed, policy=policy, params=params,
        instrumentation=Instrumentation(collective_timing=COLLECTIVE_TIMING),
    )  # fmt: skip
    return task, out.quality, time.perf_counter() - t0


def _configure(mode: str, ddp_overlap: bool, collective_timing: bool) -> None:
    """Module settings for this process and, through ``initializer``, the pool's."""
    global MODE, DDP_OVERLAP, COLLECTIVE_TIMING
    MODE, DDP_OVERLAP, COLLECTIVE_TIMING = Mode(mode), ddp_overlap, collective_timing


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, nargs="+", default=[1024, 16384])
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--seeds-16k", type=int, default=None, help="seeds at 16,384 ranks")
    ap.add_argument("--duration", type=float, default=1800.0)
    ap.add_argument("--scenarios", nargs="+", default=list(SCENARIOS))
    ap.add_argument("--jobs", type=int, default=1, help="processes (one run each)")
    ap.add_argument("--mode", choices=["dry-run", "enforce"], default="dry-run")
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
    args = ap.parse_args()
    settings = (args.mode, args.ddp_overlap, not args.no_collective_timing)
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
    for ranks in args.ranks:
        kernels = KERNELS_AT.get(ranks, 200)
        rows: list[tuple[str, str, Quality]] = []
        per_detector: dict[str, list[Quality]] = {}
        for name in args.scenarios:
            runs = [
                done[(ranks, name, seed, args.duration, args.step_s, args.kernel_sample_every)]
                for seed in range(seeds_at(ranks))
            ]
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
                        "durationS": args.duration,
                        "kernels": kernels,
                        "stepS": args.step_s,
                        "kernelSampleEvery": sample_every_at(ranks),
                        "mode": args.mode,
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
    args.out.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "benchmark": "detection_quality",
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "jobs": args.jobs,
        "wallS": round(time.perf_counter() - t_all, 1),
        "windowS": ModelParams().window_s,
        "policy": simulation_policy(MODE).model_dump(
            mode="json", by_alias=True, exclude_defaults=True
        ),
        "mode": args.mode,
        "ddpOverlap": args.ddp_overlap,
        "collectiveTiming": not args.no_collective_timing,
        "pooledFalseActions": pooled,
        "results": results,
    }
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
