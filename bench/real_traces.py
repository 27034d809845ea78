"""Backtest on real 3D-parallel traces: our policies and NVRx's rules side by side.

Two traces from the public artifact of "Understanding Stragglers in Large Model Training
Using What-if Analysis" (OSDI'25, Apache-2.0), read from ../shared/data (never copied
into the repo): AR — one worker artificially slowed (trace rank 0); SE — sequence-length
imbalance and a long last stage, no hardware fault. Each goes through
``pacekeeper trace import`` (per-microbatch forward/backward compute as the sections
``forward``/``backward`` and as GPU work, send/receive and collectives as wait, every
rank with its dp/pp/tp coordinates), the detector's own scoring and the decision core
(``replay``), under each example policy of docs/policies/ and under NVRx's rule on the
same windows. A synthetic pipeline job built here adds the case the issue found: the
last stage has more work and both data-parallel replicas of it are equally slow.

Every case runs twice under each policy: with the ranks' coordinates, and without them
(``coords`` no: what a drop-in job that never called ``set_topology`` reports, where
only the controller's pattern test, ``structure_pattern``, can tell a heavier stage
from a slow node).

What must hold, with and without coordinates:
* AR: the culprit acted on (any ladder step, taken or would-be) at most two windows
  after the first report that shows it slow, and no other rank or node acted on;
* SE: no rank or node action at all;
* pipeline: no hardware (node) action, under every node layout (and no rank action);
* healthy (simulated, 1,024 ranks, 30 min) under enforce-gpu.yaml: no action.

    .venv/bin/python bench/real_traces.py [--steps-per-window 8]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _table import emit

from pacekeeper.controller.core.decisions import Decision, Verdict
from pacekeeper.controller.core.policy import (
    DISRUPTIVE_ACTIONS,
    NODE_ACTIONS,
    Mode,
    PolicyDocument,
    Reference,
    load_policy_file,
)
from pacekeeper.controller.simulation.nvrx_rule import NVRX_RULES, NvrxScorer, flagged
from pacekeeper.controller.simulation.presets import simulation_policy
from pacekeeper.controller.simulation.runner import effective_verdict, replay, simulate
from pacekeeper.controller.traces.parquet import (
    JobMeta,
    operations_from_columns,
    read_meta,
    read_parquet,
)
from pacekeeper.controller.traces.reports import trace_reports
from pacekeeper.controller.traces.windows import Operations, Trace, cut

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT / ".." / "shared" / "data" / "bytedance-straggler-traces"
POLICIES = tuple(sorted(p.stem for p in (ROOT / "docs" / "policies").glob("*.yaml")))
"""Every example policy of docs/policies/ (a new one is backtested as it lands)."""
LAYOUTS = {"AR": (8, 4), "SE": (8, 4), "pipeline": (2, 4, 8)}
"""GPUs per node tried per case (node = global rank // this)."""


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    meta: JobMeta
    ops: Operations
    coords: dict[int, dict[str, int]]
    culprits: frozenset[int]


@dataclass(frozen=True, slots=True)
class Outcome:
    windows: int
    first_named: int | None
    """1-based window where the culprit first appears (below, named by a decision)."""
    acted_at: int | None
    """1-based window of the first action on the culprit (any ladder step)."""
    disrupted_at: int | None
    """1-based window of the first disruptive action on it (restart, taint, drain, cordon)."""
    others: list[str]
    """Ranks or nodes acted on that hold no culprit."""
    hardware: int
    """Node actions (taint, drain, cordon) on anyone."""
    holds: str

    def row(self) -> dict[str, Any]:
        late = (
            None
            if self.acted_at is None or self.first_named is None
            else self.acted_at - self.first_named
        )
        return {
            "windows": self.windows,
            "culprit named": self.first_named or "-",
            "culprit acted": self.acted_at or "-",
            "culprit disrupted": self.disrupted_at or "-",
            "windows to act": "-" if late is None else late,
            "others acted on": len(self.others),
            "HW actions": self.hardware,
            "main hold": self.holds,
        }


def load_case(name: str, culprits: frozenset[int]) -> Case:
    meta = read_meta(TRACES / f"meta-{name}.yaml")
    ops, coords = read_parquet(TRACES / f"trace-{name}.parquet", meta)
    return Case(name, meta, ops, coords, culprits)


def pipeline_case(seed: int = 0, steps: int = 48, extra: float = 0.5) -> Case:
    """dp 2 x pp 4 x tp 2, every rank recorded; the last stage computes ``extra`` more
    on both replicas (the LM head and the loss). Waits make the step synchronous."""
    meta = JobMeta(dp=2, pp=4, tp=2, world_size=16)
    rng = np.random.default_rng(seed)
    topo = meta.topology
    speed = np.exp(0.005 * rng.standard_normal(meta.world_size))  # same-SKU spread
    rows: dict[str, list[Any]] = {c: [] for c in ("dp_rank", "stage", "rank", "step")}
    rows |= {"optype": [], "start_ts": [], "duration": []}
    micro = 8
    for step in range(200, 200 + steps):  # the job has run 200 steps before the trace
        work = {r: [] for r in range(meta.world_size)}
        for r in range(meta.world_size):
            c = topo.coords(r)
            scale = speed[r] * (1.0 + extra if c["pp"] == meta.pp - 1 else 1.0)
            for _ in range(micro):
                for op, base in (("forward-compute", 1.0), ("backward-compute", 2.0)):
                    work[r].append((op, base * scale * (1 + 0.01 * rng.standard_normal())))
        busy = {r: sum(d for _, d in ops) for r, ops in work.items()}
        step_s = max(busy.values()) + 0.5
        for r, computed in work.items():
            c = topo.coords(r)
            waits = [("forward-recv", step_s - busy[r] - 0.5), ("grads-reduce-scatter", 0.5)]
            t = 0.0
            for op, d in [*computed, *waits]:
                for key, value in zip(rows, (c["dp"], c["pp"], r, step, op, t, d), strict=True):
                    rows[key].append(value)
                t += d
    columns = {k: np.asarray(v) for k, v in rows.items()}
    ops_, coords = operations_from_columns(columns, meta)
    return Case("pipeline", meta, ops_, coords, frozenset())


def our_outcome(trace: Trace, case: Case, doc: PolicyDocument, gpus: int) -> Outcome:
    reports = list(trace_reports(trace, source="bench", job_name=case.name, gpus_per_node=gpus))
    window_of = {}
    for i, r in enumerate(reports, start=1):
        window_of[r.sequence] = i
    decisions = replay(reports, doc)
    culprit_nodes = {f"node/node-{r // gpus:05d}" for r in case.culprits}
    first_named = acted_at = disrupted_at = None
    others: set[str] = set()
    hardware = 0
    holds: dict[str, int] = {}
    for _t, d in decisions:
        w = window_of.get(int(d.evidence.get("sequence", -1)))
        ranks = {int(r) for r in d.evidence.get("ranks", []) if isinstance(r, int)}
        on_culprit = d.subject in culprit_nodes and bool(ranks & case.culprits or not ranks)
        if on_culprit and w is not None and first_named is None:
            first_named = w
        if _acts(d):
            if on_culprit:
                acted_at = acted_at or w
                if d.action in DISRUPTIVE_ACTIONS:
                    disrupted_at = disrupted_at or w
            elif d.subject != "job":
                others.add(d.subject)
            if d.action in NODE_ACTIONS:
                hardware += 1
        elif d.subject == "job":
            holds[d.reason.value] = holds.get(d.reason.value, 0) + 1
    main = max(holds, key=lambda k: holds[k]) if holds else "-"
    return Outcome(
        len(reports), first_named, acted_at, disrupted_at, sorted(others), hardware, main
    )


def _acts(d: Decision) -> bool:
    return d.action is not None and effective_verdict(d) is Verdict.ACT


def nvrx_outcome(trace: Trace, case: Case, threshold_rule: Any) -> Outcome:
    scorer = NvrxScorer()
    first = None
    others: set[str] = set()
    for i, w in enumerate(trace.windows, start=1):
        hit = np.flatnonzero(flagged(scorer.score(w.summary), threshold_rule))
        ranks = {trace.rank_ids[j] for j in hit.tolist()}
        if ranks & case.culprits and first is None:
            first = i
        others |= {f"rank/{r}" for r in ranks - case.culprits}
    # NeMo's stop_if_detected stops the job at the first flag: acting and disrupting.
    return Outcome(len(trace.windows), first, first, first, sorted(others), 0, "-")


def verdict(case: Case, out: Outcome) -> str:
    if case.name == "AR":
        ok = out.acted_at is not None and out.first_named is not None
        ok = ok and out.acted_at - out.first_named <= 2 and not out.others
    elif case.name == "SE":
        ok = out.acted_at is None and not out.others and out.hardware == 0
    else:  # the pipeline: the stage is the workload, no action of any kind
        ok = out.hardware == 0 and not out.others
    return "pass" if ok else "FAIL"


def with_reference(doc: PolicyDocument, ref: Reference) -> PolicyDocument:
    policies = {
        name: p.model_copy(update={"score": p.score.model_copy(update={"reference": ref})})
        for name, p in doc.policies.items()
    }
    return doc.model_copy(update={"policies": policies})


Run = Callable[[Trace, Case, int], Outcome]


def policies() -> list[tuple[str, PolicyDocument]]:
    """Every example policy of docs/policies/ and the detection-quality benchmark's own
    (GPU individual, peer check, host side)."""
    out = [(n, load_policy_file(ROOT / "docs" / "policies" / f"{n}.yaml")) for n in POLICIES]
    return [*out, ("benchmark policy", simulation_policy(Mode.ENFORCE))]


def detectors() -> list[tuple[str, bool | None, Run]]:
    """(name, reads the topology — None: run with and without it —, run). "before" is
    enforce-gpu.yaml as it was: against the best rank, on reports without coordinates
    (schemaVersion 1)."""
    out: list[tuple[str, bool | None, Run]] = []
    for name, doc in policies():
        out.append((name, None, lambda t, c, g, doc=doc: our_outcome(t, c, doc, g)))
    old = with_reference(load_policy_file(ROOT / "docs/policies/enforce-gpu.yaml"), Reference.BEST)
    out.append(("enforce-gpu, best rank", True, lambda t, c, g: our_outcome(t, c, old, g)))
    out.append(("enforce-gpu before", False, lambda t, c, g: our_outcome(t, c, old, g)))
    for rule in NVRX_RULES:
        out.append((rule.name, False, lambda t, c, g, rule=rule: nvrx_outcome(t, c, rule)))
    return out


def traces_of(case: Case, steps_per_window: int) -> dict[bool, Trace]:
    """The case's windows with its coordinates (True) and without them (False)."""
    return {
        topology: cut(
            case.ops,
            steps_per_window=steps_per_window,
            world_size=case.meta.world_size,
            coords=case.coords if topology else None,
        )
        for topology in (True, False)
    }


def case_rows(case: Case, steps_per_window: int) -> list[dict[str, Any]]:
    """One row per node layout, detector and (for ours) with and without coordinates."""
    traces = traces_of(case, steps_per_window)
    rows = []
    for gpus in LAYOUTS[case.name]:
        for name, topology, run in detectors():
            if name.startswith("nvrx") and gpus != LAYOUTS[case.name][0]:
                continue  # NVRx names ranks: the node layout changes nothing
            for coords in (True, False) if topology is None else (topology,):
                out = run(traces[coords], case, gpus)
                rows.append(
                    {"case": case.name, "GPUs/node": gpus, "coords": "yes" if coords else "no"}
                    | {"detector": name}
                    | out.row()
                    | {"verdict": verdict(case, out)}
                )
    return rows


def healthy_rows() -> list[dict[str, Any]]:
    """The simulator's healthy 1,024-rank job, 30 min, under enforce-gpu.yaml as it is
    and as it was (against the best rank)."""
    doc = load_policy_file(ROOT / "docs/policies/enforce-gpu.yaml")
    rows = []
    for name, policy in (
        ("enforce-gpu", doc),
        ("enforce-gpu before", with_reference(doc, Reference.BEST)),
    ):
        out = simulate("healthy", 1024, 1800.0, 0, policy=policy)
        acted = {d.subject for d in out.record.decisions if _acts(d)}
        hardware = sum(1 for f in out.record.ours if f.hardware)
        rows.append(
            {
                "case": "healthy 1,024 (sim)",
                "GPUs/node": 8,
                "coords": "no",
                "detector": name,
                "windows": len(out.record.times_s),
                "culprit named": "-",
                "culprit acted": "-",
                "culprit disrupted": "-",
                "windows to act": "-",
                "others acted on": len(acted),
                "HW actions": hardware,
                "main hold": "-",
                "verdict": "pass" if not acted else "FAIL",
            }
        )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps-per-window", type=int, default=8)
    ap.add_argument("--skip-healthy", action="store_true", help="leave out the 1,024-rank run")
    args = ap.parse_args(argv)
    if not TRACES.is_dir():
        print(f"traces not found at {TRACES} (../shared/data/bytedance-straggler-traces)")
        return 2
    cases = [
        load_case("AR", frozenset({0})),
        load_case("SE", frozenset()),
        pipeline_case(),
    ]
    rows = [row for case in cases for row in case_rows(case, args.steps_per_window)]
    if not args.skip_healthy:
        rows.extend(healthy_rows())
    emit(
        "real_traces",
        rows,
        title="Real 3D-parallel traces (OSDI'25 artifact) and a synthetic pipeline job",
        meta={
            "traces": "ByteDance-Seed/StragglerAnalysis AR and SE (Apache-2.0)",
            "steps_per_window": args.steps_per_window,
            "policies": [f"docs/policies/{p}.yaml" for p in POLICIES]
            + ["presets.simulation_policy(enforce) (the benchmark policy)"],
            "culprit": {"AR": [0], "SE": [], "pipeline": []},
            "coords": "yes: every rank's dp/pp/tp; no: none (a drop-in job's reports)",
        },
    )
    ours = [
        r
        for r in rows
        if r["detector"] in (*POLICIES, "benchmark policy", "enforce-gpu, best rank")
    ]
    return 0 if all(r["verdict"] == "pass" for r in ours) else 1


if __name__ == "__main__":
    raise SystemExit(main())
