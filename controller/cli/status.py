"""``pacekeeper status [kubernetes|ray]``: each job's worst ranks, the age of its newest
report, the controller's current verdict and its reason, the policy in force (and the
annotation that chose it), the marks it holds and the budget it used (docs/status.md).

Kubernetes (also plain ``pacekeeper status``): the StragglerReports (configuration found
as kubectl finds it, ``kube_config.py``), the job's pods (their override annotations), and
the controller's state ConfigMaps (``pacekeeper-job-<hash>``, ``pacekeeper-state``, in
its state namespace) and policy ConfigMap in the namespaces ``controller_lookup.py``
finds. Ray: the ScoreBoard and the signed state in the GCS. Reads only; ``--watch``
redraws every ``--interval-s``.
``--hardware`` shows the memory of hardware instead: every remembered GPU, its learned
speed factor and its slow history (``pacekeeper-hardware-NNN``).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, cast

import typer

from pacekeeper.controller.cli.controller_lookup import (
    ControllerFound,
    PolicyFound,
    find_controller,
    find_policy,
)
from pacekeeper.controller.cli.status_view import (
    JobStatus,
    ShownThresholds,
    hardware_table,
    job_status,
    status_table,
    thresholds_of,
    watch_view,
)

status_app = typer.Typer(
    help="Show each job's worst ranks, verdict, marks and budgets "
    "(Kubernetes unless a platform is named)."
)


class Output(StrEnum):
    TABLE = "table"
    JSON = "json"


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(2)


@dataclass(frozen=True, slots=True)
class KubernetesView:
    """What one ``status`` read needs besides the clock: where the jobs and the controller
    are, and the policy document in force."""

    api_client: Any
    jobs_namespace: str | None
    """None: every namespace."""
    controller: ControllerFound
    policy: PolicyFound

    def title(self) -> str:
        where = "all namespaces" if self.jobs_namespace is None else self.jobs_namespace
        if self.controller.namespace is None:
            return f"pacekeeper status ({where}; no controller found)"
        state = self.controller.state_in
        kept = "" if state == self.controller.namespace else f", state in {state}"
        return (
            f"pacekeeper status ({where}; controller in {self.controller.namespace}{kept}, "
            f"found by {self.controller.how})"
        )

    def caption(self) -> str | None:
        if self.controller.namespace is None:
            return self.controller.not_found_message()
        if self.controller.others:
            return (
                f"traces of a controller also in {', '.join(self.controller.others)}; "
                "pass --controller-namespace to show another"
            )
        return None


def kubernetes_rows(view: KubernetesView, now: datetime) -> list[JobStatus]:
    """One row per StragglerReport, with the state the controller keeps, the policy in force
    for the job and the annotations on its pods that chose that policy or mode."""
    from kubernetes import client

    from pacekeeper.controller.core.ids import JobKey
    from pacekeeper.controller.runtime.state_store import StateStore
    from pacekeeper.controller.sources.kubernetes import opt_in_of, pods_of_job
    from pacekeeper.detector.reporters.k8s_status import GROUP, PLURAL, VERSION

    custom = client.CustomObjectsApi(view.api_client)
    if view.jobs_namespace is None:
        listed = custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)
    else:
        listed = custom.list_namespaced_custom_object(GROUP, VERSION, view.jobs_namespace, PLURAL)
    ns = view.controller.state_in
    store = None if ns is None else StateStore(view.api_client, namespace=ns)
    cluster = store.load_cluster() if store is not None else None
    pods = _PodsByNamespace(view.api_client)
    rows = []
    for obj in sorted(cast(dict[str, Any], listed).get("items", []), key=_key_of):
        key = JobKey(_key_of(obj))
        meta = obj.get("metadata") or {}
        opt_in = opt_in_of(pods_of_job(pods.of(str(meta.get("namespace"))), str(meta.get("name"))))
        wire = (obj.get("status") or {}).get("report")
        state, records = None, []
        if store is not None:
            record = store.load_job(key, None)
            state, records = record.state, list(record.decisions)
        decided = (records[-1] if records else {}).get("policy") or None
        policy_name = decided or opt_in.policy_name
        rows.append(
            job_status(
                key, wire, state, records, cluster or _empty_cluster(), now,
                policy=_policy_name(view.policy, policy_name),
                thresholds=_thresholds(view.policy, policy_name),
                policy_chosen_by=_chosen_by(state, records, "policy", opt_in.policy_name),
                mode_chosen_by=_chosen_by(
                    state, records, "mode",
                    opt_in.mode_override.value if opt_in.mode_override else None,
                ),
                controller_found=store is not None,
            )
        )  # fmt: skip
    return rows


def _empty_cluster() -> Any:
    from pacekeeper.controller.core.state import ClusterState

    return ClusterState()


def _policy_name(found: PolicyFound, name: str | None) -> str | None:
    if name is not None or found.document is None:
        return name
    return found.document.default_policy


def _thresholds(found: PolicyFound, name: str | None) -> ShownThresholds:
    return thresholds_of(found.document, found.source, name)


OVERRIDE_ANNOTATIONS = {"policy": "pacekeeper.dev/policy", "mode": "pacekeeper.dev/mode"}


def _chosen_by(
    state: Any, records: Sequence[Mapping[str, Any]], what: str, annotated: str | None
) -> str | None:
    """``annotation pacekeeper.dev/policy=gpu`` when the job's pod-template annotation
    chose its policy (``what``) or holds its mode. The controller's word first: its job
    state (``policy_source``/``mode_source``) or its newest decision's evidence
    (``policySource``/``modeSource``). Only for a job the controller keeps no state of
    are the pods' annotations read here, and then not claimed when its newest decision
    used something else."""
    last = records[-1] if records else {}
    value = last.get(what) or None
    if state is not None:
        source = getattr(state, f"{what}_source", None)
        source = source or (last.get("evidence") or {}).get(f"{what}Source")
        if not source:
            return None
        return f"{source}={value}" if value else str(source)
    if annotated is None or value not in (None, annotated):
        return None
    return f"annotation {OVERRIDE_ANNOTATIONS[what]}={annotated}"


class _PodsByNamespace:
    """Each namespace's pods, listed once per read; a namespace the reader may not list
    pods in shows no overrides rather than failing the whole view."""

    def __init__(self, api_client: Any) -> None:
        from kubernetes import client

        self._core = client.CoreV1Api(api_client)
        self._seen: dict[str, list[dict[str, Any]]] = {}

    def of(self, namespace: str) -> list[dict[str, Any]]:
        if namespace not in self._seen:
            try:
                resp: Any = self._core.list_namespaced_pod(
                    namespace, _preload_content=False, _request_timeout=10.0
                )
                self._seen[namespace] = list(json.loads(resp.data or b"{}").get("items") or [])
            except Exception:  # ApiException (403), urllib3 errors: overrides unknown
                self._seen[namespace] = []
        return self._seen[namespace]


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


def ray_rows(
    board: Any,
    state: Any,
    get: Callable[[Any], Any],
    now: datetime,
    policies: PolicyFound | None = None,
) -> list[JobStatus]:
    """One row per job on the ScoreBoard, with the Ray-side controller's stored state. Ray
    keeps no decision records: the verdict column shows the ladder's step instead; the
    thresholds are those of ``--policy`` (the Ray-side controller's document), else the
    policy model's defaults."""
    found = policies or PolicyFound(None, "no --policy given")
    rows = []
    for head in sorted(get(board.jobs.remote()), key=lambda h: str(h["job"])):
        job = str(head["job"])
        wire = get(board.latest.remote(job))
        rows.append(
            job_status(
                job, wire, state.jobs.get(job), [], state.cluster, now,
                policy=_policy_name(found, None), thresholds=_thresholds(found, None),
            )
        )  # fmt: skip
    return rows


PIPED_WIDTH = 400
"""Columns when the output is not a terminal: whole lines for grep and scripts, as kubectl
prints them, instead of cells folded to fit 80."""


def _console() -> Any:
    from rich.console import Console

    console = Console()
    return console if console.is_terminal else Console(width=PIPED_WIDTH)


def _show_hardware(read: Callable[[], dict[str, Any]], title: str, output: Output) -> None:
    memory = read()
    if output is Output.JSON:
        typer.echo(json.dumps(memory, indent=2, default=str))
        return
    _console().print(hardware_table(memory, title))


def _show(  # noqa: PLR0917 - one argument per part of the screen
    read: Callable[[], list[JobStatus]],
    title: str,
    output: Output,
    watch: bool,
    every_s: float,
    caption: str | None = None,
) -> None:
    from rich.live import Live

    console = _console()
    if output is Output.JSON:
        typer.echo(json.dumps([r.to_json() for r in read()], indent=2, default=str))
        if caption:
            typer.echo(caption, err=True)
        return
    if not watch:
        console.print(status_table(read(), title, caption))
        return
    with Live(watch_view(read(), title, caption), console=console, screen=False) as live:
        try:
            while True:
                time.sleep(every_s)
                stamp = datetime.now(UTC).strftime("%H:%M:%S")
                live.update(watch_view(read(), f"{title} at {stamp}", caption))
        except KeyboardInterrupt:
            return


Watch = Annotated[bool, typer.Option("--watch", "-w", help="Redraw, with a rank heatmap.")]
Every = Annotated[float, typer.Option(min=0.2, help="Seconds between redraws (--watch).")]
Out = Annotated[Output, typer.Option("--output", "-o", help="table | json")]
Hardware = Annotated[
    bool, typer.Option("--hardware", help="Show the memory of hardware: every remembered GPU.")
]
PolicyFile = Annotated[
    Path | None,
    typer.Option(
        "--policy",
        help="Policy document whose thresholds to show (default: the controller's policy "
        "ConfigMap; without one, the policy model's defaults).",
    ),
]
JobsNamespace = Annotated[
    str | None,
    typer.Option(
        "--namespace",
        "-n",
        help="Jobs in this namespace only (default: the kubeconfig context's namespace; "
        "every namespace when the context sets none).",
    ),
]
AllNamespaces = Annotated[
    bool, typer.Option("--all-namespaces", "-A", help="Jobs in every namespace.")
]
ControllerNamespace = Annotated[
    str | None,
    typer.Option(
        envvar="PACEKEEPER_NAMESPACE",
        help="The controller's namespace (default: found from its Lease, state or policy "
        "ConfigMap).",
    ),
]
StateNamespace = Annotated[
    str | None,
    typer.Option(
        envvar="PACEKEEPER_STATE_NAMESPACE",
        help="Where the controller keeps its state ConfigMaps (default: found from their "
        "pacekeeper.dev/controller-namespace annotation; else the controller's namespace).",
    ),
]
KubeconfigOpt = Annotated[
    Path | None,
    typer.Option(
        help="Kubeconfig file(s), ':'-separated (default: KUBECONFIG, ~/.kube/config, "
        "in-cluster, as kubectl)."
    ),
]


def _typed(ctx: typer.Context, name: str) -> bool:
    # By name: typer ships its own copy of click, whose ParameterSource is not click's.
    return getattr(ctx.get_parameter_source(name), "name", None) == "COMMANDLINE"


@status_app.callback(invoke_without_command=True)
def status_default(  # noqa: PLR0917 - one parameter per option
    ctx: typer.Context,
    namespace: JobsNamespace = None,
    all_namespaces: AllNamespaces = False,
    controller_namespace: ControllerNamespace = None,
    kubeconfig: KubeconfigOpt = None,
    policy: PolicyFile = None,
    output: Out = Output.TABLE,
    watch: Watch = False,
    interval_s: Every = 5.0,
    hardware: Hardware = False,
    state_namespace: StateNamespace = None,
) -> None:
    """Kubernetes jobs and the controller's view of each (``pacekeeper status --watch``);
    ``pacekeeper status ray`` for Ray."""
    if ctx.invoked_subcommand is not None:
        # Options typed before the platform (``status --watch kubernetes``) apply to it.
        given = {name: value for name, value in ctx.params.items() if _typed(ctx, name)}
        if given:
            ctx.default_map = {**(ctx.default_map or {}), ctx.invoked_subcommand: given}
        return
    status_kubernetes(
        namespace, all_namespaces, controller_namespace, kubeconfig, policy, output, watch,
        interval_s, hardware, state_namespace,
    )  # fmt: skip


@status_app.command("kubernetes")
def status_kubernetes(  # noqa: PLR0917 - one parameter per option
    namespace: JobsNamespace = None,
    all_namespaces: AllNamespaces = False,
    controller_namespace: ControllerNamespace = None,
    kubeconfig: KubeconfigOpt = None,
    policy: PolicyFile = None,
    output: Out = Output.TABLE,
    watch: Watch = False,
    interval_s: Every = 5.0,
    hardware: Hardware = False,
    state_namespace: StateNamespace = None,
) -> None:
    """Jobs with a StragglerReport and what the controller decided about each."""
    from pacekeeper.controller.cli import kube_config

    try:
        found = kube_config.connect(kubeconfig)
    except kube_config.KubeConfigError as e:
        raise _fail(f"{e} (for Ray: pacekeeper status ray)") from None
    api = found.api_client
    try:
        controller = find_controller(api, controller_namespace, state_namespace)
    except Exception as e:  # the client's errors
        raise _fail(f"cannot look for the controller: {e}") from None
    if hardware:
        ns = controller.state_in
        if ns is None:
            raise _fail(controller.not_found_message())

        def memory() -> dict[str, Any]:
            try:
                return kubernetes_hardware(api, ns, datetime.now(UTC))
            except Exception as e:  # the client's errors, and a memory it cannot read
                raise _fail(f"cannot read the memory of hardware: {e}") from None

        kept = "" if ns == controller.namespace else f", state in {ns}"
        _show_hardware(memory, f"pacekeeper status (controller in {controller.namespace}{kept})",
                       output)  # fmt: skip
        return
    jobs_ns = None if all_namespaces else (namespace or found.namespace)
    view = KubernetesView(api, jobs_ns, controller, find_policy(api, controller.namespace, policy))

    def read() -> list[JobStatus]:
        try:
            return kubernetes_rows(view, datetime.now(UTC))
        except Exception as e:  # the client raises ApiException, urllib3 errors, timeouts
            raise _fail(f"cannot read reports or state: {e}") from None

    _show(read, view.title(), output, watch, interval_s, view.caption())


@status_app.command("ray")
def status_ray(  # noqa: PLR0917 - one parameter per option
    address: Annotated[str, typer.Option(help="Ray address.")] = "auto",
    state_key_file: Annotated[
        Path | None, typer.Option(help="HMAC key of the Ray-side controller's state.")
    ] = None,
    policy: PolicyFile = None,
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

    policies = find_policy(None, None, policy) if policy else PolicyFound(None, "no --policy given")

    def read() -> list[JobStatus]:
        return ray_rows(board, store.load(), ray.get, datetime.now(UTC), policies)

    _show(read, "pacekeeper status (Ray)", output, watch, interval_s)
