"""The sampled detection-quality benchmark (``bench/detection_quality.py`` by default).

Scenario ``i`` of the space is ``sampler.sample(space, i)``: its noise family and fault
by stratification, its parameters and seed derived from a hash of ``space/i``. Every
scenario is simulated and scored once and judged by every ``--policy`` (default: the
simulator's benchmark policy) and by NVRx's rules (``policy_runs.judge_policies``).
Runs enough scenarios for ``--gpu-days`` (10,000) over the space, rounded up to whole
rounds of every family x fault cell. Prints one table per policy and NVRx rule, writes
bench/results/detection_quality_space.json (``--out``) and beside it the docs' table
(``.md``: one policy's family x fault cells beside NVRx's rules, and issue #38's
verdicts; ``controller/simulation/sampled_table.py``).

    .venv/bin/python bench/detection_quality.py [--policy PATH ...] [--with-doc-policies]
        [--jobs 2] [--gpu-days 10000] [--runs N] [--first I] [--indices I ...] [--quick]
        [--detector NAME]
    .venv/bin/python bench/detection_quality.py --merge a.json b.json --out all.json
    .venv/bin/python bench/detection_quality.py --markdown all.json [--detector NAME]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.table import Table

from pacekeeper.controller.core.policy import PolicyDocument, load_policy_file
from pacekeeper.controller.simulation import sampler
from pacekeeper.controller.simulation.models import ModelParams
from pacekeeper.controller.simulation.policy_runs import judge_policies
from pacekeeper.controller.simulation.presets import simulation_policy
from pacekeeper.controller.simulation.quality import SECONDS_PER_DAY
from pacekeeper.controller.simulation.sampled_quality import (
    ACT_WITHIN_S,
    FIND_WITHIN_S,
    Cell,
    RunResult,
    cells,
)
from pacekeeper.controller.simulation.sampled_table import table as docs_table

RESULTS = Path(__file__).parent / "results" / "detection_quality_space.json"
DOC_POLICIES = Path(__file__).resolve().parent.parent / "docs" / "policies"
BENCHMARK = "benchmark"
_POLICIES: dict[str, PolicyDocument] = {}
_SETUP: dict[str, object] = {}


def load_policies(paths: list[Path]) -> dict[str, PolicyDocument]:
    """The benchmark policy when none is given; else each file by its stem."""
    if not paths:
        return {BENCHMARK: simulation_policy()}
    out = {}
    for p in paths:
        if str(p) == BENCHMARK:  # the word, not a file: the simulator's own policy
            out[BENCHMARK] = simulation_policy()
            continue
        name = p.stem if p.stem not in out else str(p)
        out[name] = load_policy_file(p)
    return out


def _configure(paths: list[str], setup: dict[str, object]) -> None:
    global _POLICIES, _SETUP
    _POLICIES = load_policies([Path(p) for p in paths])
    _SETUP = setup


def run_index(index: int) -> tuple[int, list[RunResult], float]:
    s = sampler.sample(str(_SETUP["space"]), index)
    ranks, duration = int(str(_SETUP["ranks"])), float(str(_SETUP["duration"]))
    params = ModelParams(kernels=int(str(_SETUP["kernels"])))
    t0 = time.perf_counter()
    got = judge_policies(s.scenario, ranks, duration, s.seed, _POLICIES, params=params)
    out = [RunResult.of(det, s.family, s.fault, q) for det, q in got.items()]
    return index, out, time.perf_counter() - t0


def _fmt(v: float | None, spec: str) -> str:
    if v is None:
        return "-"
    return "never" if math.isinf(v) else format(v, spec)


def table(title: str, cs: list[Cell]) -> Table:
    t = Table(title=title)
    for col in ("family", "fault", "runs", f"found<={FIND_WITHIN_S:.0f}s",
                f"acted<={ACT_WITHIN_S:.0f}s", "worst find s", "median act s", "max act s",
                "false disr.", "GPU-days", "per GPU-day", "upper 95%"):  # fmt: skip
        t.add_column(col, justify="left" if col in ("family", "fault") else "right")
    for c in cs:
        t.add_row(
            c.family, c.fault, str(c.runs),
            _fmt(c.recall_found, ".2f"), _fmt(c.recall_acted, ".2f"),
            _fmt(c.worst_find_s, ".0f"), _fmt(c.median_act_s, ".0f"), _fmt(c.max_act_s, ".0f"),
            str(c.false_disruptions), f"{c.gpu_days:.0f}", f"{c.rate:.2e}",
            _fmt(c.upper95, ".2e"),
        )  # fmt: skip
    return t


def runs_for(gpu_days: float, ranks: int, duration_s: float) -> int:
    """Scenarios for ``gpu_days`` over the space, in whole rounds of every cell."""
    per_run = ranks * duration_s / SECONDS_PER_DAY
    cell_count = len(sampler.FAMILIES) * len(sampler.FAULTS)
    return max(1, math.ceil(gpu_days / per_run / cell_count)) * cell_count


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--policy", type=Path, action="append", default=[],
                    help="a policy file or 'benchmark' (repeatable; default: benchmark)",
                    )  # fmt: skip
    ap.add_argument("--with-doc-policies", action="store_true",
                    help="also the benchmark policy and every docs/policies/*.yaml")  # fmt: skip
    ap.add_argument("--space", default="issue38", help="names the sampled space (seeds)")
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--duration", type=float, default=1800.0)
    ap.add_argument("--gpu-days", type=float, default=10000.0)
    ap.add_argument("--runs", type=int, default=None, help="scenarios (default: --gpu-days')")
    ap.add_argument("--first", type=int, default=0, help="first scenario index (to split)")
    ap.add_argument("--indices", type=int, nargs="+", default=None,
                    help="exactly these scenario indices (instead of --first/--runs)")  # fmt: skip
    ap.add_argument("--kernels", type=int, default=ModelParams().kernels)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--quick", action="store_true",
                    help="64 ranks, 10 min, one round of cells (tests)")  # fmt: skip
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--merge", type=Path, nargs="+", default=None,
                    help="no runs: tables over these earlier outputs' runs (chunks)")  # fmt: skip
    ap.add_argument("--markdown", type=Path, default=None,
                    help="no runs: docs' family x fault table of this output")  # fmt: skip
    ap.add_argument("--detector", default=None,
                    help="the policy of the docs' table (default: enforce-recommended if "
                         "judged, else the first --policy)")  # fmt: skip
    args = ap.parse_args(argv)
    if args.markdown:
        print(docs_table(json.loads(args.markdown.read_text()), args.detector)[0])
        return
    if args.merge:
        merge(args.merge, args.out, Console(width=150), args.detector)
        return
    if args.quick:
        args.ranks, args.duration, args.kernels = 64, 600.0, 24
        args.runs = args.runs or len(sampler.FAMILIES) * len(sampler.FAULTS)
    paths = [str(p) for p in args.policy]
    if args.with_doc_policies:
        paths = [*paths, *(str(p) for p in sorted(DOC_POLICIES.glob("*.yaml")))]
    runs = args.runs or runs_for(args.gpu_days, args.ranks, args.duration)
    indices = range(args.first, args.first + runs) if args.indices is None else args.indices
    runs = len(indices)
    setup = {"space": args.space, "ranks": args.ranks, "duration": args.duration,
             "kernels": args.kernels}  # fmt: skip
    _configure(paths, setup)
    policies = dict(_POLICIES)
    if args.with_doc_policies and BENCHMARK not in policies:
        _POLICIES[BENCHMARK] = simulation_policy()
        policies = {BENCHMARK: _POLICIES[BENCHMARK], **policies}
        paths = ["", *paths]
    console = Console(width=150)
    results: list[RunResult] = []
    t_all = time.perf_counter()
    walls = []
    if args.jobs > 1:
        init = _init_with_benchmark if args.with_doc_policies else _configure
        with ProcessPoolExecutor(args.jobs, initializer=init, initargs=(paths, setup)) as pool:
            for i, got, wall in pool.map(run_index, indices):
                results.extend(got)
                walls.append(wall)
                console.log(f"scenario {i}: {wall:.1f}s")
    else:
        for i in indices:
            _, got, wall = run_index(i)
            results.extend(got)
            walls.append(wall)
            console.log(f"scenario {i}: {wall:.1f}s")
    all_cells = print_tables(console, results, f"{runs} sampled scenarios, {args.ranks} ranks")
    seeds_per_cell = runs // (len(sampler.FAMILIES) * len(sampler.FAULTS))
    doc = {
        "benchmark": "detection_quality_sampled",
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "jobs": args.jobs,
        "wallS": round(time.perf_counter() - t_all, 1),
        "cpuS": round(sum(walls), 1),
        "space": args.space,
        "ranks": args.ranks,
        "durationS": args.duration,
        "kernels": args.kernels,
        "runs": runs,
        "firstIndex": min(indices),
        "seedsPerCell": seeds_per_cell,
        "findWithinS": FIND_WITHIN_S,
        "actWithinS": ACT_WITHIN_S,
        "ranges": sampler.RANGES,
        "traceFit": sampler.TRACE_FIT,
        "policies": {
            n: d.model_dump(mode="json", by_alias=True, exclude_defaults=True)
            for n, d in policies.items()
        },
        "cells": [c.to_dict() for c in all_cells],
        "scenarios": [sampler.sample(args.space, i).to_dict() for i in indices],
        "runs_": [r.to_dict() for r in results],
    }
    write(doc, args.out, console, args.detector)


def write(doc: dict[str, object], out: Path, console: Console, detector: str | None) -> None:
    """The JSON with issue #38's verdicts for the docs' policy, and its table beside it
    (``out`` with ``.md``)."""
    md, goals = docs_table(doc, detector)
    doc["goals"] = goals
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    out.with_suffix(".md").write_text(md + "\n")
    verdicts = goals["verdicts"]
    assert isinstance(verdicts, list)
    for v in verdicts:
        console.print(f"{goals['detector']}: {'PASS' if v['passed'] else 'FAIL'} {v['name']}")
    console.print(f"wrote {out} and {out.with_suffix('.md')}")


def print_tables(console: Console, results: list[RunResult], what: str) -> list[Cell]:
    all_cells = cells(results)
    for det in dict.fromkeys(r.detector for r in results):
        mine = [c for c in all_cells if c.detector == det]
        console.print(table(f"{det}: {what}", mine))
        total = mine[-1]
        console.print(
            f"{det}: {total.false_disruptions} false disruptions in {total.gpu_days:,.0f} "
            f"GPU-days = {total.rate:.2e}/GPU-day (exact upper 95% {total.upper95:.2e})"
        )
    return all_cells


def merge(paths: list[Path], out: Path, console: Console, detector: str | None = None) -> None:
    """One output from chunks of one space (``--first``/``--runs`` on several machines
    or calls): their runs pooled, the tables and cells over all of them."""
    docs = [json.loads(p.read_text()) for p in paths]
    keys = ("space", "ranks", "durationS", "kernels", "policies")
    for p, d in zip(paths[1:], docs[1:], strict=True):
        differ = [k for k in keys if d[k] != docs[0][k]]
        if differ:
            raise SystemExit(f"--merge: {p} differs from {paths[0]} in {', '.join(differ)}")
    # Each chunk's runs are its scenarios' in order, one per detector each; they are kept
    # beside their scenario so the merged runs line up with the sorted scenarios.
    paired = []
    for p, d in zip(paths, docs, strict=True):
        each, rest = divmod(len(d["runs_"]), max(1, len(d["scenarios"])))
        if rest:
            raise SystemExit(
                f"--merge: {p} has {len(d['runs_'])} runs for {len(d['scenarios'])} scenarios"
            )
        runs = d["runs_"]
        paired += [(s, runs[i * each : (i + 1) * each]) for i, s in enumerate(d["scenarios"])]
    paired.sort(key=lambda sr: sr[0]["index"])
    scenarios = [s for s, _ in paired]
    results = [RunResult.from_dict(r) for _, rs in paired for r in rs]
    if len({s["index"] for s in scenarios}) != len(scenarios):
        raise SystemExit("--merge: a scenario index appears in two chunks")
    what = f"{len(scenarios)} sampled scenarios, {docs[0]['ranks']} ranks"
    all_cells = print_tables(console, results, what)
    doc = {**docs[0], "runs": len(scenarios), "firstIndex": scenarios[0]["index"],
           "seedsPerCell": len(scenarios) // (len(sampler.FAMILIES) * len(sampler.FAULTS)),
           "wallS": sum(d["wallS"] for d in docs), "cpuS": sum(d["cpuS"] for d in docs),
           "chunks": [str(p) for p in paths], "cells": [c.to_dict() for c in all_cells],
           "scenarios": scenarios, "runs_": [r.to_dict() for r in results]}  # fmt: skip
    write(doc, out, console, detector)


def _init_with_benchmark(paths: list[str], setup: dict[str, object]) -> None:
    _configure([p for p in paths if p], setup)
    _POLICIES[BENCHMARK] = simulation_policy()
