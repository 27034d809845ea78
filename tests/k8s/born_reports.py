"""A job's StragglerReport made the way the controller makes it (``report_birth``), for
tests whose subject is the reporter or the reconcile of an existing report: the reporter
never creates its report (issue 40)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pacekeeper.controller.actuators.kubernetes_actuators import KubernetesActuators
from pacekeeper.controller.core.ids import JobKey
from pacekeeper.controller.runtime.metrics import ControllerMetrics
from pacekeeper.controller.runtime.report_birth import ReportBirth
from pacekeeper.controller.runtime.state_store import StateStore
from pacekeeper.controller.sources.kubernetes import KubernetesSource, pods_of_job
from pacekeeper.controller.sources.workloads import WorkloadResolver

CONTROLLER_NS = "pacekeeper"


def birth(api_client: Any, *, controller_ns: str = CONTROLLER_NS) -> ReportBirth:
    return ReportBirth(
        api_client, StateStore(api_client, namespace=controller_ns),
        WorkloadResolver(api_client), KubernetesActuators(api_client, instance="test"),
        metrics=ControllerMetrics(), clock=lambda: datetime.now(UTC),
    )  # fmt: skip


def born(
    api_client: Any, namespace: str, name: str, *, controller_ns: str = CONTROLLER_NS
) -> dict[str, Any] | None:
    """The job's report as the controller creates it for the job's opted-in pods (which
    must exist); an existing one is left as the controller would leave it. The
    controller's namespace must exist (the creation is recorded there)."""
    source = KubernetesSource(api_client)
    pods = pods_of_job(source.list_pods(namespace), name)
    birth(api_client, controller_ns=controller_ns).ensure(
        JobKey(f"{namespace}/{name}"), source.read_report_object(namespace, name), pods
    )
    return source.read_report_object(namespace, name)
