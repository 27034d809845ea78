"""``pacekeeper operator run``: the controller process the Helm chart starts."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

operator_app = typer.Typer(no_args_is_help=True, help="Run the remediation controller.")


def _api_client(kubeconfig: Path | None) -> Any:
    from kubernetes import client
    from kubernetes import config as kube_config

    config: Any = kube_config  # untyped in the kubernetes package
    if kubeconfig is not None:
        return config.new_client_from_config(config_file=str(kubeconfig))
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    return client.ApiClient()


@operator_app.command("run")
def run_command(  # noqa: PLR0917 (one parameter per option)
    policy: Annotated[Path, typer.Option(help="Policy document (YAML).", exists=False)],
    mode: Annotated[
        str | None,
        typer.Option(help="observe | dry-run | enforce; can only lower the document's mode."),
    ] = None,
    leader_election: Annotated[bool, typer.Option("--leader-election/--no-leader-election")] = True,
    namespace: Annotated[
        str, typer.Option(envvar="PACEKEEPER_NAMESPACE", help="The controller's namespace.")
    ] = "pacekeeper",
    lease_name: Annotated[str, typer.Option(envvar="PACEKEEPER_LEASE_NAME")] = (
        "pacekeeper-controller"
    ),
    identity: Annotated[str | None, typer.Option(envvar="PACEKEEPER_POD_NAME")] = None,
    metrics_port: Annotated[int, typer.Option(help="0 turns the metrics endpoint off.")] = 0,
    log_format: Annotated[str, typer.Option(help="json | text")] = "json",
    log_level: Annotated[str, typer.Option(envvar="PACEKEEPER_LOG_LEVEL")] = "info",
    resync_s: Annotated[float, typer.Option(help="Re-reconcile every job this often.")] = 30.0,
    kubeconfig: Annotated[Path | None, typer.Option(envvar="KUBECONFIG")] = None,
) -> None:
    from pacekeeper.controller.core.policy import Mode, PolicyError, load_policy_file
    from pacekeeper.controller.runtime import logs
    from pacekeeper.controller.runtime.operator import (
        OperatorConfig,
        default_identity,
        effective_mode,
        run,
    )

    try:
        logs.configure(log_format, log_level)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--log-format") from e
    cli_mode = None
    if mode is not None:
        try:
            cli_mode = Mode(mode)
        except ValueError:
            raise typer.BadParameter(
                f"{mode!r} is not one of observe, dry-run, enforce", param_hint="--mode"
            ) from None
    if metrics_port < 0 or metrics_port > 65535:
        raise typer.BadParameter(f"{metrics_port} is not a port", param_hint="--metrics-port")
    try:
        doc = effective_mode(load_policy_file(policy), cli_mode)
    except PolicyError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from e
    config = OperatorConfig(
        namespace=namespace,
        identity=identity or default_identity(),
        leader_election=leader_election,
        lease_name=lease_name,
        resync_s=resync_s,
        metrics_port=metrics_port,
    )
    raise typer.Exit(run(_api_client(kubeconfig), doc, config))
