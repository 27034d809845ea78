"""Reading the world for the decision core: StragglerReports, the job's pods, nodes.

Turns API objects (plain JSON mappings) into the core's frozen views. Pure functions
sit first (``report_of``, ``job_view_of``, ``node_view_of``); ``KubernetesSource`` does
the reads with the official client. A status that fails validation becomes a
``RejectedReport`` (never acted on, never silently dropped). The operator's watch-fed
cache of pods and nodes is ``world_cache.py``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pacekeeper.controller.core.ids import JobKey, NodeName
from pacekeeper.controller.core.marks import DOMAIN, our_marks
from pacekeeper.controller.core.observations import ClusterView, JobView, NodeView, RejectedReport
from pacekeeper.controller.core.policy import Mode
from pacekeeper.controller.core.ranks import live_pods
from pacekeeper.detector.reporters.k8s_status import GROUP, PLURAL, VERSION
from pacekeeper.detector.score_report import Platform, ReportRejected, ScoreReport

logger = logging.getLogger(__name__)

DETECT_ANNOTATION = f"{DOMAIN}/detect"
POLICY_ANNOTATION = f"{DOMAIN}/policy"
MODE_ANNOTATION = f"{DOMAIN}/mode"
RANKS_PER_POD_ANNOTATION = f"{DOMAIN}/ranks-per-pod"
JOB_LABEL = f"{DOMAIN}/job"
"""Optional label naming the StragglerReport a pod belongs to, for frameworks whose
own job-name label is not listed below."""

# Each framework labels its pods with the job's name under its own key.
JOB_NAME_LABELS: tuple[str, ...] = (
    JOB_LABEL,
    "batch.kubernetes.io/job-name",
    "job-name",
    "jobset.sigs.k8s.io/jobset-name",
    "training.kubeflow.org/job-name",
    "trainer.kubeflow.org/trainjob-name",
    "volcano.sh/job-name",
    "ray.io/cluster",
)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return _meta(obj).get("annotations") or {}


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return _meta(obj).get("labels") or {}


def job_key_of(obj: Mapping[str, Any]) -> JobKey:
    m = _meta(obj)
    return JobKey(f"{m.get('namespace')}/{m.get('name')}")


def report_of(obj: Mapping[str, Any], now: datetime) -> ScoreReport | RejectedReport | None:
    """The report in a StragglerReport's status; None when none was written yet."""
    status = obj.get("status") or {}
    wire = status.get("report")
    if wire is None:
        return None
    try:
        report = ScoreReport.from_wire(wire)
    except ReportRejected as e:
        return RejectedReport(received_at=now, error=str(e))
    m = _meta(obj)
    job = report.job
    if job.platform is not Platform.KUBERNETES:
        # A StragglerReport is a Kubernetes job's; a ray or local identity in it names no
        # object here and would skip the namespace/name check below.
        return RejectedReport(
            received_at=now,
            error=f"report.job.platform is {job.platform.value!r}: a StragglerReport carries "
            "kubernetes reports only",
        )
    if (job.namespace, job.name) != (m.get("namespace"), m.get("name")):
        # A report about another job in this object must not steer this job's ladder.
        return RejectedReport(
            received_at=now,
            error=f"report.job is {job.key!r}, object is {m.get('namespace')}/{m.get('name')}",
        )
    return report


def pods_of_job(pods: Iterable[Mapping[str, Any]], job_name: str) -> list[Mapping[str, Any]]:
    return [p for p in pods if any(_labels(p).get(k) == job_name for k in JOB_NAME_LABELS)]


@dataclass(frozen=True, slots=True)
class OptIn:
    opted_in: bool
    policy_name: str | None
    mode_override: Mode | None
    ranks_per_pod: int | None
    problems: tuple[str, ...] = ()
    service_account: str | None = None
    """The pods' ``spec.serviceAccountName`` (several: sorted, comma-joined): with the
    namespace, the tenant the memory of hardware tags this job's lessons with."""
    nodes: frozenset[NodeName] | None = None
    """The nodes the job's live pods run on, as the API places them (a bounded report
    only counts most of a very large job's nodes)."""


