"""Reports bound from birth: the controller creates each opted-in job's StragglerReport.

RBAC cannot limit ``create`` by name, so a reporter Role that may create its report may
create any report of its namespace: a pod of job A could make job B's report first,
either without an owner (B's reports would never bind: B unprotected) or with an
ownerReference copied from B's pods and a ``spec.control`` of A's choosing (B's
detection switched off). So the reporter Role has no ``create`` at all, and the
controller makes the report as soon as it sees an opted-in pod (issue 40):

- named as the reporter writes it: the pods' job-name label, outermost workload first
  (``injection.JOB_NAME_PRECEDENCE``, the same order the webhook names the job by);
- owned by the workload, the outermost controller above the pods, read from the API
  (``WorkloadResolver``), so it goes when the job goes;
- ``spec.job`` filled in, no ``spec.control``;
- its uid recorded in the job's state ConfigMap, where no job can write
  (``state_store.REPORT_UID_KEY``); the ``pacekeeper.dev/created-by`` annotation only
  tells people.

A report that exists but whose uid the controller did not record was made by someone
else (a pod before the Role lost ``create``, an older release's reporter, an intruder):
the controller cannot know who, so it trusts none of it. Not bound the way the
controller binds (``trust.birth_problem``): deleted and created again, bound. Bound, but
with anything in ``spec`` besides the job: that is removed (its maker chose it). Then
its uid is recorded. Each repair is logged, counted and told in an Event on the report.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pacekeeper.controller.actuators.events import EventAction, EventType
from pacekeeper.controller.actuators.kubernetes_actuators import KubernetesActuators
from pacekeeper.controller.core.ids import JobKey
from pacekeeper.controller.core.marks import DOMAIN
from pacekeeper.controller.core.ranks import live_pods
from pacekeeper.controller.core.trust import birth_problem, expected_job
from pacekeeper.controller.runtime.acting import report_ref
from pacekeeper.controller.runtime.injection import JOB_NAME_PRECEDENCE
from pacekeeper.controller.runtime.metrics import ControllerMetrics
from pacekeeper.controller.runtime.state_store import JobRecord, StateStore
from pacekeeper.controller.sources.kubernetes import opt_in_of
from pacekeeper.controller.sources.workloads import OwnerRef, WorkloadResolver
from pacekeeper.detector.reporters.k8s_status import GROUP, KIND, PLURAL, VERSION

logger = logging.getLogger(__name__)

CREATED_BY_ANNOTATION = f"{DOMAIN}/created-by"
CREATED_BY_CONTROLLER = "controller"
FOREIGN_REPORT = "ForeignReport"
"""Event reason and log key of a repair."""
MERGE_PATCH = "application/merge-patch+json"


@dataclass(frozen=True, slots=True)
class Later:
    """The report could not be settled now (another writer got there between our read and
    our write): reconcile again soon, keeping what the controller keeps of the job."""

    why: str


def report_name_of(pod: Mapping[str, Any]) -> str | None:
    """The name of the StragglerReport ``pod`` reports into: its job-name label, the
    outermost workload's first (a JobSet's pods also carry their child Job's name)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    for label in JOB_NAME_PRECEDENCE:
        if labels.get(label):
            return str(labels[label])
    return None


def born_object(namespace: str, name: str, workload: OwnerRef) -> dict[str, Any]:
    """The StragglerReport as the controller creates it."""
    owner = {
        "apiVersion": workload.api_version,
        "kind": workload.kind,
        "name": workload.name,
        "uid": workload.uid,
        # Not the report's controller, and never holding up the workload's deletion
        # (which would also need rights on the workload's finalizers).
        "blockOwnerDeletion": False,
    }
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "pacekeeper"},
            "annotations": {CREATED_BY_ANNOTATION: CREATED_BY_CONTROLLER},
            "ownerReferences": [owner],
        },
        "spec": {"job": expected_job(namespace, name)},
    }


