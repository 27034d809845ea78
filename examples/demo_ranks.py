"""The detector alone: four CPU ranks, one slowed down, and a report that names it.

``python examples/demo.py --detector-only`` runs it. Composable: ``demo_rank`` is one
rank's training loop (its reports go to any listener registered on ``Detector``),
``render_report`` turns a ``Report`` into a rich table, and ``run_demo`` wires them to a
local gloo world.

Rank 0 hands its last ``Report`` (the detector's in-process object, which the table is
drawn from) to the parent through ``HANDOFF`` in a private temporary directory: a
pickle between processes of one run, never a file for users. The reports as data, the
form ``pacekeeper replay`` reads, are the JSONL trace ``examples/demo.py`` writes.
"""

from __future__ import annotations

import math
import os
import pickle
import tempfile
import time
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from pacekeeper.detector import Detector, Report
from pacekeeper.detector.local_world import spawn_world

HANDOFF = "last-report.pickle"
"""Rank 0's last Report, for the parent process of the same run (see the docstring)."""

SECTIONS_MS = {"data": 2.0, "forward": 6.0, "backward": 10.0, "optimizer": 2.0}
"""Simulated step: what each section costs on a healthy rank (sleeps, so the demo
measures scheduling, not this machine's core count)."""


@dataclass(frozen=True)
class DemoConfig:
    world_size: int = 4
    slow_rank: int = 2
    slow_section: str = "backward"
    slowdown: float = 0.30
    """Throughput lost on the slow rank's section: it takes 1 / (1 - slowdown) as long."""
    steps: int = 40
    report_time_interval_s: float = 0.2


def demo_rank(rank: int, world_size: int, config: DemoConfig, out_dir: str) -> None:
    """One rank's loop: time the sections, report on the shared interval, keep the last."""
    Detector.initialize(
        report_time_interval=config.report_time_interval_s, node_name=f"node{rank // 2}"
    )
    last: Report | None = None
    try:
        for _ in range(config.steps):
            for name, healthy_ms in SECTIONS_MS.items():
                slow = rank == config.slow_rank and name == config.slow_section
                ms = healthy_ms / (1.0 - config.slowdown) if slow else healthy_ms
                with Detector.detection_section(name, profile_cuda=False):
                    time.sleep(ms / 1000.0)
            report = Detector.generate_report_if_interval_elapsed()
            if report is not None:
                last = report
        final = Detector.generate_report()
        # The steps since the last interval report may be none: that window's scores are
        # all NaN (as in NVRx), and the one before says more.
        if final is not None and _measured(final):
            last = final
    finally:
        Detector.shutdown()
    if rank == 0 and last is not None:
        with open(os.path.join(out_dir, HANDOFF), "wb") as f:
            pickle.dump(last, f)


def last_report(out_dir: str) -> Report | None:
    """Rank 0's last Report from ``out_dir`` (None: the ranks produced none)."""
    path = os.path.join(out_dir, HANDOFF)
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        report: Report = pickle.load(f)
    return report


def _measured(report: Report) -> bool:
    return any(
        not math.isnan(score)
        for scores in report.section_relative_perf_scores.values()
        for score in scores.values()
    )


def render_report(report: Report, title: str = "pacekeeper: section scores") -> Table:
    """Relative section scores per rank (1.0 = as fast as the best rank), flags marked."""
    stragglers = report.identify_stragglers()
    flagged = {
        (section, s.rank)
        for section, ids in stragglers["straggler_sections_relative"].items()
        for s in ids
    }
    sections = sorted(report.section_relative_perf_scores)
    table = Table(title=title)
    table.add_column("rank", justify="right")
    table.add_column("node")
    for name in sections:
        table.add_column(name, justify="right")
    table.add_column("verdict")
    for rank in sorted(report.rank_to_node):
        cells = []
        slow_in = []
        for name in sections:
            score = report.section_relative_perf_scores[name].get(rank)
            text = "-" if score is None else f"{score:.2f}"
            if (name, rank) in flagged:
                text = f"[bold red]{text}[/]"
                slow_in.append(name)
            cells.append(text)
        verdict = f"[bold red]STRAGGLER ({', '.join(slow_in)})[/]" if slow_in else "ok"
        table.add_row(str(rank), report.rank_to_node[rank], *cells, verdict)
    return table


def run_demo(config: DemoConfig | None = None, console: Console | None = None) -> int:
    """Run the demo; 0 when the report names exactly the slowed rank, 1 otherwise."""
    config = config or DemoConfig()
    console = console or Console()
    console.print(
        f"[bold]pacekeeper demo[/]: {config.world_size} gloo CPU ranks, rank "
        f"{config.slow_rank} loses {config.slowdown:.0%} throughput in "
        f"'{config.slow_section}'"
    )
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="pacekeeper-demo-") as out_dir:
        spawn_world(demo_rank, config.world_size, config, out_dir)
        found = last_report(out_dir)
    if found is None:
        console.print("[red]no report was produced[/]")
        return 1
    report = found
    console.print(render_report(report))
    stragglers = report.identify_stragglers()
    named = {s.rank for ids in stragglers["straggler_sections_relative"].values() for s in ids}
    for section, ids in sorted(stragglers["straggler_sections_relative"].items()):
        for s in sorted(ids, key=lambda x: x.rank):
            score = report.section_relative_perf_scores[section][s.rank]
            console.print(f"straggler: {s!r} is slow in '{section}' (relative score {score:.2f})")
    console.print(f"done in {time.monotonic() - started:.1f} s")
    return 0 if named == {config.slow_rank} else 1
