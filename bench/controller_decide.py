"""Decision time of the pure controller core for one 16,384-rank (or larger) report.

``engine.decide`` on a job of 16,384 ranks (2,048 nodes of 8), each rank with GPU
relative/individual scores and 4 sections. Cases: a healthy job, one slow rank taking a
ladder step, a fleet-wide pattern (structural imbalance), the bounded Kubernetes form
of the report, a recheck without new data, and four new reports at once. Report parsing
is not included (the shell validates a report once when it arrives), but its last step
is: the reports go through ``report_columns.columnar``, as the shell hands a parsed
report to the core, and the row "parse: columns" is that step's time per report. Each
timed call gets report objects the controller has not read before (``unseen``), as a
report that just arrived; ``again ms`` decides the same objects once more. Goal: under
50 ms.

Then the whole in-process ``Reconciler.reconcile_job`` of such a job against the API
harness (`controller_decide_reconcile`): 2,048 pods of 8 ranks, each on a node of its
own, owned by their Job; the real reporter sink writes the report's bounded Kubernetes
form; the reconciler reads pods and nodes from a primed ``WorldCache`` and the report
from the object the watch would hand it. Timed: the reconcile (wall; it includes the
state ConfigMap and display writes to the harness, which runs in this process), and
its parts on the same data: parsing the report, the trust check, ``decide``; "cpu ms"
is the reconciling thread's own CPU time (``time.thread_time``: the harness's share of
the process is not in it).

Run: .venv/bin/python bench/controller_decide.py [ranks] [--repeats N]
     .venv/bin/python bench/controller_decide.py --sizes 16384,131072 [--repeats N]
     .venv/bin/python bench/controller_decide.py [ranks] --baseline DIR [--rounds 5]

Goal per report: under 50 ms up to 16,384 ranks, under 200 ms beyond (issue 42: 131,072
ranks on a 16-core host). Figures go to bench/results/controller_decide.json (and
``_reconcile``) at 16,384 ranks, ``controller_decide_<ranks>.json`` at other sizes.
``--sizes`` runs the decision cases (not the reconcile) at each size in one process and
adds ``controller_decide_sizes.json``: each case side by side, with the ratio of the
largest size's median to the smallest's.

``--baseline DIR`` times ``decide`` side by side with another checkout (e.g. a ``git
worktree`` of the commit before a change): each round runs both, in fresh processes, one
after the other in alternating order; a case's figure is the median over rounds of each
round's median, and the table gives ours / baseline. The reconcile part is left out.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _sources import pacekeeper_path
from _table import emit

from pacekeeper.controller.core.engine import decide
from pacekeeper.controller.core.ids import JobKey, NodeName
from pacekeeper.controller.core.observations import ClusterView, JobView, NodeView, Window
from pacekeeper.controller.core.policy import PolicyDocument, parse_policy_document
from pacekeeper.controller.core.state import State
from pacekeeper.detector.compaction import compact
from pacekeeper.detector.score_report import JobIdentity, Platform, RankScores, ScoreReport

try:
    from pacekeeper.controller.core.report_columns import columnar
except ImportError:  # a --baseline checkout from before it: reports as parsed then

    def columnar(report: ScoreReport) -> ScoreReport:
        return report


T0 = datetime(2026, 1, 1, tzinfo=UTC)
SECTIONS = ("step", "forward", "backward", "optimizer")
REPEATS = 15
GOAL_MS = 50.0
LARGE_GOAL_MS = 200.0
"""Beyond 16,384 ranks (issue 42)."""
DEFAULT_RANKS = 16_384


def goal_ms(ranks: int) -> float:
    return GOAL_MS if ranks <= DEFAULT_RANKS else LARGE_GOAL_MS


def result_name(base: str, ranks: int) -> str:
    """``base`` at the default size (the figures the docs cite), ``base_<ranks>`` else."""
    return base if ranks == DEFAULT_RANKS else f"{base}_{ranks}"


def make_report(ranks: int, seq: int, slow: dict[int, float], rng: random.Random) -> ScoreReport:
    rows = []
    for r in range(ranks):
        base = slow.get(r, 1.0)
        jitter = [min(1.0, base * (0.97 + 0.03 * rng.random())) for _ in range(6)]
        rows.append(
            RankScores(
                rank=r,
                node=f"gpu-{r // 8:05d}",
                pod=f"train-worker-{r}",
                gpu_relative=jitter[0],
                gpu_individual=jitter[1],
                section_relative=dict(zip(SECTIONS, jitter[2:], strict=True)),
                section_individual=dict.fromkeys(SECTIONS, 1.0),
                section_samples=40,
                kernel_samples=800,
            )
        )
    return ScoreReport.build(
        job=JobIdentity(platform=Platform.KUBERNETES, namespace="ml", name="llm"),
        sequence=seq,
        generated_at=T0 + timedelta(seconds=60 * seq),
        window_s=60.0,
        ranks=rows,
    )


def policy(kind: str, host_side: bool = False) -> PolicyDocument:
    score: dict[str, object] = {"kind": kind, **({"hostSide": True} if host_side else {})}
    return parse_policy_document(
        {
            "mode": "enforce",
            "defaultPolicy": "p",
            "policies": {
                "p": {
                    "score": score,
                    "warmup": {"afterJobStartS": 0, "afterActionS": 0},
                    "budgets": {"betweenActionsS": 0},
                    "ladder": {
                        "notify": {"enabled": True, "timeoutS": 60},
                        "taintNode": {"enabled": True, "timeoutS": 60},
                        "cordonNode": {"enabled": True},
                    },
                }
            },
        },
        "bench",
    )


def timed(fn: Callable[[Window], object], fresh: Callable[[], Window]) -> tuple[float, float]:
    """Median and p95 (ms) of ``fn`` over windows ``fresh`` makes, one per call and
    outside the timing."""
    fn(fresh())  # warm
    samples = []
    for _ in range(REPEATS):
        w = fresh()
        t = time.perf_counter()
        fn(w)
        samples.append((time.perf_counter() - t) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(0.95 * (len(samples) - 1))]


def unseen(window: Window) -> Window:
    """``window`` with report objects the controller has not read yet (their ranks the
    same objects): what a report that just arrived costs, with nothing a decision might
    keep on the report object from an earlier one."""
    jobs = tuple(replace(j, reports=tuple(r.model_copy() for r in j.reports)) for j in window.jobs)
    return replace(window, jobs=jobs)


def cases(ranks: int) -> list[dict[str, Any]]:
    """Each policy kind x case: its outcome and decide's median and p95 (ms)."""
    rng = random.Random(0)
    nodes = {
        NodeName(f"gpu-{n:05d}"): NodeView(NodeName(f"gpu-{n:05d}")) for n in range(ranks // 8)
    }
    cluster = ClusterView(nodes=nodes)
    slow_one = {5: 0.5}
    fleet = {r: 0.6 for r in range(0, ranks, 8)[: ranks // 32]}  # 1 rank on a quarter of nodes
    healthy = [make_report(ranks, s, {}, rng) for s in range(1, 6)]
    slow = [make_report(ranks, s, slow_one, rng) for s in range(1, 6)]
    structural = make_report(ranks, 4, fleet, rng)
    bounded = compact(slow[3])
    # The shell's step after parsing (and placing) a report, timed per report.
    column_ms = []
    for reports in (healthy, slow):
        for i, report in enumerate(reports):
            t = time.perf_counter()
            reports[i] = columnar(report)
            column_ms.append((time.perf_counter() - t) * 1000)
    structural, bounded = columnar(structural), columnar(bounded)
    # The reports are the process's long-lived data now, as in a controller that froze
    # its heap after loading (gc.freeze): without it every collection a decision wakes
    # walks each report's ranks anew, which timed the collector, not the decision.
    gc.collect()
    gc.freeze()

    def job(reports: list[ScoreReport]) -> JobView:
        return JobView(JobKey("ml/llm"), tuple(reports), namespace="ml", name="llm", started_at=T0)

    def state_after(doc: PolicyDocument, reports: list[ScoreReport]) -> State:
        st = State()
        for i in range(1, len(reports)):
            now = reports[i - 1].generated_at
            st = decide(Window((job(reports[:i]),), cluster), st, doc, now).next_state
        return st

    rows = []
    for kind, host_side in (("gpuRelative", False), ("gpuRelative", True), ("worst", False)):
        doc = policy(kind, host_side)
        warm_slow = state_after(doc, slow[:4])  # the 4th report takes the taint step
        warm_healthy = state_after(doc, healthy)
        now = slow[3].generated_at
        cases: list[tuple[str, Window, State, int]] = [
            ("healthy", Window((job(healthy),), cluster), warm_healthy, 1),
            ("slow rank: taint", Window((job(slow[:4]),), cluster), warm_slow, 1),
            ("fleet pattern", Window((job([structural]),), cluster), State(), 1),
            ("k8s bounded form", Window((job([bounded]),), cluster), State(), 1),
            ("recheck, no new data", Window((job(slow[:4]),), cluster), State(), 0),
            ("4 reports at once", Window((job(slow[:4]),), cluster), State(), 4),
        ]
        for name, window, given, new in cases:
            st = decide(window, warm_slow, doc, now).next_state if new == 0 else given
            first = decide(window, st, doc, now)
            median, p95 = timed(
                lambda w, s=st, p=doc, t=now: decide(w, s, p, t),
                lambda w=window: unseen(w),
            )
            again, _ = timed(lambda w, s=st, p=doc, t=now: decide(w, s, p, t), lambda w=window: w)
            listed = len(window.jobs[0].reports[-1].ranks)
            rows.append(
                {
                    "score": f"{kind}, hostSide" if host_side else kind,
                    "case": name,
                    "listed": listed,
                    "new": new,
                    "outcome": ", ".join(sorted({d.reason.value for d in first.decisions})),
                    "median ms": round(median, 2),
                    "p95 ms": round(p95, 2),
                    "again ms": round(again, 2),
                    "ms/report": round(median / max(new, 1), 2),
                    "goal": "ok" if median / max(new, 1) < goal_ms(ranks) else "MISSED",
                }
            )
    column_ms.sort()
    rows.append({
        "score": "parse", "case": "columns (report_columns.columnar)", "listed": ranks,
        "new": 1, "outcome": "", "median ms": round(statistics.median(column_ms), 2),
        "p95 ms": round(column_ms[int(0.95 * (len(column_ms) - 1))], 2), "again ms": 0.0,
        "ms/report": round(statistics.median(column_ms), 2), "goal": "",
    })  # fmt: skip
    return rows


def main(ranks: int) -> None:
    goal = goal_ms(ranks)
    emit(
        result_name("controller_decide", ranks),
        cases(ranks),
        title=f"engine.decide on one {ranks:,}-rank job (goal < {goal:g} ms per report)",
        meta={"ranks": ranks, "repeats": REPEATS, "sections": len(SECTIONS), "goal_ms": goal},
    )


def sizes(all_ranks: list[int]) -> None:
    """The decision cases at each size, in one process, side by side."""
    by_size = {}
    for ranks in all_ranks:
        t = time.perf_counter()
        by_size[ranks] = cases(ranks)
        print(f"{ranks:,} ranks: cases in {time.perf_counter() - t:.0f} s", flush=True)
        main_rows = by_size[ranks]
        goal = goal_ms(ranks)
        emit(
            result_name("controller_decide", ranks),
            main_rows,
            title=f"engine.decide on one {ranks:,}-rank job (goal < {goal:g} ms per report)",
            meta={"ranks": ranks, "repeats": REPEATS, "sections": len(SECTIONS),
                  "goal_ms": goal},
        )  # fmt: skip
    small, large = min(all_ranks), max(all_ranks)
    rows = []
    for a, b in zip(by_size[small], by_size[large], strict=True):
        per_a, per_b = a["median ms"] / max(a["new"], 1), b["median ms"] / max(b["new"], 1)
        rows.append({
            "score": a["score"], "case": a["case"],
            f"ms/report {small}": round(per_a, 2), f"ms/report {large}": round(per_b, 2),
            "ratio": round(per_b / per_a, 2) if per_a else None,
            f"p95 {large}": b["p95 ms"], "listed": b["listed"], "outcome": b["outcome"],
            "goal": "" if not b["goal"] else "ok" if per_b < goal_ms(large) else "MISSED",
        })  # fmt: skip
    emit(
        "controller_decide_sizes",
        rows,
        title=f"engine.decide per report at {small:,} and {large:,} ranks, one process "
        f"(goal < {goal_ms(large):g} ms at {large:,})",
        meta={"sizes": all_ranks, "repeats": REPEATS, "sections": len(SECTIONS),
              "goal_ms": goal_ms(large)},
    )  # fmt: skip


def compare(ranks: int, baseline: Path, rounds: int) -> None:
    """``cases`` of this checkout and of ``baseline``, interleaved over ``rounds``."""
    ours_src = Path(__file__).resolve().parents[1]
    runs: dict[str, list[list[dict[str, Any]]]] = {"ours": [], "baseline": []}
    with tempfile.TemporaryDirectory() as tmp:
        paths = {"ours": pacekeeper_path(ours_src, Path(tmp) / "o"),
                 "baseline": pacekeeper_path(baseline, Path(tmp) / "b")}  # fmt: skip
        for k in range(rounds):
            for side in ("ours", "baseline") if k % 2 == 0 else ("baseline", "ours"):
                # That side's package first; the rest of the path (its dependencies,
                # where they are not installed) after it.
                path = [paths[side], *filter(None, [os.environ.get("PYTHONPATH")])]
                env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
                out = subprocess.run(
                    [sys.executable, __file__, str(ranks), "--cases-json",
                     "--repeats", str(REPEATS)],
                    env=env, check=True, capture_output=True, text=True,
                )  # fmt: skip
                runs[side].append(json.loads(out.stdout.strip().splitlines()[-1]))
    rows = []
    for i, row in enumerate(runs["ours"][0]):
        ours = statistics.median(r[i]["median ms"] for r in runs["ours"])
        again = statistics.median(r[i]["again ms"] for r in runs["ours"])
        base = statistics.median(r[i]["median ms"] for r in runs["baseline"])
        new = max(row["new"], 1)
        rows.append({
            "score": row["score"], "case": row["case"], "listed": row["listed"],
            "outcome": row["outcome"],
            "baseline outcome": runs["baseline"][0][i]["outcome"],
            "baseline ms": round(base, 2), "ours ms": round(ours, 2),
            "ours/baseline": round(ours / base, 2) if base else None,
            "ours again ms": round(again, 2),
            "goal": "" if not row["goal"] else "ok" if ours / new < goal_ms(ranks) else "MISSED",
        })  # fmt: skip
    emit(
        "controller_decide_compare",
        rows,
        title=f"engine.decide on one {ranks:,}-rank job, ours vs {baseline} "
        f"(median of {rounds} interleaved rounds; goal < {goal_ms(ranks):g} ms per report)",
        meta={"ranks": ranks, "repeats": REPEATS, "rounds": rounds, "baseline": str(baseline),
              "goal_ms": goal_ms(ranks)},
    )  # fmt: skip


def reconcile_bench(ranks: int) -> None:
    """``reconcile_job`` of one ``ranks``-rank job, against the harness, and its parts."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "k8s"))
    import kubernetes
    from harness import start_server
    from harness.clients import client_configuration
    from harness.objects import node, pod
    from reporter_helpers import CRD_PATH

    from pacekeeper.controller.core.trust import place_report
    from pacekeeper.controller.runtime.reconcile import Reconciler
    from pacekeeper.controller.sources.kubernetes import report_of
    from pacekeeper.controller.sources.world_cache import WorldCache
    from pacekeeper.detector.reporters.kubernetes import KubernetesStatusSink

    rpp = 8
    pods_n = ranks // rpp
    key = JobKey("ml/llm")
    owner = {"kind": "Job", "name": "llm", "uid": "uid-llm"}
    rows = []
    with start_server() as server:
        for ns in ("ml", "pk"):
            server.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        server.apply_yaml(CRD_PATH)
        # The controller creates a job's report, bound to its workload (issue 40): here
        # made beforehand, as the controller would, so the sink only patches its status.
        from pacekeeper.detector.reporters.k8s_status import new_object

        born = new_object(
            "ml",
            "llm",
            make_report(8, 0, {}, random.Random(0)),
            owner={"apiVersion": "batch/v1", **owner, "controller": "true"},
        )
        born["metadata"]["ownerReferences"][0]["controller"] = True
        server.apply(born)

        def world(lo: int) -> None:
            for k in range(lo, min(lo + 256, pods_n)):
                server.server.apply(node(f"gpu-{k:05d}"))
                server.server.apply(
                    pod(f"train-worker-{k}", namespace="ml", node_name=f"gpu-{k:05d}",
                        labels={"batch.kubernetes.io/job-name": "llm",
                                "batch.kubernetes.io/job-completion-index": str(k)},
                        annotations={"pacekeeper.dev/detect": "true"}, owner=owner)
                )  # fmt: skip

        for lo in range(0, pods_n, 256):
            server.call(world, lo)
        api = kubernetes.client.ApiClient(client_configuration(server.url))
        cache = WorldCache()
        cache.prime(server.list("v1", "Pod", "ml"), server.list("v1", "Node"))
        doc = policy("gpuRelative")
        clock_now = [T0]
        rec = Reconciler(api, doc, namespace="pk", cache=cache, clock=lambda: clock_now[0])
        sink = KubernetesStatusSink(namespace="ml", name="llm", incarnation="b", api_client=api,
                                    pod_name="train-worker-0")  # fmt: skip
        rng = random.Random(1)

        def placed(seq: int, slow: dict[int, float]) -> ScoreReport:
            rep = make_report(ranks, seq, slow, rng)
            # Pods one per 8 ranks, as the harness has them (make_report names one per rank).
            rows_ = [r.model_copy(update={"pod": f"train-worker-{r.rank // rpp}"})
                     for r in rep.ranks]  # fmt: skip
            return rep.model_copy(update={"ranks": rows_})

        def publish(seq: int, slow: dict[int, float]) -> Any:
            clock_now[0] = T0 + timedelta(seconds=60 * seq + 1)
            sink.send(placed(seq, slow))
            return server.read("pacekeeper.dev/v1alpha1", "StragglerReport", "llm", "ml")

        seq = 1
        for case, slow in (("new report, healthy", {}), ("new report, slow rank", {5: 0.5})):
            walls, cpus, parse, trust, dec = [], [], [], [], []
            for _ in range(REPEATS):
                obj = publish(seq, slow)
                seq += 1
                t, c = time.perf_counter(), time.thread_time()
                rec.reconcile_job(key, obj)
                walls.append((time.perf_counter() - t) * 1000)
                cpus.append((time.thread_time() - c) * 1000)
                t = time.perf_counter()
                report = report_of(obj, clock_now[0])
                parse.append((time.perf_counter() - t) * 1000)
                pods = cache.pods_of_job("ml", "llm")
                t = time.perf_counter()
                assert isinstance(report, ScoreReport)
                report = place_report(report, pods, clock_now[0])
                trust.append((time.perf_counter() - t) * 1000)
                assert isinstance(report, ScoreReport), "the report is trusted"
                window = Window((JobView(key, (report,), namespace="ml", name="llm",
                                         started_at=T0),), cache.cluster_view())  # fmt: skip
                state = State()
                t = time.perf_counter()
                decide(window, state, doc, clock_now[0])
                dec.append((time.perf_counter() - t) * 1000)
            recheck, recheck_cpu = [], []
            for _ in range(REPEATS):
                t, c = time.perf_counter(), time.thread_time()
                rec.reconcile_job(key)  # a timer's recheck: a GET, nothing new, no write
                recheck.append((time.perf_counter() - t) * 1000)
                recheck_cpu.append((time.thread_time() - c) * 1000)
            for name, samples, cpu in (
                (case, walls, cpus), (f"{case}: recheck, nothing new", recheck, recheck_cpu),
                ("  parse status.report", parse, parse), ("  trust: place_report", trust, trust),
                ("  decide (fresh state)", dec, dec),
            ):  # fmt: skip
                samples.sort()
                median = statistics.median(samples)
                rows.append({
                    "case": name, "listed": len(report.ranks), "ranks": ranks,
                    "median ms": round(median, 2),
                    "p95 ms": round(samples[int(0.95 * (len(samples) - 1))], 2),
                    "cpu ms": round(statistics.median(cpu), 2),
                    "goal": "" if name.startswith("  ") else
                    ("ok" if median < goal_ms(ranks) else "MISSED"),
                })  # fmt: skip
        api.close()
    emit(
        result_name("controller_decide_reconcile", ranks),
        rows,
        title=f"Reconciler.reconcile_job of one {ranks:,}-rank job against the API harness",
        meta={"ranks": ranks, "ranks_per_pod": rpp, "repeats": REPEATS,
              "goal_ms": goal_ms(ranks)},
    )  # fmt: skip


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ranks", nargs="?", type=int, default=DEFAULT_RANKS)
    ap.add_argument("--sizes", default=None, help="comma-separated rank counts, side by side")
    ap.add_argument("--repeats", type=int, default=REPEATS, help="timed calls per case")
    ap.add_argument("--reconcile-only", action="store_true", help="skip the decision cases")
    ap.add_argument("--baseline", type=Path, default=None, help="a checkout to compare with")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cases-json", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    REPEATS = args.repeats
    if args.sizes:
        sizes([int(x) for x in args.sizes.split(",")])
    elif args.cases_json:  # one side of --baseline, in a process of its own
        print(json.dumps(cases(args.ranks)))
    elif args.baseline is not None:
        compare(args.ranks, args.baseline, args.rounds)
    else:
        if not args.reconcile_only:
            main(args.ranks)
        reconcile_bench(args.ranks)
