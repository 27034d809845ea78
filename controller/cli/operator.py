"""``pacekeeper operator run``: the controller process the Helm chart starts."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from pacekeeper.controller.cli.kube_config import KubeConfigError
from pacekeeper.controller.cli.kube_config import api_client as _api_client

operator_app = typer.Typer(no_args_is_help=True, help="Run the remediation controller.")


def _metrics_access(value: str, tls_dir: Path | None, port: int) -> Any:
    from pacekeeper.controller.runtime.metrics_serving import MetricsAccess

    try:
        access = MetricsAccess(value)
    except ValueError:
        allowed = ", ".join(a.value for a in MetricsAccess)
        raise typer.BadParameter(
            f"{value!r} is not one of {allowed}", param_hint="--metrics-access"
        ) from None
    if port and access is MetricsAccess.KUBERNETES:
        if tls_dir is None:
            raise typer.BadParameter(
                "--metrics-access kubernetes needs --metrics-tls-dir: bearer tokens are never "
                "accepted over plain HTTP",
                param_hint="--metrics-tls-dir",
            )
        from pacekeeper.controller.runtime.tls import CertificateError, ServingCertificate

        try:
            ServingCertificate.from_directory(tls_dir)
        except CertificateError as e:
            raise typer.BadParameter(str(e), param_hint="--metrics-tls-dir") from None
    return access


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
    state_namespace: Annotated[
        str | None,
        typer.Option(
            envvar="PACEKEEPER_STATE_NAMESPACE",
            help="Where the controller keeps its state ConfigMaps (default: --namespace). "
            "The chart uses a namespace of its own, so the controller writes no ConfigMap "
            "beside its policy.",
        ),
    ] = None,
    migrate_state_from: Annotated[
        str | None,
        typer.Option(
            envvar="PACEKEEPER_MIGRATE_STATE_FROM",
            help="Before acting, copy an older release's state ConfigMaps from this "
            "namespace into --state-namespace, once (read only: nothing is deleted).",
        ),
    ] = None,
    lease_name: Annotated[str, typer.Option(envvar="PACEKEEPER_LEASE_NAME")] = (
        "pacekeeper-controller"
    ),
    identity: Annotated[str | None, typer.Option(envvar="PACEKEEPER_POD_NAME")] = None,
    metrics_port: Annotated[int, typer.Option(help="0 turns the metrics endpoint off.")] = 0,
    metrics_access: Annotated[
        str,
        typer.Option(
            help="kubernetes: HTTPS, each scrape's bearer token checked by TokenReview and "
            "SubjectAccessReview (get /metrics) | localhost: plain HTTP on 127.0.0.1 only | "
            "open: plain HTTP on every address, no authentication."
        ),
    ] = "localhost",
    metrics_tls_dir: Annotated[
        Path | None,
        typer.Option(
            help="Directory with tls.crt and tls.key (a mounted kubernetes.io/tls Secret; "
            "reloaded when it changes). Required with --metrics-access kubernetes."
        ),
    ] = None,
    log_format: Annotated[str, typer.Option(help="json | text")] = "json",
    log_level: Annotated[str, typer.Option(envvar="PACEKEEPER_LOG_LEVEL")] = "info",
    resync_s: Annotated[float, typer.Option(help="Re-reconcile every job this often.")] = 30.0,
    workers: Annotated[
        int, typer.Option(min=1, help="Reconciles in flight at once, never two of one job.")
    ] = 4,  # runtime.operator.DEFAULT_WORKERS (imported lazily, like the rest)
    on_invalid_policy: Annotated[
        str,
        typer.Option(
            help="exit (status 2) | wait: stay up deciding nothing, serve "
            "pacekeeper_policy_valid 0 and re-read the file until it is valid."
        ),
    ] = "exit",
    kubeconfig: Annotated[
        Path | None,
        typer.Option(
            envvar="KUBECONFIG",
            help="Kubeconfig file(s), ':'-separated; default: ~/.kube/config, then in-cluster.",
        ),
    ] = None,
) -> None:
    """Run the Kubernetes controller: watch opted-in jobs' StragglerReports, decide under
    the policy document and act (within its mode and budgets) as the elected leader."""
    from pacekeeper.controller.core.policy import Mode, PolicyError, load_policy_file
    from pacekeeper.controller.runtime import logs
    from pacekeeper.controller.runtime.operator import (
        OperatorConfig,
        default_identity,
        effective_mode,
        run,
    )
    from pacekeeper.controller.runtime.shutdown import StopRequest

    try:
        logs.configure(log_format, log_level)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--log-format") from e
    # From here on SIGTERM/SIGINT stop the operator cleanly, within STOP_TIMEOUT_S.
    stop = StopRequest()
    stop.handle_signals()
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
    access = _metrics_access(metrics_access, metrics_tls_dir, metrics_port)
    if on_invalid_policy not in ("exit", "wait"):
        raise typer.BadParameter(
            f"{on_invalid_policy!r} is not one of exit, wait", param_hint="--on-invalid-policy"
        )
    doc = None
    try:
        doc = effective_mode(load_policy_file(policy), cli_mode)
    except PolicyError as e:
        typer.echo(f"error: {e}", err=True)
        if on_invalid_policy == "exit":
            raise typer.Exit(2) from e
    config = OperatorConfig(
        namespace=namespace,
        identity=identity or default_identity(),
        leader_election=leader_election,
        lease_name=lease_name,
        resync_s=resync_s,
        metrics_port=metrics_port,
        metrics_access=access,
        metrics_tls_dir=metrics_tls_dir,
        workers=workers,
        state_namespace=state_namespace,
        migrate_state_from=migrate_state_from,
    )
    try:
        api_client = _api_client(kubeconfig)
    except KubeConfigError as e:
        typer.echo(f"pacekeeper: {e}", err=True)
        raise typer.Exit(2) from None
    if doc is None:  # --on-invalid-policy wait
        from pacekeeper.controller.runtime.policy_wait import run_after_valid_policy

        raise typer.Exit(run_after_valid_policy(api_client, policy, cli_mode, config, stop))
    raise typer.Exit(run(api_client, doc, config, stop=stop))
