"""The Kopf runtime around the core: watches, a per-job work queue, leader election.

Kopf watches StragglerReports, opted-in pods and nodes; each event only *enqueues* the
job it concerns (``work_queue.py``). ``workers`` workers drain the queue in due order,
each running the level-based ``Reconciler.reconcile_job`` in a thread, never two for one
job; the answer's ``recheck_at`` (ladder timeouts, warm-ups, cooldowns, budget backoffs)
re-enqueues the job, and every job is reconciled again at least every ``resync_s``,
which catches anything a dropped watch event missed. A report event hands its body to
the reconcile, which then needs no GET. Pods and nodes come from the watch-fed
``WorldCache``. Only the Lease holder runs Kopf at all, and the reconciler checks
leadership again before every reconcile. How it stops (signals, bounds, giving the
Lease back) is in ``shutdown.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pacekeeper.controller.core.ids import JobKey
from pacekeeper.controller.core.policy import Mode, PolicyDocument
from pacekeeper.controller.runtime import watch_json
from pacekeeper.controller.runtime.diff_base import status_free_diff_base
from pacekeeper.controller.runtime.leader import LeaseElector
from pacekeeper.controller.runtime.metrics import ControllerMetrics
from pacekeeper.controller.runtime.metrics_serving import (
    MetricsAccess,
    MetricsServing,
    serve_metrics,
)
from pacekeeper.controller.runtime.reconcile import RETRY_SOON_S, Reconciler
from pacekeeper.controller.runtime.report_birth import report_name_of
from pacekeeper.controller.runtime.shutdown import RECONCILE_DRAIN_S, BlockingCalls, StopRequest
from pacekeeper.controller.runtime.work_queue import WorkQueue
from pacekeeper.controller.sources.kubernetes import DETECT_ANNOTATION, JOB_NAME_LABELS
from pacekeeper.controller.sources.world_cache import WorldCache
from pacekeeper.detector.reporters.k8s_status import GROUP, PLURAL, VERSION

logger = logging.getLogger(__name__)


DEFAULT_WORKERS = 4
"""Reconciles mostly wait on the API server; four keep a 1,000-job cluster current on a
fraction of one core (docs/performance.md), while one slow API answer holds up one job."""
PENDING_BODIES_MAX = 256
"""Report bodies kept for queued reconciles (each ~160 kB parsed for a 256-rank job); a
job queued past this many is read with a GET when its turn comes."""
SWEEP_CHECK_S = 15.0
"""How often the cache's unconfirmed count is checked until the watch's listing is in."""


@dataclass(frozen=True, slots=True)
class OperatorConfig:
    namespace: str
    """The controller's own namespace (its Lease; its policy ConfigMap, mounted)."""
    identity: str
    leader_election: bool = True
    lease_name: str = "pacekeeper-controller"
    resync_s: float = 30.0
    metrics_port: int = 0
    """0: no metrics endpoint."""
    metrics_access: MetricsAccess = MetricsAccess.LOCALHOST
    metrics_tls_dir: Path | None = None
    owner: str = "pacekeeper"
    workers: int = DEFAULT_WORKERS
    """Reconciles in flight at once (of different jobs)."""
    state_namespace: str | None = None
    """Where the state ConfigMaps live (None: ``namespace``, as before the chart moved
    them out: docs/security.md)."""
    migrate_state_from: str | None = None
    """Copy an older release's state from this namespace first (``state_migration``)."""

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError(f"workers must be at least 1, got {self.workers}")
        self.metrics_serving()  # a bad metrics setting fails here, before any I/O

    def metrics_serving(self) -> MetricsServing:
        return MetricsServing(self.metrics_port, self.metrics_access, self.metrics_tls_dir)


def _job_of_pod(body: Any) -> JobKey | None:
    meta = body.get("metadata") or {}
    labels = meta.get("labels") or {}
    for label in JOB_NAME_LABELS:
        if labels.get(label):
            return JobKey(f"{meta.get('namespace')}/{labels[label]}")
    return None