class ReportBirth:
    """Creates, checks and repairs jobs' StragglerReports; one job at a time per key
    (the reconciler's job slot is held)."""

    def __init__(
        self,
        api_client: Any,
        store: StateStore,
        resolver: WorkloadResolver,
        actuators: KubernetesActuators,
        *,
        metrics: ControllerMetrics,
        clock: Callable[[], datetime],
        request_timeout_s: float = 10.0,
    ) -> None:
        from kubernetes import client

        self._custom = client.CustomObjectsApi(api_client)
        self._store = store
        self._resolver = resolver
        self._actuators = actuators
        self._metrics = metrics
        self._clock = clock
        self._timeout = request_timeout_s

    def ensure(
        self, key: JobKey, obj: Mapping[str, Any] | None, pods: Sequence[Mapping[str, Any]]
    ) -> Mapping[str, Any] | Later | None:
        """The job's report as it should be: created when an opted-in pod names it and
        none exists, repaired when someone else made it. ``obj`` as read (None: none);
        ``pods``: the pods carrying the job's name. Returns the report object to reconcile
        (None: there is none and none is due; ``Later``: try again soon)."""
        name = key.partition("/")[2]
        live = live_pods(pods)
        if not live or not opt_in_of(live).opted_in:
            return obj  # nothing of ours to create; an existing one binds or not as before
        if not any(report_name_of(p) == name for p in live):
            return obj  # e.g. a JobSet's child Job: its pods report into the JobSet's report
        workload = self._resolver.top_owner(live)
        if workload is None or workload.uid is None:
            return obj  # pods without a controller: no owner to bind a report to
        record = self._store.load_job(key, obj)
        if obj is None:
            return self._create(key, workload, record, repaired=None)
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        if uid and uid == record.report_uid:
            return obj  # ours: spec.control since then is the controller's or a human's
        problem = birth_problem(obj, workload.uid)
        if problem:
            return self._recreate(key, obj, workload, record, problem)
        spec = obj.get("spec") or {}
        foreign = sorted(k for k in spec if k != "job")
        if foreign:
            obj = self._reset_spec(key, obj, foreign)
            self._repaired(key, obj, "controlReset",
                           f"spec.{', spec.'.join(foreign)} removed: the report was not "
                           "created by the controller")  # fmt: skip
        self._record(record, str((obj.get("metadata") or {}).get("uid") or ""))
        return obj

    # --- writes ----------------------------------------------------------------------------

    def _create(
        self, key: JobKey, workload: OwnerRef, record: JobRecord, *, repaired: str | None
    ) -> Mapping[str, Any] | Later:
        from kubernetes.client.exceptions import ApiException

        namespace, _, name = key.partition("/")
        try:
            created: dict[str, Any] = self._custom.create_namespaced_custom_object(  # type: ignore[assignment]
                GROUP, VERSION, namespace, PLURAL, born_object(namespace, name, workload),
                _request_timeout=self._timeout,
            )  # fmt: skip
        except ApiException as e:
            if e.status == 409:
                # Someone made one between our read and now: the next reconcile (its
                # watch event) checks it like any other.
                logger.warning("stragglerreport created concurrently", extra={"job": key})
                return Later("created concurrently")
            raise
        logger.info(
            "stragglerreport created",
            extra={"job": key, "owner": f"{workload.kind}/{workload.name}"},
        )
        self._record(record, str((created.get("metadata") or {}).get("uid") or ""))
        if repaired is not None:
            self._repaired(key, created, "recreated", repaired)
        return created

    def _recreate(
        self,
        key: JobKey,
        obj: Mapping[str, Any],
        workload: OwnerRef,
        record: JobRecord,
        problem: str,
    ) -> Mapping[str, Any] | Later:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        namespace, _, name = key.partition("/")
        meta = obj.get("metadata") or {}
        if meta.get("finalizers"):
            # A finalizer of its maker's would keep the old object, and its name, forever.
            self._custom.patch_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name, {"metadata": {"finalizers": None}},
                _content_type=MERGE_PATCH, _request_timeout=self._timeout,
            )  # fmt: skip
        try:
            self._custom.delete_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name,
                body=client.V1DeleteOptions(
                    preconditions=client.V1Preconditions(uid=meta.get("uid"))
                ),
                _request_timeout=self._timeout,
            )  # fmt: skip
        except ApiException as e:
            if e.status not in (404, 409):  # gone already, or replaced meanwhile
                raise
            return Later(f"delete answered {e.status}")  # the next reconcile sees what is there
        why = f"recreated bound to {workload.kind}/{workload.name}: {problem}"
        return self._create(key, workload, record, repaired=why)

    def _reset_spec(
        self, key: JobKey, obj: Mapping[str, Any], foreign: Sequence[str]
    ) -> Mapping[str, Any]:
        namespace, _, name = key.partition("/")
        meta = obj.get("metadata") or {}
        patch = {
            "metadata": {
                "resourceVersion": meta.get("resourceVersion"),  # exactly what was checked
                "annotations": {CREATED_BY_ANNOTATION: CREATED_BY_CONTROLLER},
            },
            "spec": dict.fromkeys(foreign),
        }
        out: Mapping[str, Any] = self._custom.patch_namespaced_custom_object(  # type: ignore[assignment]
            GROUP, VERSION, namespace, PLURAL, name, patch,
            _content_type=MERGE_PATCH, _request_timeout=self._timeout,
        )  # fmt: skip
        return out

    def _record(self, record: JobRecord, uid: str) -> None:
        """The uid into the job's state ConfigMap; a failure only means the next
        reconcile checks the report again (and finds nothing to repair)."""
        from kubernetes.client.exceptions import ApiException

        if not uid or record.report_uid == uid:
            return
        record.report_uid = uid
        try:
            self._store.save_job(record, record.state, record.decisions)
        except ApiException as e:
            logger.warning(
                "stragglerreport creation not recorded",
                extra={"job": record.key, "status": e.status},
            )

    def _repaired(self, key: JobKey, obj: Mapping[str, Any], repair: str, why: str) -> None:
        self._metrics.reports_repaired.labels(repair).inc()
        logger.warning(
            "stragglerreport repaired",
            extra={"job": key, "reason": FOREIGN_REPORT, "repair": repair, "problem": why},
        )
        prov = self._actuators.provenance(key, FOREIGN_REPORT, "", self._clock())
        self._actuators.events.record(
            report_ref(obj), prov, EventAction.NOTIFY, f"{FOREIGN_REPORT}: {why}"[:1000],
            event_type=EventType.WARNING,
        )  # fmt: skip
