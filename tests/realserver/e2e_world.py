"""One operator scenario's world on the real server, and what the tests read back from it.

A `World` owns a fixed namespace (identities.E2E_NAMESPACES: its ServiceAccounts have
tokens), the nodes it creates (prefixed with the scenario's name), its training jobs,
the chart's RBAC for its values, the operator process and the reporters. `close()`
takes all of it away again, including the controller's state ConfigMaps in the state
namespace and its Lease in the chart namespace, so that scenarios share nothing but the
server (and those two namespaces).

What a scenario asserts comes from the server: nodes (our taint, cordon), Events, the
controller's state ConfigMaps, the StragglerReport, and the audit log (every write the
operator made and every 403 anyone got), never from the operator's word alone.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from audit import AuditEvent
from cluster import RealCluster
from e2e_chart import ChartRelease, chart_values, install, uninstall
from e2e_jobs import Publishing, Reporters, TrainingJob, create_job, create_nodes
from e2e_operator import Operator
from identities import CHART_NAMESPACE, E2E_NAMESPACES, OPERATOR, STATE_NAMESPACE

from pacekeeper.controller.core.ids import JobKey
from pacekeeper.controller.core.marks import TAINT_KEY
from pacekeeper.controller.runtime.state_store import (
    DECISIONS_KEY,
    MANAGED_BY,
    STATE_CONFIGMAP,
    STATE_KEY,
    job_state_name,
)

GROUP, VERSION, PLURAL = "pacekeeper.dev", "v1alpha1", "stragglerreports"
EVENTS_OF_NODES = "default"
"""Where the controller posts Events about nodes (cluster-scoped objects)."""
_POLL_S = 0.1

T = TypeVar("T")


def fast_policy(
    ladder: Mapping[str, Any], *, cluster: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A policy document body that acts within seconds: 2 reports to act, 1 s between
    ladder steps unless `ladder` says otherwise, no warm-up, recovery after 2 reports."""
    policy: dict[str, Any] = {
        "score": {"kind": "gpuRelative"},
        "thresholds": {"act": 0.75, "recover": 0.9},
        "persistence": {"consecutiveReports": 2, "minSamples": 10, "maxReportAgeS": 20},
        "warmup": {"afterJobStartS": 0, "afterActionS": 0},
        "recovery": {"consecutiveReports": 2, "holdS": 1},
        "ladder": {step: {"enabled": True, "timeoutS": 1, **dict(cfg)}
                   for step, cfg in ladder.items()},
        "budgets": {"nodes": {"maxNodes": 1}, "actionsPerHour": 10, "betweenActionsS": 0},
    }  # fmt: skip
    return {
        "defaultPolicy": "gpu",
        "policies": {"gpu": policy},
        "cluster": dict(cluster or {"nodes": {"maxNodes": 2}, "actionsPerHour": 20}),
    }


_CLAIMED: set[str] = set()
"""Namespaces a World of this session has used: `close()` deletes its namespace without
waiting, so a second World in it would meet `NamespaceTerminating` (403) part way."""