def _report_of_pod(body: Any) -> JobKey | None:
    name = report_name_of(body)
    if name is None:
        return None
    return JobKey(f"{(body.get('metadata') or {}).get('namespace')}/{name}")


def connection_info(api_client: Any) -> Any:
    """Kopf logs in with exactly the credentials of our own client (in-cluster token,
    kubeconfig, or ``--kubeconfig``), so both always talk to the same API server."""
    import kopf

    cfg = api_client.configuration
    auth = (cfg.api_key or {}).get("authorization") or (cfg.api_key or {}).get("BearerToken")
    scheme, token = None, None
    if auth:
        scheme, _, token = str(auth).partition(" ")
        if not token:
            scheme, token = "Bearer", scheme
    return kopf.ConnectionInfo(
        server=cfg.host,
        ca_path=cfg.ssl_ca_cert,
        insecure=not cfg.verify_ssl,
        scheme=scheme,
        token=token,
        certificate_path=cfg.cert_file,
        private_key_path=cfg.key_file,
        username=cfg.username or None,
        password=cfg.password or None,
    )


def build_registry(
    reconciler: Reconciler,
    config: OperatorConfig,
    api_client: Any,
    calls: BlockingCalls | None = None,
) -> Any:
    """A private Kopf registry (no global handlers, so tests can run several)."""
    import kopf

    calls = calls or BlockingCalls()

    registry = kopf.OperatorRegistry()
    state: dict[str, Any] = {}
    bodies: dict[JobKey, Any] = {}
    """The newest report body the watch delivered for each queued job."""

    @kopf.on.login(registry=registry)
    def _login(**_: Any) -> Any:
        return connection_info(api_client)

    def queue() -> WorkQueue:
        q: WorkQueue = state["queue"]
        return q

    @kopf.on.startup(registry=registry)
    async def _startup(settings: kopf.OperatorSettings, **_: Any) -> None:
        # We persist nothing through Kopf: no finalizers, no progress annotations,
        # no Events about handlers. Our state lives in status and the state ConfigMap.
        settings.posting.enabled = False
        settings.persistence.finalizer = "pacekeeper.dev/unused-finalizer"
        settings.persistence.diffbase_storage = status_free_diff_base()
        settings.watching.server_timeout = 60
        settings.watching.client_timeout = 70
        # Kopf's other requests would wait 5 minutes for a server that does not answer.
        settings.networking.request_timeout = 30
        settings.networking.connect_timeout = 10
        loop = asyncio.get_running_loop()
        state["queue"] = WorkQueue(loop.time)
        reconciler.metrics.watch_queue(state["queue"].backlog)
        tasks = []
        if reconciler.cache is not None and not reconciler.cache.primed:
            await calls.run(_prime, reconciler)
            tasks.append(asyncio.create_task(_sweep(reconciler, calls)))
        tasks += [
            asyncio.create_task(_worker(reconciler, queue(), config, calls, bodies))
            for _ in range(config.workers)
        ]
        tasks.append(asyncio.create_task(_resync(queue(), config, seen)))
        state["tasks"] = tasks

    @kopf.on.cleanup(registry=registry)
    async def _cleanup(**_: Any) -> None:
        for task in state.get("tasks", ()):
            task.cancel()

    seen: dict[JobKey, tuple[Any, ...]] = {}

    @kopf.on.event(GROUP, VERSION, PLURAL, registry=registry)
    async def _report_event(
        *, event: kopf.RawEvent, body: kopf.Body, namespace: str | None, name: str, **_: Any
    ) -> None:
        key = JobKey(f"{namespace}/{name}")
        if "queue" not in state:
            return
        if event.get("type") == "DELETED":
            bodies.pop(key, None)
            seen.pop(key, None)
            queue().add(key)  # the reconcile finds it gone and deletes what we kept
            return
        raw = event.get("object")
        if key in bodies or len(bodies) < PENDING_BODIES_MAX:
            bodies[key] = raw  # the newest version, whatever caused it
        # Our own status.controller writes come back as events too: only what the job
        # or a person changed (report, annotations, spec) is worth a reconcile.
        sig = _trigger_signature(body)
        if seen.get(key) == sig:
            return
        seen[key] = sig
        queue().add(key)

    @kopf.on.event(
        "", "v1", "pods", annotations={DETECT_ANNOTATION: kopf.PRESENT}, registry=registry
    )
    async def _pod_event(*, event: kopf.RawEvent, body: kopf.Body, **_: Any) -> None:
        if reconciler.cache is not None:
            reconciler.cache.put_pod(event.get("type"), body)
        if "queue" not in state:
            return
        # The job its report is named after (the controller creates that report), and the
        # one the first job-name label names, which an existing report may be named by.
        for key in {k for k in (_job_of_pod(body), _report_of_pod(body)) if k is not None}:
            queue().add(key, delay_s=1.0)  # pods come in bursts: let them settle

    @kopf.on.event("", "v1", "nodes", registry=registry)
    async def _node_event(*, event: kopf.RawEvent, body: kopf.Body, **_: Any) -> None:
        if reconciler.cache is not None:
            reconciler.cache.put_node(event.get("type"), body)

    return registry


