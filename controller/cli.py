"""The ``pacekeeper`` command line."""

from __future__ import annotations

import typer

from pacekeeper.controller.policy_cli import policy_app

app = typer.Typer(no_args_is_help=True, help="pacekeeper: find slow ranks and act on them, safely.")
app.add_typer(policy_app, name="policy")


@app.command()
def demo() -> None:
    """End-to-end demo on embedded defaults: CPU ranks with one slowed rank."""
    from pacekeeper.detector.demo import run_demo

    raise typer.Exit(run_demo())


def main() -> None:
    app()
