"""``pacekeeper status kubernetes|ray``: each job's worst ranks, the controller's current
verdict and its reason, the marks it holds and the budget it used (docs/status.md).

Kubernetes: the StragglerReports (through the kubeconfig) and the controller's state
ConfigMaps in its namespace (``pacekeeper-job-<hash>``, ``pacekeeper-state``). Ray: the
ScoreBoard and the signed state in the GCS. Reads only; ``--watch`` redraws every
``--interval-s``. ``--hardware`` shows the memory of hardware instead: every remembered
GPU, its learned speed factor and its slow history (``pacekeeper-hardware-NNN``).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, cast

import typer

from pacekeeper.controller.cli.status_view import (
    JobStatus,
    hardware_table,
    job_status,
    status_table,
    watch_view,
)

status_app = typer.Typer(
    no_args_is_help=True, help="Show each job's worst ranks, verdict, marks and budgets."
)


class Output(StrEnum):
    TABLE = "table"
    JSON = "json"


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(2)


def kubernetes_rows(api_client: Any, namespace: str, now: datetime) -> list[JobStatus]:
    """One row per StragglerReport, with the state the controller in ``namespace`` keeps."""
    from kubernetes import client

    from pacekeeper.controller.core.ids import JobKey
    from pacekeeper.controller.runtime.state_store import StateStore
    from pacekeeper.detector.reporters.k8s_status import GROUP, PLURAL, VERSION

    custom = client.CustomObjectsApi(api_client)
    listed = cast(dict[str, Any], custom.list_cluster_custom_object(GROUP, VERSION, PLURAL))
    store = StateStore(api_client, namespace=namespace)
    cluster = store.load_cluster()
    rows = []
    for obj in sorted(listed.get("items", []), key=_key_of):
        key = JobKey(_key_of(obj))
        record = store.load_job(key, None)
        wire = (obj.get("status") or {}).get("report")
        rows.append(job_status(key, wire, record.state, record.decisions, cluster, now))
    return rows


def kubernetes_hardware(api_client: Any, namespace: str, now: datetime) -> dict[str, Any]:
    """The memory of hardware the controller in ``namespace`` keeps, as ``view`` shows it."""
    from pacekeeper.controller.runtime.state_store import StateStore

    return hardware_view(StateStore(api_client, namespace=namespace).hardware.load(), now)


def hardware_view(memory: Any, now: datetime) -> dict[str, Any]:
    # The decayed counts use the default half-life: the CLI does not read the policy.
    from pacekeeper.controller.core.hardware_views import view
    from pacekeeper.controller.core.policy import HardwareMemorySettings

    return view(memory, now, HardwareMemorySettings())


def _key_of(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


def ray_rows(board: Any, state: Any, get: Callable[[Any], Any], now: datetime) -> list[JobStatus]:
    """One row per job on the ScoreBoard, with the Ray-side controller's stored state. Ray
    keeps no decision records: the verdict column shows the ladder's step instead."""
    rows = []
    for head in sorted(get(board.jobs.remote()), key=lambda h: str(h["job"])):
        job = str(head["job"])
        wire = get(board.latest.remote(job))
        rows.append(job_status(job, wire, state.jobs.get(job), [], state.cluster, now))
    return rows


def _show_hardware(read: Callable[[], dict[str, Any]], title: str, output: Output) -> None:
    from rich.console import Console

    memory = read()
    if output is Output.JSON:
        typer.echo(json.dumps(memory, indent=2, default=str))
        return
    Console().print(hardware_table(memory, title))


def _show(
    read: Callable[[], list[JobStatus]], title: str, output: Output, watch: bool, every_s: float
) -> None:
    from rich.console import Console
    from rich.live import Live

    console = Console()
    if output is Output.JSON:
        typer.echo(json.dumps([r.to_json() for r in read()], indent=2, default=str))
        return
    if not watch:
        console.print(status_table(read(), title))
        return
    with Live(watch_view(read(), title), console=console, screen=False) as live:
        try:
            while True:
                time.sleep(every_s)
                stamp = datetime.now(UTC).strftime("%H:%M:%S")
                live.update(watch_view(read(), f"{title} at {stamp}"))
        except KeyboardInterrupt:
            return