def _prime(reconciler: Reconciler) -> None:
    """One LIST of pods and nodes fills the cache before the first reconcile reads it."""
    assert reconciler.cache is not None
    src = reconciler.source
    pods = src.list_all_pods()
    nodes = src.list_nodes()
    opted = [p for p in pods if DETECT_ANNOTATION in _annotations_of(p)]
    reconciler.cache.prime(opted, nodes)
    logger.info("cache primed", extra={"pods": len(opted), "nodes": len(nodes)})


async def _sweep(reconciler: Reconciler, calls: BlockingCalls) -> None:
    """Once the watch's own listing has confirmed what it will (the unconfirmed count
    stops falling), settle the rest against a second LIST: objects deleted between the
    priming LIST and the watch's start must not stay in the cache."""
    cache = reconciler.cache
    assert cache is not None
    before = cache.unconfirmed()
    while before:
        await asyncio.sleep(SWEEP_CHECK_S)
        left = cache.unconfirmed()
        if left and left < before:
            before = left
            continue
        if left:
            src = reconciler.source
            try:
                pods = await calls.run(src.list_all_pods)
                nodes = await calls.run(src.list_nodes)
            except Exception:
                logger.warning("cache sweep list failed", exc_info=True)
                continue
            opted = [p for p in pods if DETECT_ANNOTATION in _annotations_of(p)]
            dropped = cache.sweep(opted, nodes)
            logger.info("cache swept", extra={"unconfirmed": left, "dropped": dropped})
        break
    _freeze_heap()


def _freeze_heap() -> None:
    """Take what lives as long as the process out of the collector's full passes.

    The primed cache and Kopf's memory of every watched pod and node are most of the
    heap and never cyclic garbage, yet each full collection walked all of them: against
    a real kube-apiserver, 200 jobs of 256 ranks, the collector took about a quarter of
    the controller's CPU, most of it in full passes (docs/performance.md, issue 16).
    Once the watches have listed everything, one collection clears what is garbage and
    ``gc.freeze`` moves the rest to the permanent generation; later objects are
    collected as before."""
    gc.collect()
    gc.freeze()
    logger.info("heap frozen", extra={"objects": gc.get_freeze_count()})


def _annotations_of(obj: Any) -> Any:
    return (obj.get("metadata") or {}).get("annotations") or {}


def _trigger_signature(body: Any) -> tuple[Any, ...]:
    status = body.get("status") or {}
    report = status.get("report") or {}
    meta = body.get("metadata") or {}
    return (
        report.get("sequence"),
        report.get("generatedAt"),
        status.get("incarnation"),
        repr(sorted((meta.get("annotations") or {}).items())),
        meta.get("generation"),
    )


