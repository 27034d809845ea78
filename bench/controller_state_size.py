"""A large job's controller state over many reports in their bounded Kubernetes form (issue 42).

A job of N ranks (8 a node, scores drawn afresh each report from 0.97-1.0, as
``controller_decide`` draws them) reports R times; each report goes through
``compaction.compact`` as the reporter writes it to the custom resource's status (a few
hundred of the worst ranks listed, a different few hundred each time), then through
``engine.decide`` under docs/policies/enforce-recommended.yaml (the sequential test on)
with the job's last 8 reports, as the controller decides. Printed every ``--every``
reports: the ranks listed, the job state's JSON size (what the job's ConfigMap holds,
which the API server caps at 1 MiB), the sequential tests' share of it, and decide's time.

``--advance-at 16384 37000 131072`` times one ``sequential.advance`` of a full report
at each size instead (after 12 reports of the same noise, so every rank has a history;
median of 3): what a report listing every rank costs the test (the Ray path's report,
compacted past 16 MiB, lists ~37,000).

Run: .venv/bin/python bench/controller_state_size.py [--ranks 16384] [--reports 60]
     .venv/bin/python bench/controller_state_size.py --advance-at 16384 37000 131072
Results: bench/results/controller_state_size.json (``_advance``)
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _table import emit
from controller_decide import T0, make_report

from pacekeeper.controller.core.engine import decide
from pacekeeper.controller.core.ids import JobKey, NodeName
from pacekeeper.controller.core.observations import ClusterView, JobView, NodeView, Window
from pacekeeper.controller.core.policy import load_policy_file
from pacekeeper.controller.core.state import State
from pacekeeper.detector.compaction import compact

POLICY = Path(__file__).resolve().parents[1] / "docs" / "policies" / "enforce-recommended.yaml"
CONFIGMAP_BYTES = 1024 * 1024


def run(ranks: int, reports: int, every: int) -> list[dict[str, Any]]:
    rng = random.Random(0)
    doc = load_policy_file(POLICY)
    nodes = {
        NodeName(f"gpu-{n:05d}"): NodeView(NodeName(f"gpu-{n:05d}")) for n in range(ranks // 8)
    }
    cluster = ClusterView(nodes=nodes)
    state, window = State(), []
    rows = []
    for seq in range(1, reports + 1):
        window = [*window, compact(make_report(ranks, seq, {}, rng))][-8:]
        job = JobView(JobKey("ml/llm"), tuple(window), namespace="ml", name="llm", started_at=T0)
        t0 = time.perf_counter()
        state = decide(Window((job,), cluster), state, doc, window[-1].generated_at).next_state
        ms = (time.perf_counter() - t0) * 1e3
        if seq == 1 or seq % every == 0:
            whole = state.to_dict()
            tests = whole["jobs"]["ml/llm"].get("tests", {})
            size = len(json.dumps(whole))
            rows.append(
                {
                    "report": seq,
                    "ranks listed": len(window[-1].ranks),
                    "ranks with a test": len(tests),
                    "state KiB": round(size / 1024, 1),
                    "tests KiB": round(len(json.dumps(tests)) / 1024, 1),
                    "of a ConfigMap": round(size / CONFIGMAP_BYTES, 3),
                    "decide ms": round(ms, 1),
                }
            )
            print(rows[-1], flush=True)
    return rows


def advance_cost(ranks: int, warm: int = 12, timed: int = 3) -> dict[str, Any]:
    import numpy as np

    from pacekeeper.controller.core import sequential

    rng = np.random.default_rng(0)
    shift = sequential.shift_for(0.9)
    tests: dict[Any, Any] = {}
    times = []
    for i in range(warm + timed):
        scores = dict(enumerate(rng.uniform(0.97, 1.0, ranks).tolist()))
        t0 = time.perf_counter()
        tests = sequential.advance(tests, scores, shift=shift)
        if i >= warm:
            times.append((time.perf_counter() - t0) * 1e3)
    return {
        "ranks": ranks,
        "reports before": warm,
        "advance ms (median)": round(sorted(times)[len(times) // 2], 1),
        "advance ms (max)": round(max(times), 1),
        "tests KiB": round(len(json.dumps({str(r): t.history for r, t in tests.items()})) / 1024),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=16384)
    ap.add_argument("--reports", type=int, default=60)
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--advance-at", type=int, nargs="*", default=[])
    ap.add_argument("--warm", type=int, default=12, help="reports before the timed ones")
    args = ap.parse_args(argv)
    if args.advance_at:
        cost = [advance_cost(n, warm=args.warm) for n in args.advance_at]
        emit("controller_state_size_advance", cost, title="sequential.advance of a full report")
        return 0
    rows = run(args.ranks, args.reports, args.every)
    emit(
        "controller_state_size",
        rows,
        title=f"job state over bounded reports ({args.ranks} ranks)",
        meta={"ranks": args.ranks, "reports": args.reports, "policy": POLICY.name},
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