def opt_in_of(pods: Iterable[Mapping[str, Any]]) -> OptIn:
    """Opt-in and overrides from the job's pods (their pod template's annotations) alone:
    the StragglerReport is the job's own writing, so its annotations opt nothing in."""
    sources = [_annotations(p) for p in pods]
    detect = {a.get(DETECT_ANNOTATION) for a in sources}
    opted_in = "true" in detect and "false" not in detect
    policies = {a[POLICY_ANNOTATION] for a in sources if a.get(POLICY_ANNOTATION)}
    modes = {a[MODE_ANNOTATION] for a in sources if a.get(MODE_ANNOTATION)}
    problems: list[str] = []
    policy = None
    if len(policies) == 1:
        policy = next(iter(policies))
    elif len(policies) > 1:
        problems.append(f"pods disagree on {POLICY_ANNOTATION}: {sorted(policies)}")
    mode: Mode | None = None
    for raw in sorted(modes):
        try:
            m = Mode(raw)
        except ValueError:
            problems.append(f"{MODE_ANNOTATION}={raw!r} is not one of observe, dry-run, enforce")
            m = Mode.OBSERVE  # a typo must never raise the mode
        mode = Mode.lowest(mode, m)
    rpp = None
    for a in sources:
        raw_rpp = a.get(RANKS_PER_POD_ANNOTATION)
        if raw_rpp:
            try:
                rpp = max(1, int(raw_rpp))
            except ValueError:
                problems.append(f"{RANKS_PER_POD_ANNOTATION}={raw_rpp!r} is not an integer")
    placed = frozenset(
        NodeName(str(n)) for p in live_pods(pods) if (n := (p.get("spec") or {}).get("nodeName"))
    )
    return OptIn(opted_in, policy, mode, rpp, tuple(problems), _service_account(pods), placed)


def _service_account(pods: Iterable[Mapping[str, Any]]) -> str | None:
    # The API fills in "default" when a pod names none; a pod read before admission
    # (a test's stand-in) gets the same, so the tenant never depends on who filled it.
    names = {(p.get("spec") or {}).get("serviceAccountName") or "default" for p in pods}
    return ",".join(sorted(names)) if names else None


def job_view_of(
    obj: Mapping[str, Any],
    report: ScoreReport | RejectedReport | None,
    opt_in: OptIn,
    started_at: datetime | None,
) -> JobView:
    m = _meta(obj)
    return JobView(
        key=job_key_of(obj),
        reports=(report,) if report is not None else (),
        namespace=m.get("namespace"),
        name=m.get("name", ""),
        started_at=started_at,
        policy_name=opt_in.policy_name,
        mode_override=opt_in.mode_override,
        opted_out=not opt_in.opted_in,
        policy_source=f"annotation {POLICY_ANNOTATION}" if opt_in.policy_name else None,
        mode_source=f"annotation {MODE_ANNOTATION}" if opt_in.mode_override else None,
        service_account=opt_in.service_account,
        placed_nodes=opt_in.nodes,
    )


def node_view_of(node: Mapping[str, Any], owner: str) -> NodeView:
    return NodeView(
        name=NodeName(_meta(node).get("name", "")),
        labels=dict(_labels(node)),
        unschedulable=bool((node.get("spec") or {}).get("unschedulable")),
        our_marks=our_marks(node, owner),
    )


def cluster_view_of(nodes: Iterable[Mapping[str, Any]], owner: str) -> ClusterView:
    views = {v.name: v for v in (node_view_of(n, owner) for n in nodes)}
    return ClusterView(nodes=views, total_nodes=len(views))


class KubernetesSource:
    """Reads through the official client; returns the API's own JSON (camelCase dicts),
    the shape ``marks.py`` and ``ranks.py`` read."""

    def __init__(self, api_client: Any, *, request_timeout_s: float = 10.0) -> None:
        from kubernetes import client

        self._custom = client.CustomObjectsApi(api_client)
        self._core = client.CoreV1Api(api_client)
        self._timeout = request_timeout_s

    @staticmethod
    def _json(response: Any) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(response.data or b"{}")
        return data

    def read_report_object(self, namespace: str, name: str) -> dict[str, Any] | None:
        from kubernetes.client.exceptions import ApiException

        try:
            return self._json(
                self._custom.get_namespaced_custom_object(
                    GROUP, VERSION, namespace, PLURAL, name,
                    _preload_content=False, _request_timeout=self._timeout,
                )
            )  # fmt: skip
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def list_report_objects(self) -> list[dict[str, Any]]:
        out = self._custom.list_cluster_custom_object(
            GROUP, VERSION, PLURAL, _preload_content=False, _request_timeout=self._timeout
        )
        return list(self._json(out).get("items") or [])

    def list_pods(self, namespace: str) -> list[dict[str, Any]]:
        out = self._core.list_namespaced_pod(
            namespace, _preload_content=False, _request_timeout=self._timeout
        )
        return list(self._json(out).get("items") or [])

    def list_all_pods(self) -> list[dict[str, Any]]:
        out = self._core.list_pod_for_all_namespaces(
            _preload_content=False, _request_timeout=self._timeout
        )
        return list(self._json(out).get("items") or [])

    def list_nodes(self) -> list[dict[str, Any]]:
        out = self._core.list_node(_preload_content=False, _request_timeout=self._timeout)
        return list(self._json(out).get("items") or [])
