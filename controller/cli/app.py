"""The ``pacekeeper`` command line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pacekeeper.controller.cli.operator import operator_app
from pacekeeper.controller.cli.policy import policy_app
from pacekeeper.controller.cli.ray_controller import ray_controller
from pacekeeper.controller.cli.status import status_app
from pacekeeper.controller.cli.traces import export_app, trace_app
from pacekeeper.controller.cli.webhook import webhook_cli

app = typer.Typer(
    no_args_is_help=True,
    help="pacekeeper: find slow ranks and act on them, safely.",
    # Rich help cuts long flags and env var names to fit 80 columns ("--leader-electi…");
    # click's plain help wraps instead, so every flag reads in full at any width.
    rich_markup_mode=None,
)
app.add_typer(policy_app, name="policy")
app.add_typer(operator_app, name="operator")
app.add_typer(trace_app, name="trace")
app.add_typer(export_app, name="export")
app.add_typer(status_app, name="status")
app.add_typer(webhook_cli, name="webhook")
app.command("ray-controller")(ray_controller)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"pacekeeper {version('pacekeeper')}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """pacekeeper: find slow ranks and act on them, safely."""


@app.command()
def simulate(  # noqa: PLR0917 - one parameter per option
    scenario: Annotated[str, typer.Option(help="Scenario (docs/simulator.md).")] = "slow-gpu-20",
    ranks: Annotated[int, typer.Option(min=1)] = 256,
    duration: Annotated[float, typer.Option(help="Simulated seconds.")] = 1800.0,
    seed: int = 0,
    plot: Annotated[Path | None, typer.Option(help="Write a PNG heatmap here.")] = None,
    trace: Annotated[Path | None, typer.Option(help="Write ScoreReports as JSONL.")] = None,
    policy: Annotated[Path | None, typer.Option(help="Policy YAML.")] = None,
    fault: Annotated[
        str | None,
        typer.Option(help="Instead of --scenario: gpu, node, throttling, link or host."),
    ] = None,
    slowdown: Annotated[float, typer.Option(help="With --fault: 0.1 = 10% slower.")] = 0.2,
    count: Annotated[int, typer.Option(help="With --fault: GPUs (nodes for node/link) hit.")] = 1,
    start: Annotated[
        float | None, typer.Option(help="With --fault: seconds from the start (default: 1/3 in).")
    ] = None,
    ramp: Annotated[
        float | None, typer.Option(help="Ramp the fault in over this many seconds.")
    ] = None,
    drift_scale: Annotated[
        float | None, typer.Option(help="Drift amplitude times this (model: 1).")
    ] = None,
    jitter_scale: Annotated[
        float | None, typer.Option(help="Jitter times this (model: 1).")
    ] = None,
    restart_at: Annotated[
        list[float] | None, typer.Option(help="Restart the job at this second (repeatable).")
    ] = None,
    pauses: Annotated[bool, typer.Option(help="Add job-wide eval/checkpoint/GC pauses.")] = False,
) -> None:
    """Simulate a job with a straggler scenario through the real scoring and decision core."""
    from pacekeeper.controller.simulation.commands import simulate_command

    custom = None if fault is None else (fault, slowdown, count, start)
    raise typer.Exit(
        simulate_command(
            scenario,
            ranks,
            duration,
            seed,
            plot,
            trace,
            policy,
            custom=custom,
            ramp_s=ramp,
            drift_scale=drift_scale,
            jitter_scale=jitter_scale,
            restart_at_s=tuple(restart_at or ()),
            pauses=pauses,
        )
    )


@app.command()
def replay(
    policy: Annotated[Path, typer.Option(help="Policy YAML to backtest.")],
    trace: Annotated[Path, typer.Option(help="JSONL of ScoreReport wire dicts.")],
) -> None:
    """Backtest a policy on recorded ScoreReports before enforcing it."""
    from pacekeeper.controller.simulation.commands import replay_command

    raise typer.Exit(replay_command(policy, trace))


def main() -> None:
    app()
