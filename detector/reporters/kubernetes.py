"""The Kubernetes transport: the job's StragglerReport, its status patched per report.

Uses the official ``kubernetes`` client (imported on first send). The controller creates
the report, bound to the job's workload, as soon as it sees an opted-in pod; the reporter
never creates it (docs/transports.md says why: RBAC cannot limit ``create`` by name, so
a Role that could create this report could create any other job's, issue 40). The first
send reads the object; while it does not exist yet the report waits in the publisher's
queue and is retried with backoff, with one line now and then saying what it waits for.
Every send then merge-patches ``status`` with the reporter's keys only (see
``k8s_status``). The pod needs a namespaced Role with get on ``stragglerreports`` and
patch on ``stragglerreports/status`` (docs/manifests/reporter-role.yaml), nothing more.

All I/O runs on the publisher's thread with short timeouts and no client-level retries
(the publisher owns retrying), so an API server that errors or never answers costs the
training loop nothing. ``read_control`` reads ``spec.control`` for runtime control, on
the control watcher's thread (``detector/control_sources.py``).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from ..score_report import ReportRejected, ScoreReport
from .k8s_status import (
    DEFAULT_STRAGGLER_THRESHOLD,
    GROUP,
    PLURAL,
    VERSION,
    build_status,
    status_patch,
)
from .log_throttle import LogThrottle, more_since

logger = logging.getLogger(__name__)


class ReportNotCreated(Exception):
    """The job's StragglerReport does not exist yet: the controller creates it. Retryable:
    the publisher keeps the report and tries again with backoff."""


class KubernetesStatusSink:
    name = "kubernetes"

    def __init__(
        self,
        *,
        namespace: str,
        name: str,
        incarnation: str,
        api_client: Any = None,
        threshold: float = DEFAULT_STRAGGLER_THRESHOLD,
        connect_timeout_s: float = 3.0,
        read_timeout_s: float = 10.0,
        pod_name: str | None = None,
        log_throttle: LogThrottle | None = None,
    ) -> None:
        """``pod_name``: this pod, named in log lines."""
        if not namespace or not name:
            raise ValueError(
                "kubernetes reporter needs the job's namespace and name "
                "(PACEKEEPER_JOB_NAMESPACE, PACEKEEPER_JOB_NAME)"
            )
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"straggler threshold must be within [0, 1], got {threshold!r}")
        self.namespace = namespace
        self.object_name = name
        self.incarnation = incarnation
        self.threshold = threshold
        self.pod_name = pod_name
        self._timeout = (connect_timeout_s, read_timeout_s)
        self._api_client = api_client
        self._api: Any = None
        self._previous: dict[str, Any] | None = None
        self._known = False
        """True once the object is known to exist."""
        self._waiting_log = log_throttle or LogThrottle()
        # Import now, at initialize: importing the client takes a second or two of CPU,
        # which on the publisher thread would hold the GIL against the training loop.
        import kubernetes.client  # noqa: F401

    def send(self, report: ScoreReport) -> None:
        # The controller refuses a status whose report names another job (or a job that
        # is not a Kubernetes one: the Detector saw no KUBERNETES_SERVICE_HOST), so say so
        # here, once, instead of writing what will be ignored.
        expected = f"{self.namespace}/{self.object_name}"
        if report.job.key != expected:
            raise ReportRejected(
                f"job identity mismatch: reporter writes StragglerReport {expected}, "
                f"report.job is {report.job.key!r}"
            )
        status = build_status(report, incarnation=self.incarnation, threshold=self.threshold)
        from kubernetes.client.exceptions import ApiException

        api = self._custom_objects()
        if not self._known:
            self._ensure_object(api)
        try:
            obj = api.patch_namespaced_custom_object_status(
                GROUP,
                VERSION,
                self.namespace,
                PLURAL,
                self.object_name,
                status_patch(self._previous, status),
                _content_type="application/merge-patch+json",
                _request_timeout=self._timeout,
            )
        except ApiException as e:
            if e.status == 404:  # deleted under us (or being repaired): read it again
                self._known = False
                self._previous = None
            elif e.status == 422:  # the server's schema refused our status: not retryable
                raise ReportRejected(
                    f"StragglerReport {self.namespace}/{self.object_name} status refused: "
                    f"HTTP 422 {api_message(e)}"
                ) from e
            raise
        self._previous = _status_of(obj) or status

    def read_control(self) -> Any:
        """``spec.control`` of the job's StragglerReport, as stored (None when the object
        or the field is absent): runtime control, read on the control watcher's thread
        with the same short timeouts. Written by a platform engineer or the controller;
        the reporter Role may only read spec (docs/security.md)."""
        from kubernetes.client.exceptions import ApiException

        try:
            obj = self._custom_objects().get_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, self.object_name,
                _request_timeout=self._timeout,
            )  # fmt: skip
        except ApiException as e:
            if e.status == 404:
                return None
            raise
        spec = obj.get("spec") if isinstance(obj, dict) else None
        return spec.get("control") if isinstance(spec, dict) else None

    def _ensure_object(self, api: Any) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            obj = api.get_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, self.object_name,
                _request_timeout=self._timeout,
            )  # fmt: skip
        except ApiException as e:
            if e.status != 404:
                raise
            # Never created here: only the controller makes a report bound to the job
            # from its birth. Till then the report waits, and a line says so now and then.
            held_back = self._waiting_log.admit("waiting")
            if held_back is not None:
                logger.info(
                    "waiting for the controller to create StragglerReport %s/%s%s",
                    self.namespace, self.object_name, more_since(held_back),
                    extra={"namespace": self.namespace, "object": self.object_name,
                           "pod": self.pod_name},
                )  # fmt: skip
            raise ReportNotCreated(
                f"StragglerReport {self.namespace}/{self.object_name} does not exist yet: "
                "the pacekeeper controller creates it for an opted-in job "
                '(pod annotation pacekeeper.dev/detect: "true")'
            ) from e
        self._previous = _status_of(obj)
        self._known = True

    def _custom_objects(self) -> Any:
        if self._api is None:
            from kubernetes import client

            self._api = client.CustomObjectsApi(self._api_client or _default_api_client())
        return self._api

    def close(self) -> None:
        self._api = None


def _status_of(obj: Any) -> dict[str, Any] | None:
    if isinstance(obj, dict) and isinstance(obj.get("status"), dict):
        return dict(obj["status"])
    return None


_MAX_API_MESSAGE_CHARS = 500


def api_message(error: Any) -> str:
    """What the API server said: the ``message`` of the Status in the body (which names
    the field and value it refused), else the HTTP reason phrase."""
    body = getattr(error, "body", None)
    message = None
    try:
        status = json.loads(body) if body else None
        if isinstance(status, dict) and isinstance(status.get("message"), str):
            message = status["message"]
    except (TypeError, ValueError):
        message = None
    text = message or str(getattr(error, "reason", None) or "") or type(error).__name__
    return text[:_MAX_API_MESSAGE_CHARS]


def _default_api_client() -> Any:
    """In-cluster service account first, then the local kubeconfig; no client retries."""
    from kubernetes import client, config

    configuration = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except config.ConfigException:
        config.load_kube_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    configuration.retries = 0
    return client.ApiClient(configuration)
