"""``pacekeeper webhook serve``: the admission webhook the chart's ``webhook.enabled`` runs."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer

webhook_cli = typer.Typer(
    no_args_is_help=True,
    help="The admission webhook that adds the reporting environment to opted-in pods.",
)

logger = logging.getLogger(__name__)


@webhook_cli.command("serve")
def serve_command(
    tls_dir: Annotated[
        Path,
        typer.Option(
            help="Directory with tls.crt and tls.key (a mounted kubernetes.io/tls Secret; "
            "reloaded when it changes)."
        ),
    ],
    port: Annotated[int, typer.Option(min=1, max=65535, help="HTTPS port.")] = 9443,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "0.0.0.0",
    log_format: Annotated[str, typer.Option(help="json | text")] = "json",
    log_level: Annotated[str, typer.Option(envvar="PACEKEEPER_LOG_LEVEL")] = "info",
) -> None:
    """Answer the apiserver's AdmissionReviews for pod creates on /mutate-pods (HTTPS):
    add the reporting environment (docs/opt-in.md) to each container of a pod annotated
    pacekeeper.dev/detect=true that does not set it itself. Needs no API access. Runs
    until SIGTERM."""
    from pacekeeper.controller.runtime import logs
    from pacekeeper.controller.runtime.shutdown import StopRequest
    from pacekeeper.controller.runtime.tls import CertificateError
    from pacekeeper.controller.runtime.webhook import serve_webhook

    try:
        logs.configure(log_format, log_level)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--log-format") from e
    stop = StopRequest()
    stop.handle_signals()
    try:
        serving = serve_webhook(port, tls_dir, host)
    except CertificateError as e:
        typer.echo(f"error: --tls-dir: {e}", err=True)
        raise typer.Exit(2) from None
    except OSError as e:
        typer.echo(f"error: cannot listen on {host}:{port}: {e.strerror or e}", err=True)
        raise typer.Exit(2) from None
    while not stop.flag.wait(1.0):
        pass
    serving.close()
    logger.info("webhook stopped", extra={"reason": stop.reason})
