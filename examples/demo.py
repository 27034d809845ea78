"""The whole product on one machine, on embedded defaults (``make demo``).

    python examples/demo.py [--out DIR] [--detector-only]


Four gloo CPU ranks train with one rank slowed; the detector on every rank times the
sections, rank 0 publishes each ScoreReport to the ScoreBoard actor of a local Ray
cluster (exactly as in a real job: ``PACEKEEPER_REPORTER=ray``), and the Ray-side
controller runs the real decision core against the board in dry-run, showing what it
would do. At the end: the detector's report, the controller's decisions and a PNG
heatmap of scores over ranks and time with the would-be actions marked.

``--out DIR`` (default ``pacekeeper-demo``) receives:

- ``heatmap.png``: the heatmap (docs/simulator.md, "Reading the heatmap");
- ``trace.jsonl``: every ScoreReport the board kept, one wire dict per line, the format
  ``pacekeeper replay`` reads;
- ``policy.yaml``: the demo's dry-run policy, so ``pacekeeper replay --policy
  DIR/policy.yaml --trace DIR/trace.jsonl`` backtests it, or an edited copy.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from rich.console import Console

from pacekeeper.controller.core.decisions import Decision, Verdict, summary_lines
from pacekeeper.controller.core.policy import (
    Ladder,
    LadderStep,
    Mode,
    Persistence,
    Policy,
    PolicyDocument,
    Recovery,
    ScoreKind,
    ScoreSelector,
    TaintStep,
    Thresholds,
    Warmup,
)

JOB_NAME = "demo"
RAY_ENV = {
    # Local Ray on loopback, no tokens, quick shutdown (see docs/transports.md).
    "RAY_AUTH_MODE": "disabled",
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "2",
    "RAY_USAGE_STATS_ENABLED": "0",
}


@dataclass(frozen=True)
class E2EConfig:
    out_dir: Path = Path("pacekeeper-demo")
    world_size: int = 4
    slow_rank: int = 2
    slow_section: str = "backward"
    slowdown: float = 0.30
    steps: int = 300
    report_time_interval_s: float = 0.5
    controller_interval_s: float = 0.5


def demo_policy() -> PolicyDocument:
    """Dry-run, on the worst section score, with a ladder short enough for a demo."""
    step = LadderStep(enabled=True, timeout_s=1.0)
    policy = Policy(
        score=ScoreSelector(kind=ScoreKind.WORST),
        thresholds=Thresholds(act=0.8, recover=0.9),
        persistence=Persistence(consecutive_reports=3, max_report_age_s=30.0),
        warmup=Warmup(after_job_start_s=0.0, after_action_s=0.0),
        recovery=Recovery(consecutive_reports=3, hold_s=1.0),
        ladder=Ladder(
            notify=step,
            restart_rank=step,
            taint_node=TaintStep(enabled=True, timeout_s=1.0),
            cordon_node=step,
        ),
    )
    return PolicyDocument(mode=Mode.DRY_RUN, policies={"default": policy})


def _controller_loop(
    stop: threading.Event, interval_s: float, decisions: list[Decision], errors: list[str]
) -> None:
    import secrets

    from pacekeeper.controller.sources.ray_scoreboard import (
        KvStateStore,
        RayRunner,
        ScoreBoardSource,
    )

    # The demo's ranks are plain processes, not Ray actors, so Ray cannot place them:
    # this dry-run runner believes the reports' placements (never allowed in enforce
    # mode) and signs its state with a throwaway key.
    runner = RayRunner(
        demo_policy(),
        source=ScoreBoardSource(verify_placement=False),
        store=KvStateStore(signing_key=secrets.token_bytes(32)),
    )
    while not stop.is_set():
        try:
            decisions.extend(runner.run_once().decisions)
        except Exception as e:  # the board may not exist before the first report
            errors.append(str(e))
        stop.wait(interval_s)


def _board_reports(job_name: str) -> tuple[str, list[Any]]:
    """(job key, reports) of the job named ``job_name``: rank 0 joined Ray to publish, so
    its reports are filed under the Ray job it joined as (``ray:<id>``)."""
    import ray

    from pacekeeper.detector.reporters.ray_scoreboard import get_scoreboard
    from pacekeeper.detector.score_report import ScoreReport

    board = get_scoreboard(create=False)
    for head in ray.get(board.jobs.remote()):
        wires = ray.get(board.window.remote(head["job"], n=10_000))
        if wires and wires[-1]["job"]["name"] == job_name:
            return str(head["job"]), [ScoreReport.from_wire(w) for w in wires]
    return "", []


def _heatmap(reports: list[Any], decisions: list[Decision], config: E2EConfig) -> Path:
    import numpy as np

    from pacekeeper.controller.simulation.plot import heatmap
    from pacekeeper.controller.simulation.quality import Flag, SubjectKind, Truth
    from pacekeeper.controller.simulation.runner import RunRecord, effective_verdict

    t0 = reports[0].generated_at
    nodes = sorted({r.node for rep in reports for r in rep.ranks})
    rec = RunRecord(
        ranks=config.world_size,
        gpus_per_node=2,
        window_s=config.report_time_interval_s,
        node_names=nodes,
    )
    for rep in reports:
        rec.times_s.append((rep.generated_at - t0).total_seconds())
        row = np.full(config.world_size, np.nan)
        for r in rep.ranks:
            w = r.worst_score()
            row[r.rank] = np.nan if w is None else w
        rec.scores.append(row)
    for d in decisions:
        if d.action is None or effective_verdict(d) is not Verdict.ACT or d.decided_at is None:
            continue
        when = (d.decided_at - t0).total_seconds()
        disruptive = d.action.value != "notify"
        # Notices and restarts are about ranks (the evidence names them), even when the
        # decision's subject is the node the ladder runs on: mark the ranks' own rows.
        ranks = [int(r) for r in d.evidence.get("ranks") or []]
        if d.subject.startswith("rank/"):
            rec.ours.append(Flag(when, SubjectKind.RANK, int(d.subject[5:]), disruptive))
        elif d.action.value in ("notify", "restartRank") and ranks:
            rec.ours.extend(Flag(when, SubjectKind.RANK, r, disruptive) for r in ranks)
        elif d.node in nodes:
            rec.ours.append(Flag(when, SubjectKind.NODE, nodes.index(d.node), disruptive, True))
    truth = Truth(
        faulty_ranks=frozenset({config.slow_rank}),
        start_s=None,
        gpus_per_node=2,
        ranks=config.world_size,
        duration_s=rec.times_s[-1] if rec.times_s else 0.0,
        imbalance=False,
    )
    config.out_dir.mkdir(parents=True, exist_ok=True)
    return Path(
        heatmap(
            rec,
            truth,
            config.out_dir / "heatmap.png",
            title=f"demo: rank {config.slow_rank} slowed in '{config.slow_section}'",
            time_label="{unit} since the first report",
            score_name="worst section score of each rank (1 = the job's pace)",
        )
    )


def run_e2e_demo(config: E2EConfig | None = None, console: Console | None = None) -> int:
    """0 when the detector names the slowed rank and the controller would act on it or
    its node and nowhere else; 1 otherwise."""
    config = config or E2EConfig()
    console = console or Console()
    started = time.monotonic()
    for key, value in RAY_ENV.items():
        os.environ.setdefault(key, value)

    import ray
    from demo_ranks import DemoConfig, demo_rank, last_report, render_report

    from pacekeeper.detector.local_world import spawn_world

    console.print(
        f"[bold]pacekeeper demo[/]: {config.world_size} gloo CPU ranks, rank "
        f"{config.slow_rank} loses {config.slowdown:.0%} throughput in "
        f"'{config.slow_section}'; reports go to a local Ray ScoreBoard; the controller "
        "core decides in [bold]dry-run[/]"
    )
    ctx = ray.init(
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=100 * 1024**2,
        namespace="pacekeeper",
        log_to_driver=False,
        logging_level=logging.ERROR,
    )
    decisions: list[Decision] = []
    errors: list[str] = []
    stop = threading.Event()
    handoff = tempfile.TemporaryDirectory(prefix="pacekeeper-demo-")
    try:
        # What an annotated job's environment carries: the ranks need no other wiring.
        os.environ["PACEKEEPER_REPORTER"] = "ray"
        info = cast(Any, ctx).address_info  # ray's typing of the context omits it
        os.environ["PACEKEEPER_RAY_ADDRESS"] = str(info["gcs_address"])
        os.environ["PACEKEEPER_JOB_NAME"] = JOB_NAME
        from pacekeeper.detector.reporters.ray_scoreboard import get_scoreboard

        get_scoreboard()  # up before the ranks: the controller can read from the start
        controller = threading.Thread(
            target=_controller_loop,
            args=(stop, config.controller_interval_s, decisions, errors),
            daemon=True,
        )
        controller.start()
        rank_config = DemoConfig(
            world_size=config.world_size,
            slow_rank=config.slow_rank,
            slow_section=config.slow_section,
            slowdown=config.slowdown,
            steps=config.steps,
            report_time_interval_s=config.report_time_interval_s,
        )
        config.out_dir.mkdir(parents=True, exist_ok=True)
        # spawn, not fork: the ranks must not inherit this Ray driver's threads. Rank 0
        # hands its last detector Report back through a file in a private directory.
        spawn_world(demo_rank, config.world_size, rank_config, handoff.name, start_method="spawn")
        time.sleep(2 * config.controller_interval_s)  # let the controller see the last one
        stop.set()
        controller.join(10)
        job_key, reports = _board_reports(JOB_NAME)
        path = _heatmap(reports, decisions, config) if reports else None
    finally:
        stop.set()
        for key in ("PACEKEEPER_REPORTER", "PACEKEEPER_RAY_ADDRESS", "PACEKEEPER_JOB_NAME"):
            os.environ.pop(key, None)
        ray.shutdown()

    final = last_report(handoff.name)
    handoff.cleanup()
    if not reports or final is None:
        console.print("[red]no report reached the ScoreBoard[/]", errors[-1:] or "")
        return 1
    trace, policy_file = _write_trace(reports, config.out_dir)
    console.print(render_report(final, title="detector: section scores of the last window"))
    named = {
        s.rank for ids in final.identify_stragglers()["straggler_sections_relative"].values()
        for s in ids
    }  # fmt: skip
    console.print(f"ScoreBoard: {len(reports)} reports from job [bold]{job_key}[/] ({JOB_NAME})")
    from pacekeeper.controller.simulation.runner import replay

    live = [d for d in decisions if d.action is not None]
    console.print("[bold]Ray-side controller, live against the ScoreBoard (dry-run):[/]")
    lines = [describe(d) if d.evidence.get("wouldBe") else summary_lines([d])[0] for d in live]
    for line in _dedupe(lines) or ["(no report reached it while it ran)"]:
        console.print(f"  {line}")
    # The same core over every report in order: the timeline does not depend on when
    # the live runner happened to poll.
    console.print("[bold]the same core replayed over the job's reports, in order:[/]")
    replayed = replay(reports, demo_policy())
    for t_s, d in replayed:
        if d.action is not None and d.evidence.get("wouldBe") is not None:
            console.print(f"  t={t_s:5.1f}s  {describe(d)}")
    decisions = decisions + [d for _, d in replayed]
    slow_node = f"node{config.slow_rank // 2}"
    would_act = [
        d
        for d in decisions
        if d.action is not None
        and d.evidence.get("wouldBe") == Verdict.ACT.value
        and (d.subject == f"rank/{config.slow_rank}" or d.node == slow_node)
    ]
    elsewhere = [
        d
        for d in decisions
        if d.action is not None
        and d.evidence.get("wouldBe") == Verdict.ACT.value
        and d.node not in (None, slow_node)
    ]
    console.print(f"heatmap: {path}")
    console.print(
        f"trace: {trace} ({len(reports)} ScoreReports); backtest: "
        f"pacekeeper replay --policy {policy_file} --trace {trace}",
        soft_wrap=True,  # a command to copy: never broken over lines
    )
    console.print(f"done in {time.monotonic() - started:.1f} s")
    # One window's medians can dip on a busy machine; the controller's persistence rule
    # is what must keep every other rank and node out of its actions.
    ok = config.slow_rank in named and bool(would_act) and not elsewhere
    if not ok:
        console.print("[red]the demo did not come out as expected[/]")
    return 0 if ok else 1


def _write_trace(reports: list[Any], out_dir: Path) -> tuple[Path, Path]:
    """``trace.jsonl`` (the reports, as ``pacekeeper replay`` reads them) and
    ``policy.yaml`` (the demo's policy) in ``out_dir``."""
    import yaml

    from pacekeeper.controller.core.policy import API_VERSION, KIND
    from pacekeeper.controller.traces.reports import write_jsonl

    trace = out_dir / "trace.jsonl"
    write_jsonl(reports, trace)
    body = demo_policy().model_dump(mode="json", by_alias=True, exclude_defaults=True)
    policy_file = out_dir / "policy.yaml"
    text = yaml.safe_dump({"apiVersion": API_VERSION, "kind": KIND, **body}, sort_keys=False)
    policy_file.write_text(text, encoding="utf-8")
    return trace, policy_file


def describe(d: Decision) -> str:
    """``would restartRank rank 2 on node1: score 0.70 < 0.80 for 3 reports``."""
    ev = d.evidence
    ranks = ", ".join(str(r) for r in ev.get("ranks") or [])
    where = f"rank {ranks}" if ranks else d.subject
    if d.node:
        where += f" on {d.node}"
    scores = ev.get("scores") or {}
    low = min(scores.values()) if scores else None
    why = ""
    if low is not None and "threshold" in ev:
        why = f"score {low:.2f} < {ev['threshold']:.2f}"
    counts = ev.get("consecutive") or {}
    if counts:
        why += f" for {max(counts.values())} reports"
    verb = "would" if ev.get("wouldBe") else "held"
    action = d.action.value if d.action else "-"
    return f"{verb} {action} {where}: {why or d.reason.value}"


def _dedupe(lines: list[str]) -> list[str]:
    return list(dict.fromkeys(lines))  # first occurrences, in order


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        description="End-to-end demo on embedded defaults: 4 CPU ranks with one slowed, a "
        "local Ray ScoreBoard, the controller core in dry-run, a heatmap."
    )
    parser.add_argument(
        "--out", type=Path, default=Path("pacekeeper-demo"), help="where the heatmap goes"
    )
    parser.add_argument(
        "--detector-only", action="store_true", help="only the 4 gloo ranks and their report"
    )
    args = parser.parse_args(argv)
    if args.detector_only:
        from demo_ranks import run_demo

        return run_demo()
    return run_e2e_demo(E2EConfig(out_dir=args.out))


if __name__ == "__main__":
    raise SystemExit(main())