Watch = Annotated[bool, typer.Option("--watch", "-w", help="Redraw, with a rank heatmap.")]
Every = Annotated[float, typer.Option(min=0.2, help="Seconds between redraws (--watch).")]
Out = Annotated[Output, typer.Option("--output", "-o", help="table | json")]
Hardware = Annotated[
    bool, typer.Option("--hardware", help="Show the memory of hardware: every remembered GPU.")
]


@status_app.command("kubernetes")
def status_kubernetes(  # noqa: PLR0917 - one parameter per option
    namespace: Annotated[
        str, typer.Option(envvar="PACEKEEPER_NAMESPACE", help="The controller's namespace.")
    ] = "pacekeeper",
    kubeconfig: Annotated[Path | None, typer.Option(help="Kubeconfig file.")] = None,
    output: Out = Output.TABLE,
    watch: Watch = False,
    interval_s: Every = 5.0,
    hardware: Hardware = False,
) -> None:
    """Jobs with a StragglerReport and what the controller decided about each."""
    from pacekeeper.controller.cli.operator import KubeConfigError, _api_client

    try:
        api = _api_client(kubeconfig)
    except KubeConfigError as e:
        raise _fail(str(e)) from None
    title = f"pacekeeper status (controller namespace {namespace})"
    if hardware:

        def memory() -> dict[str, Any]:
            try:
                return kubernetes_hardware(api, namespace, datetime.now(UTC))
            except Exception as e:  # the client's errors, and a memory it cannot read
                raise _fail(f"cannot read the memory of hardware: {e}") from None

        _show_hardware(memory, f"{title}: memory of hardware", output)
        return

    def read() -> list[JobStatus]:
        try:
            return kubernetes_rows(api, namespace, datetime.now(UTC))
        except Exception as e:  # the client raises ApiException, urllib3 errors, timeouts
            raise _fail(f"cannot read reports or state: {e}") from None

    _show(read, title, output, watch, interval_s)


@status_app.command("ray")
def status_ray(  # noqa: PLR0917 - one parameter per option
    address: Annotated[str, typer.Option(help="Ray address.")] = "auto",
    state_key_file: Annotated[
        Path | None, typer.Option(help="HMAC key of the Ray-side controller's state.")
    ] = None,
    output: Out = Output.TABLE,
    watch: Watch = False,
    interval_s: Every = 5.0,
    hardware: Hardware = False,
) -> None:
    """Jobs on the ScoreBoard and the Ray-side controller's state of each."""
    try:
        import ray
    except ImportError:
        raise _fail("status on Ray needs ray: pip install 'pacekeeper[ray]'") from None
    from pacekeeper.controller.sources.ray_state_store import KvStateStore
    from pacekeeper.detector.reporters.ray_scoreboard import get_scoreboard

    try:
        ray.init(address=address, namespace="pacekeeper", logging_level=logging.ERROR,
                 log_to_driver=False)  # fmt: skip
        board = get_scoreboard(create=False)
        store = KvStateStore.from_key_file(state_key_file)
    except (ConnectionError, ValueError, RuntimeError, OSError) as e:
        raise _fail(f"cannot reach the ScoreBoard: {e}") from None

    if hardware:
        memory = lambda: hardware_view(store.load().hardware, datetime.now(UTC))  # noqa: E731
        _show_hardware(memory, "pacekeeper status (Ray): memory of hardware", output)
        return

    def read() -> list[JobStatus]:
        return ray_rows(board, store.load(), ray.get, datetime.now(UTC))

    _show(read, "pacekeeper status (Ray)", output, watch, interval_s)