async def _worker(
    reconciler: Reconciler,
    queue: WorkQueue,
    config: OperatorConfig,
    calls: BlockingCalls,
    bodies: dict[JobKey, Any],
) -> None:
    while True:
        key = await queue.next()
        body = bodies.pop(key, None)
        try:
            result = await calls.run(reconciler.reconcile_job, key, body, guarded=True)
        except Exception:
            logger.exception("reconcile failed", extra={"job": key})
            queue.done(key)
            queue.add(key, RETRY_SOON_S)
            continue
        queue.done(key)
        if result.gone:
            continue  # nothing left to reconcile; a new report is a new event
        delay = config.resync_s
        if result.recheck_at is not None:
            delay = min(delay, (result.recheck_at - datetime.now(UTC)).total_seconds())
        queue.add(key, max(0.0, delay))


async def _resync(queue: WorkQueue, config: OperatorConfig, seen: dict[JobKey, Any]) -> None:
    """Every job the watch knows is due again within ``resync_s`` (the queue keeps the
    earlier time: this only matters for a job whose re-queue went missing). The watch's
    listing (at start, and again after any 410) is how jobs are found: no LIST of every
    report here, which at 1,000 jobs is 50 MB each time."""
    while True:
        await asyncio.sleep(config.resync_s)
        for key in list(seen):
            queue.add(key, config.resync_s)


def run(
    api_client: Any,
    policies: PolicyDocument,
    config: OperatorConfig,
    *,
    stop_flag: threading.Event | None = None,
    ready_flag: threading.Event | None = None,
    metrics: ControllerMetrics | None = None,
    stop: StopRequest | None = None,
) -> int:
    """Run until stopped or leadership is lost; returns the process exit code: 0 after a
    stop (``stop``, or ``stop_flag`` set), 1 when the Lease was lost, ``STATE_NOT_MOVED``
    when an older release's state could not be moved."""
    metrics = metrics or ControllerMetrics()
    serve_metrics(metrics.registry, config.metrics_serving(), api_client)
    stop = stop or StopRequest(stop_flag)
    calls = BlockingCalls()
    leading = threading.Event()
    lost = threading.Event()
    elector: LeaseElector | None = None
    lease_client: Any = None
    if config.leader_election:
        from kubernetes import client

        def started() -> None:
            metrics.leader.set(1)
            leading.set()

        def stopped() -> None:
            metrics.leader.set(0)
            if not stop.is_set():  # a loss, not our own goodbye
                lost.set()
                # Never act without the lease: stop Kopf; the pod restarts us.
                stop.request("lost leadership")

        lease_client = lease_api_client(api_client)
        elector = LeaseElector(
            client.CoordinationV1Api(lease_client),
            namespace=config.namespace,
            name=config.lease_name,
            identity=config.identity,
            on_started_leading=started,
            on_stopped_leading=stopped,
        )
        elector.start()
        logger.info("waiting for leadership", extra={"lease": config.lease_name})
        while not leading.wait(0.2):
            if stop.is_set():
                return _wind_down(elector, lease_client, calls, stop, lost)
    else:
        metrics.leader.set(1)

    if config.migrate_state_from and not _state_moved(api_client, config):
        _wind_down(elector, lease_client, calls, stop, lost)
        return STATE_NOT_MOVED
    reconciler = Reconciler(
        api_client,
        policies,
        namespace=config.namespace,
        state_namespace=config.state_namespace,
        owner=config.owner,
        instance=config.identity,
        metrics=metrics,
        is_leader=_leader_check(elector, stop),
        cache=WorldCache(owner=config.owner),
    )
    registry = build_registry(reconciler, config, api_client, calls)
    logger.info(
        "operator starting",
        extra={"mode": policies.mode.value, "identity": config.identity,
               "leaderElection": config.leader_election},
    )  # fmt: skip
    for warning in policies.warnings():  # risks the document accepted (acknowledgeUnsafe)
        logger.warning("policy accepts an unsafe setting", extra={"warning": warning})
    try:
        _run_kopf(registry, stop, ready_flag)
    finally:
        code = _wind_down(elector, lease_client, calls, stop, lost)
    return code