class World:
    """One scenario: build it, run the operator and reporters, read back, `close()`."""

    def __init__(self, cluster: RealCluster, namespace: str, directory: Path) -> None:
        if namespace not in E2E_NAMESPACES:
            raise KeyError(f"{namespace}: add it to identities.E2E_NAMESPACES")
        if namespace in _CLAIMED:
            raise KeyError(f"{namespace}: another scenario used it; give this one its own")
        _CLAIMED.add(namespace)
        self.cluster = cluster
        self.namespace = namespace
        self.prefix = namespace.removeprefix("e2e-")
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.since = cluster.audit.mark()
        self.node_names: list[str] = []
        self.jobs: list[TrainingJob] = []
        self.release: ChartRelease | None = None
        self.operator: Operator | None = None
        self.reporters: Reporters | None = None
        self.started = time.monotonic()
        cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})

    # --- building -------------------------------------------------------------------------

    def nodes(self, count: int) -> list[str]:
        names = [f"{self.prefix}-n{len(self.node_names) + i}" for i in range(count)]
        create_nodes(self.cluster, names)
        self.node_names += names
        return names

    def job(self, name: str, nodes: Sequence[str], **options: Any) -> TrainingJob:
        job = create_job(self.cluster, self.namespace, name, nodes, **options)
        self.jobs.append(job)
        return job

    def install(
        self, *, actions: Iterable[str], policy: Mapping[str, Any],
        reporters: Sequence[Mapping[str, Any]] | None = None,
    ) -> ChartRelease:  # fmt: skip
        """The chart's RBAC; by default one reporter binding per account, listing the
        reports of the jobs made so far (the least-privilege recipe of docs/opt-in.md)."""
        if reporters is None:
            by_account: dict[str, list[str]] = {}
            for job in self.jobs:
                by_account.setdefault(job.account.name, []).append(job.name)
            reporters = [
                {"namespace": self.namespace, "serviceAccount": account, "reports": names}
                for account, names in by_account.items()
            ]
        values = chart_values(actions=actions, policy=policy, reporters=reporters)
        self.release = install(self.cluster, values)
        return self.release

    def start_operator(self) -> Operator:
        assert self.release is not None, "install the chart first"
        if self.operator is None:
            self.operator = Operator(self.cluster, self.release, self.directory)
        return self.operator.start()

    def publish(self, jobs: Mapping[TrainingJob, Mapping[int, float]], every_s: float) -> Reporters:
        """Start reporting: each job with its slow ranks (rank -> score)."""
        assert self.reporters is None, "one reporter thread per world; add jobs to it"
        self.reporters = Reporters(self.cluster, every_s)
        for job, slow in jobs.items():
            self.reporters.add(job, slow)
        return self.reporters.start()

    # --- waiting --------------------------------------------------------------------------

    def eventually(self, probe: Callable[[], T | None], what: str, timeout_s: float = 60.0) -> T:
        """The first truthy answer of `probe`; fails with the operator's log tail."""
        deadline = time.monotonic() + timeout_s
        while True:
            result = probe()
            if result:
                return result
            if self.operator is not None and self.operator.runs:
                self.operator.process.check_running()
            if time.monotonic() >= deadline:
                raise AssertionError(f"{what}: not true after {timeout_s:.0f} s{self._context()}")
            time.sleep(_POLL_S)

    def more_reports(self, count: int, *publishing: Publishing) -> None:
        """Until `count` more reports of each job were sent (each one reconciled)."""
        targets = [(p, p.sent + count) for p in publishing]
        what = f"{count} more reports of {', '.join(p.job.key for p in publishing)}"
        self.eventually(lambda: all(p.sent >= t for p, t in targets), what, 30)

    def _context(self) -> str:
        errors = self.reporters.errors[-5:] if self.reporters else []
        log = self.operator.tail() if self.operator else "<no operator>"
        return f"\nreporter errors: {errors}\n--- operator log tail ---\n{log}"

    # --- reading the world ----------------------------------------------------------------

    def _core(self) -> Any:
        import kubernetes

        return kubernetes.client.CoreV1Api(self.cluster.admin)

    def node(self, name: str) -> dict[str, Any]:
        return dict(json.loads(self._core().read_node(name, _preload_content=False).data))

    def our_taints(self, name: str) -> list[dict[str, Any]]:
        taints = (self.node(name).get("spec") or {}).get("taints") or []
        return [t for t in taints if t.get("key") == TAINT_KEY]

    def cordoned(self, name: str) -> bool:
        return bool((self.node(name).get("spec") or {}).get("unschedulable"))

    def marked(self) -> list[str]:
        """This world's nodes carrying our taint or a cordon (anyone's)."""
        return [n for n in self.node_names if self.our_taints(n) or self.cordoned(n)]

    def set_cordon(self, name: str, cordoned: bool) -> None:
        """A human's `kubectl cordon` / `uncordon` (a strategic merge patch of the spec)."""
        self._core().patch_node(name, {"spec": {"unschedulable": cordoned or None}})

    def operator_requests(self, **filters: Any) -> list[AuditEvent]:
        return self.cluster.audit.find(self.since, user=OPERATOR.username, **filters)

    def node_writes(self, name: str | None = None) -> list[AuditEvent]:
        """The operator's node patches the server accepted."""
        return self.operator_requests(verb="patch", resource="nodes", name=name, code=200)

    def refusals(self) -> list[str]:
        """Every 403 the operator got: the server's record and its own log."""
        audited = [e.describe() for e in self.operator_requests(code=403)]
        logged = self.operator.forbidden_lines() if self.operator else []
        return audited + logged

    def report(self, job: TrainingJob) -> dict[str, Any] | None:
        import kubernetes
        from kubernetes.client.exceptions import ApiException

        api: Any = kubernetes.client.CustomObjectsApi(self.cluster.admin)
        try:
            obj = api.get_namespaced_custom_object(GROUP, VERSION, job.namespace, PLURAL, job.name)
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        return dict(obj)

    def _config_map(self, name: str) -> dict[str, str] | None:
        from kubernetes.client.exceptions import ApiException

        try:
            cm = self._core().read_namespaced_config_map(name, STATE_NAMESPACE)
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        return dict(cm.data or {})

    def job_config_map(self, job: TrainingJob) -> dict[str, str] | None:
        return self._config_map(job_state_name(JobKey(job.key)))

    def job_state(self, job: TrainingJob) -> dict[str, Any]:
        data = self.job_config_map(job) or {}
        return dict(json.loads(data.get(STATE_KEY) or "{}"))

    def records(self, job: TrainingJob) -> list[dict[str, Any]]:
        """The controller's decision records for `job` (its own copy, newest last)."""
        data = self.job_config_map(job) or {}
        return list(json.loads(data.get(DECISIONS_KEY) or "[]"))

    def reasons(self, job: TrainingJob) -> set[str]:
        return {str(r["reason"]) for r in self.records(job)}

    def acted(self, job: TrainingJob) -> list[tuple[str, str, str]]:
        """(verdict, action, subject) of every act and undo record, in order."""
        return [
            (r["verdict"], r["action"], r["subject"])
            for r in self.records(job)
            if r["verdict"] in ("act", "undo")
        ]

    def cluster_state(self) -> dict[str, Any]:
        data = self._config_map(STATE_CONFIGMAP) or {}
        return dict(json.loads(data.get(STATE_KEY) or "{}"))

    def events(self) -> list[dict[str, Any]]:
        """The controller's Events: on this world's objects and on its nodes."""
        selector = ",".join(f"{k}={v}" for k, v in MANAGED_BY.items())
        out = []
        for namespace in (self.namespace, EVENTS_OF_NODES):
            response = self._core().list_namespaced_event(
                namespace, label_selector=selector, _preload_content=False
            )
            listed = json.loads(response.data)
            for event in listed.get("items") or []:
                involved = event.get("involvedObject") or {}
                if namespace == self.namespace or involved.get("name") in self.node_names:
                    out.append(event)
        return out

    def _events_about(self, name: str, kind: str | None) -> list[dict[str, Any]]:
        events = [
            e for e in self.events()
            if e["involvedObject"].get("name") == name
            and kind in (None, e["involvedObject"].get("kind"))
        ]  # fmt: skip
        return sorted(events, key=lambda e: e.get("firstTimestamp") or "")

    def event_actions(self, name: str, kind: str | None = None) -> list[str]:
        """`action` of the controller's Events about object `name` (of `kind`: a job's
        StragglerReport and its Job share a name), oldest first."""
        return [str(e.get("action")) for e in self._events_about(name, kind)]

    def event_reasons(self, name: str, kind: str | None = None) -> list[str]:
        return [str(e.get("reason")) for e in self._events_about(name, kind)]

    # --- taking it away -------------------------------------------------------------------

    def close(self) -> None:
        core = self._core()
        with contextlib.ExitStack() as stack:
            # Each step runs even when one before it failed.
            if self.release is not None:
                stack.callback(uninstall, self.cluster, self.release)
            stack.callback(self._delete_controller_state)
            for name in self.node_names:
                stack.callback(_ignore_404, core.delete_node, name)
            stack.callback(_ignore_404, core.delete_namespace, self.namespace)
            # Without a kubelet a bound pod is deleted only with grace 0.
            stack.callback(
                _ignore_404, core.delete_collection_namespaced_pod, self.namespace,
                grace_period_seconds=0,
            )  # fmt: skip
            if self.operator is not None:
                stack.callback(self.operator.close)
            if self.reporters is not None:
                stack.callback(self.reporters.close)
        print(f"{self.namespace}: {time.monotonic() - self.started:.1f} s")  # with -s

    def _delete_controller_state(self) -> None:
        import kubernetes

        core = self._core()
        selector = ",".join(f"{k}={v}" for k, v in MANAGED_BY.items())
        for namespace in (STATE_NAMESPACE, CHART_NAMESPACE):  # the latter: an upgrade's
            _ignore_404(core.delete_collection_namespaced_config_map, namespace,
                        label_selector=selector)  # fmt: skip
        if self.release is not None:
            env = {e["name"]: e.get("value") for e in self.release.container.get("env") or []}
            coordination = kubernetes.client.CoordinationV1Api(self.cluster.admin)
            lease = env["PACEKEEPER_LEASE_NAME"]
            _ignore_404(coordination.delete_namespaced_lease, lease, CHART_NAMESPACE)


def _ignore_404(call: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    from kubernetes.client.exceptions import ApiException

    try:
        call(*args, **kwargs)
    except ApiException as error:
        if error.status != 404:
            raise
