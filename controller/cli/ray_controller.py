"""``pacekeeper ray-controller``: the Ray-side runner (``sources/ray_scoreboard.py``) as a
command, with one readable log line per decision (``runtime/logs.py``, text by default)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Annotated

import typer

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class TextWithFields(logging.Formatter):
    """``INFO decision summary='ranks 3, 17: BelowThreshold ...'``: the text format with
    the ``extra`` fields the runner logs (logs.py's text format shows the message only)."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        fields = " ".join(
            f"{k}={v!r}" if isinstance(v, str) and " " in v else f"{k}={v}"
            for k, v in vars(record).items()
            if k not in _STANDARD and not k.startswith("_")
        )
        line = super().format(record)
        return f"{line} {fields}" if fields else line


def ray_controller(  # noqa: PLR0917 - one parameter per option
    policy: Annotated[Path, typer.Option(help="RemediationPolicies YAML file.")],
    mode: Annotated[
        str | None,
        typer.Option(help="observe | dry-run | enforce; can only lower the document's mode."),
    ] = None,
    address: Annotated[str, typer.Option(help="Ray cluster address.")] = "auto",
    interval_s: Annotated[float, typer.Option(min=0.5, help="Seconds between passes.")] = 10.0,
    state_key_file: Annotated[
        Path | None,
        typer.Option(help="HMAC key of the stored state (created when absent)."),
    ] = None,
    control_key_file: Annotated[
        Path | None,
        typer.Option(
            help="The ScoreBoard's control key (a file; default $PACEKEEPER_CONTROL_KEY_FILE): "
            "lets confirm: probe ask jobs for their probe. Without it such policies wait."
        ),
    ] = None,
    log_format: Annotated[str, typer.Option(help="text | json")] = "text",
    log_level: Annotated[str, typer.Option(envvar="PACEKEEPER_LOG_LEVEL")] = "info",
) -> None:
    """Run the Ray-side controller: decide on the ScoreBoard's reports and act through Ray."""
    from pacekeeper.controller.core.policy import Mode, PolicyError, load_policy_file
    from pacekeeper.controller.runtime import logs
    from pacekeeper.controller.runtime.operator import effective_mode

    try:
        logs.configure(log_format, log_level)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--log-format") from e
    if log_format == "text":
        for handler in logging.getLogger().handlers:
            handler.setFormatter(TextWithFields())
    try:
        doc = load_policy_file(policy)
        doc = effective_mode(doc, None if mode is None else Mode(mode))
    except (PolicyError, ValueError, OSError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    import ray

    from pacekeeper.controller.sources.ray_scoreboard import RayRunner, load_control_key
    from pacekeeper.controller.sources.ray_state_store import KvStateStore

    try:
        control_key = load_control_key(control_key_file)
    except ValueError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    store = KvStateStore.from_key_file(state_key_file)
    ray.init(address=address, namespace="pacekeeper", log_to_driver=False)
    stop = threading.Event()
    try:
        runner = RayRunner(doc, store=store, control_key=control_key)
        runner.run_forever(stop, interval_s=interval_s)
    except KeyboardInterrupt:
        stop.set()