def _run_kopf(registry: Any, stop: StopRequest, ready_flag: threading.Event | None) -> None:
    """``kopf.run``, spelled out as Kopf's own ``spawn_tasks`` + ``run_tasks`` so that our
    signal handlers replace the ones Kopf adds to its loop."""
    import kopf

    watch_json.install()

    async def operate() -> None:
        before = frozenset(asyncio.all_tasks())
        tasks = await kopf.spawn_tasks(
            registry=registry,
            clusterwide=True,
            standalone=True,  # our Lease election replaces Kopf's peering
            stop_flag=stop.flag,
            ready_flag=ready_flag,
        )
        stop.take_over_loop_signals(asyncio.get_running_loop())
        try:
            await kopf.run_tasks(tasks, ignored=before)
        finally:
            # Kopf waits for the flag in a default-executor thread, which asyncio.run
            # joins on its way out: raise it however Kopf ended.
            stop.request("operator exited")

    try:
        with contextlib.suppress(asyncio.CancelledError):
            asyncio.run(operate())
    finally:
        stop.restore_signal_handlers()


def _wind_down(
    elector: LeaseElector | None,
    lease_client: Any,
    calls: BlockingCalls,
    stop: StopRequest,
    lost: threading.Event,
) -> int:
    """Let a reconcile in flight finish (a while), then give the Lease back. A reconcile
    still running keeps the Lease until it expires: a successor must not act beside it."""
    stop.request("operator exited")
    idle = calls.wait_guarded(stop.left_s(RECONCILE_DRAIN_S))
    if not idle:
        logger.warning(
            "reconcile still running at stop: lease left to expire",
            extra={"drain_s": RECONCILE_DRAIN_S},
        )
    if elector is not None:
        elector.stop(release=idle and not lost.is_set())
        lease_client.close()
    logger.info(
        "operator stopped", extra={"reason": stop.reason, "stop_s": round(stop.elapsed_s(), 3)}
    )
    return 1 if lost.is_set() else 0


STATE_NOT_MOVED = 3
"""Exit status when an older release's state could not be moved: acting without it could
repeat an action, so the pod restarts and tries again."""


def _state_moved(api_client: Any, config: OperatorConfig) -> bool:
    from pacekeeper.controller.runtime.state_migration import migrate_state

    source = config.migrate_state_from
    target = config.state_namespace or config.namespace
    if source is None or source == target:
        return True
    try:
        migrate_state(api_client, source=source, target=target,
                      controller_namespace=config.namespace, now=datetime.now(UTC))  # fmt: skip
    except Exception as e:  # StateMigrationError, the client's connection errors
        logger.error("state not moved: not acting without it", extra={"error": str(e)})
        return False
    return True


def lease_api_client(api_client: Any) -> Any:
    """The elector's own client: the same credentials, no urllib3 retries. With retries, a
    Lease request to a server that never answers lasts four timeouts, not one."""
    import copy

    from kubernetes import client

    configuration = copy.deepcopy(api_client.configuration)
    configuration.retries = False
    return client.ApiClient(configuration)


def _leader_check(elector: LeaseElector | None, stop: StopRequest) -> Callable[[], bool]:
    # Once a stop is asked for, no reconcile starts writing.
    if elector is None:
        return lambda: not stop.is_set()
    return lambda: elector.is_leader and not stop.is_set()


def default_identity() -> str:
    return os.environ.get("PACEKEEPER_POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"


def effective_mode(doc: PolicyDocument, cli_mode: Mode | None) -> PolicyDocument:
    """The command line can only lower the document's mode (a flag typo never enforces)."""
    if cli_mode is None:
        return doc
    return doc.model_copy(update={"mode": Mode.lowest(doc.mode, cli_mode)})
