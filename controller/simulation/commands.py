"""The ``simulate`` and ``replay`` commands' bodies (the CLI module only parses options)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from pacekeeper.controller.simulation.quality import Quality

if TYPE_CHECKING:
    from pacekeeper.controller.core.decisions import Decision
    from pacekeeper.controller.core.policy import PolicyDocument
    from pacekeeper.controller.simulation.detection import Instrumentation
    from pacekeeper.controller.simulation.models import ModelParams
    from pacekeeper.detector.score_report import ScoreReport

PROGRESS_MIN_RANK_WINDOWS = 20_000
"""Show a progress bar when ranks x windows is at least this (runs longer than ~2 s)."""


def _fmt_s(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}"


def quality_table(title: str, rows: list[tuple[str, str, Quality]]) -> Table:
    """One row per (scenario, detector); the scenario column only when one is named."""
    t = Table(title=title)
    with_scenario = any(sc for sc, _, _ in rows)
    if with_scenario:
        t.add_column("scenario", no_wrap=True)
    t.add_column("detector", no_wrap=True)
    cols = ("prec", "recall", "detect s", "act s", "FA/1k GPU-d", "HW on imb.", "early undo")
    for col in (*cols, "false recov."):
        t.add_column(col, justify="right")
    for scenario, name, q in rows:
        cells = [
            name,
            f"{q.precision:.3f}",
            f"{q.recall:.3f}",
            _fmt_s(q.time_to_detect_s),
            _fmt_s(q.time_to_act_s),
            f"{q.false_actions_per_1000_gpu_days:.1f}",
            str(q.hardware_actions_on_imbalance),
            str(q.premature_undos),
            str(q.false_recoveries),
        ]
        t.add_row(*([scenario] if with_scenario else []), *cells)
    return t


def simulate_command(  # noqa: PLR0917 - mirrors the CLI options
    scenario: str,
    ranks: int,
    duration_s: float,
    seed: int,
    plot: Path | None = None,
    trace: Path | None = None,
    policy: Path | None = None,
    *,
    custom: tuple[str, float, int, float | None] | None = None,
    params: ModelParams | None = None,
    instrumentation: Instrumentation | None = None,
    ramp_s: float | None = None,
    drift_scale: float | None = None,
    jitter_scale: float | None = None,
    restart_at_s: Sequence[float] = (),
    pauses: bool = False,
) -> int:
    """``custom``: (fault, slowdown, count, start_s) given instead of a named scenario;
    ``params``: the job's model (e.g. ``ModelParams(ddp_overlap=True)``);
    ``instrumentation``: what the job turned on in the detector; ``ramp_s``,
    ``drift_scale``, ``jitter_scale``, ``restart_at_s``, ``pauses``: on top of the
    scenario (``scenarios.with_options``: ``--ramp``, ``--drift-scale``,
    ``--jitter-scale``, ``--restart-at``, ``--pauses``)."""
    from pacekeeper.controller.core.policy import load_policy_file
    from pacekeeper.controller.simulation.models import ModelParams
    from pacekeeper.controller.simulation.runner import simulate
    from pacekeeper.controller.simulation.scenarios import (
        Scenario,
        custom_scenario,
        get_scenario,
        with_options,
    )

    console = Console()
    try:
        doc = load_policy_file(policy) if policy is not None else None
        chosen: Scenario = custom_scenario(*custom) if custom else get_scenario(scenario)
        chosen = with_options(
            chosen,
            ramp_s=ramp_s,
            drift_scale=drift_scale,
            jitter_scale=jitter_scale,
            restart_at_s=tuple(restart_at_s),
            pauses=pauses,
        )
        if chosen.start_s is not None and chosen.start_s >= duration_s:
            raise ValueError(
                f"--start {chosen.start_s:g} is not before the end (--duration {duration_s:g})"
            )
        late = [t for t in restart_at_s if t >= duration_s]
        if late:
            raise ValueError(
                f"--restart-at {late[0]:g} is not before the end (--duration {duration_s:g})"
            )
    except ValueError as e:
        console.print(f"[red]error:[/] {e}")
        return 2
    scenario = chosen.name
    window_s = (params or ModelParams()).window_s
    windows = int(duration_s // window_s)
    if windows < 1:
        console.print(
            f"[red]error:[/] --duration {duration_s:g} is shorter than one report window "
            f"({window_s:g} s); give at least {window_s:g}"
        )
        return 2
    show = ranks * windows >= PROGRESS_MIN_RANK_WINDOWS
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=not show,
        transient=True,
    ) as bar:
        task = bar.add_task(f"{scenario}: report windows", total=windows)
        try:
            out = simulate(
                chosen,
                ranks,
                duration_s,
                seed,
                policy=doc,
                params=params,
                trace_path=trace,
                on_window=lambda _: bar.advance(task),
                instrumentation=instrumentation,
            )
        except ValueError as e:  # a magnitude the job cannot hold (--count over --ranks)
            console.print(f"[red]error:[/] {e}")
            return 2
    truth = out.truth
    faulty = sorted(truth.faulty_ranks)
    start = "-" if truth.start_s is None else f"{truth.start_s:.0f}s"
    console.print(
        f"scenario [bold]{scenario}[/] ({chosen.description}): {ranks} ranks, "
        f"{duration_s:.0f}s, seed {seed}; faulty ranks {faulty if faulty else 'none'} from {start}"
    )
    if chosen.min_duration_s is not None and duration_s < chosen.min_duration_s:
        console.print(
            f"[yellow]note:[/] {scenario} needs --duration {chosen.min_duration_s:g} to mean "
            "anything (a ramp reaches 5% late)"
        )
    if chosen.mode is not None and doc is not None and doc.mode is not chosen.mode:
        console.print(
            f"[yellow]note:[/] {scenario} means something in mode {chosen.mode.value}; "
            f"the policy runs in {doc.mode.value}"
        )
    rec = out.record
    if rec.restarts_s:
        when = ", ".join(f"{t:.0f}s" for t in rec.restarts_s)
        console.print(
            f"restarts at {when}: incarnations {' -> '.join(dict.fromkeys(rec.incarnations))}"
        )
    if truth.counted_from_s is not None:
        console.print(f"the fault counts from {truth.counted_from_s:.0f}s (5% slower)")
    if truth.found_after_s is not None:
        console.print(f"found only if named again after the restart at {truth.found_after_s:.0f}s")
    rows = [("", name, q) for name, q in out.quality.items()]
    console.print(quality_table("detection quality on this trace", rows))
    acts = [f for f in out.record.ours if f.disruptive]
    for f in acts[:10]:
        console.print(f"  t={f.time_s:.0f}s would act on {f.kind.value} {f.id}")
    if trace is not None:
        console.print(f"trace written: {trace}")
    if plot is not None:
        from pacekeeper.controller.simulation.plot import heatmap, score_label
        from pacekeeper.controller.simulation.presets import simulation_policy

        heatmap(
            out.record,
            truth,
            plot,
            title=f"{scenario}, {ranks} ranks, seed {seed}",
            score_name=score_label(doc or simulation_policy()),
        )
        console.print(f"heatmap written: {plot}")
    return 0


def replay_command(policy: Path, trace: Path, show_holds: bool = False) -> int:
    from collections import Counter

    from pacekeeper.controller.core.decisions import Verdict
    from pacekeeper.controller.core.policy import load_policy_file
    from pacekeeper.controller.simulation.runner import read_trace, replay

    console = Console()
    try:
        doc = load_policy_file(policy)
        reports = list(read_trace(trace))
        if not reports:
            raise ValueError(f"{trace} holds no ScoreReports: nothing to replay")
        missing = missing_sections(doc, reports)
        if missing:
            raise ValueError(missing)
        decisions = replay(reports, doc)
    except (OSError, ValueError) as e:
        console.print(f"[red]error:[/] {e}")
        return 2
    table = Table(title=f"replay of {trace} under {policy}")
    for col in ("t s", "subject", "ranks", "verdict", "action", "reason", "mode"):
        table.add_column(col, overflow="fold")
    counts: Counter[tuple[str, str]] = Counter()
    for t, d in decisions:
        counts[(d.verdict.value, d.reason.value)] += 1
        if d.action is None and d.verdict is Verdict.HOLD and not show_holds:
            continue
        ranks = d.evidence.get("ranks")
        table.add_row(
            f"{t:.0f}",
            d.subject,
            ", ".join(str(r) for r in ranks) if isinstance(ranks, list) and ranks else "-",
            _verdict(d),
            d.action.value if d.action else "-",
            d.reason,
            d.mode.value,
        )
    console.print(table)
    summary = ", ".join(f"{v}/{r}: {n}" for (v, r), n in sorted(counts.items()))
    console.print(f"{len(decisions)} decisions under mode {doc.mode.value} ({summary})")
    return 0


def _verdict(d: Decision) -> str:
    """``hold (would act)`` for the act that observe or dry-run turned into a hold."""
    would = d.evidence.get("wouldBe")
    return f"{d.verdict.value} (would {would})" if would else d.verdict.value


def missing_sections(doc: PolicyDocument, reports: Sequence[ScoreReport]) -> str | None:
    """Why the trace cannot judge ``doc``'s policies, when a policy scores a section that
    no report of the trace timed (each decision would otherwise read ``StaleData``)."""
    seen = {
        name
        for r in reports
        for rank in r.ranks
        for name in (*rank.section_relative, *rank.section_individual)
    }
    wanted = {name: p.score.section for name, p in doc.policies.items() if p.score.section}
    lacking = {name: sec for name, sec in wanted.items() if sec not in seen}
    if not lacking:
        return None
    which = "; ".join(f"policy {n!r} scores section {sec!r}" for n, sec in sorted(lacking.items()))
    have = ", ".join(sorted(seen)) or "none"
    return f"{which}, which no report in the trace has (sections in the trace: {have})"
