"""core/v1 Events on the objects the actuators touch.

Event names derive from the object, action, reason, job and decision time, so a
repeated call (a retry after a timeout, a controller restart mid-action) finds the
Event already there (409) instead of posting a second one. Events are best effort: a
failure to post one is logged and counted, never raised into the action.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC
from enum import StrEnum

from pacekeeper.controller.actuators.api import Body, KubeApi
from pacekeeper.controller.actuators.retries import RetrySettings, retrying, status_of
from pacekeeper.controller.core.marks import (
    EVENT_COMPONENT,
    EVENT_JOB_ANNOTATION,
    EVENT_POLICY_ANNOTATION,
    MANAGED_BY_LABEL,
    Provenance,
)

logger = logging.getLogger(__name__)

CLUSTER_EVENTS_NAMESPACE = "default"
"""Where Events about cluster-scoped objects (nodes) go, as kubelet and kubectl expect."""

_MAX_NAME_PREFIX = 200


class EventAction(StrEnum):
    """`action` of our Events; the do-actions share the policy ladder's names."""

    NOTIFY = "notify"
    TAINT_NODE = "taintNode"
    UNTAINT_NODE = "untaintNode"
    CORDON_NODE = "cordonNode"
    UNCORDON_NODE = "uncordonNode"
    RESTART_RANK = "restartRank"
    DRAIN_NODE = "drainNode"


class EventType(StrEnum):
    NORMAL = "Normal"
    WARNING = "Warning"


@dataclass(frozen=True, slots=True)
class ObjectRef:
    kind: str
    name: str
    namespace: str | None = None
    uid: str | None = None
    api_version: str = "v1"

    @classmethod
    def of(cls, obj: Body) -> ObjectRef:
        meta = obj.get("metadata") or {}
        return cls(
            kind=str(obj.get("kind") or ""),
            name=str(meta.get("name")),
            namespace=meta.get("namespace"),
            uid=meta.get("uid"),
            api_version=str(obj.get("apiVersion") or "v1"),
        )

    def to_api(self) -> Body:
        ref: Body = {"kind": self.kind, "name": self.name, "apiVersion": self.api_version}
        if self.namespace:
            ref["namespace"] = self.namespace
        if self.uid:
            ref["uid"] = self.uid
        return ref


def _timestamp(provenance: Provenance) -> str:
    return str(provenance.at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))


def event_name(involved: ObjectRef, action: str, provenance: Provenance) -> str:
    seed = "|".join(
        [
            involved.kind,
            involved.namespace or "",
            involved.name,
            involved.uid or "",
            action,
            str(provenance.reason),
            provenance.job,
            provenance.at.isoformat(),
        ]
    )
    digest = hashlib.sha256(seed.encode()).hexdigest()[:16]
    return f"{involved.name[:_MAX_NAME_PREFIX]}.{digest}"


class EventRecorder:
    def __init__(
        self,
        api: KubeApi,
        *,
        settings: RetrySettings,
        sleep: Callable[[float], None],
        instance: str = "",
    ) -> None:
        self._api = api
        self._settings = settings
        self._sleep = sleep
        self._instance = instance
        self.failures = 0
        """Events that could not be posted (exported as a metric by the operator)."""

    def record(
        self,
        involved: ObjectRef,
        provenance: Provenance,
        action: EventAction,
        message: str,
        *,
        event_type: EventType = EventType.NORMAL,
        related: ObjectRef | None = None,
    ) -> bool:
        """Post the Event (once); False when it could not be posted."""
        namespace = involved.namespace or CLUSTER_EVENTS_NAMESPACE
        stamp = _timestamp(provenance)
        event: Body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": event_name(involved, action, provenance),
                "namespace": namespace,
                "labels": {MANAGED_BY_LABEL: provenance.owner},
                "annotations": {
                    EVENT_JOB_ANNOTATION: provenance.job,
                    EVENT_POLICY_ANNOTATION: provenance.policy,
                },
            },
            "involvedObject": involved.to_api(),
            "reason": str(provenance.reason),
            "message": message,
            "type": str(event_type),
            "action": str(action),
            "source": {"component": EVENT_COMPONENT},
            "reportingComponent": EVENT_COMPONENT,
            "reportingInstance": self._instance,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        if related is not None:
            event["related"] = related.to_api()

        def post() -> None:
            try:
                self._api.create_event(namespace, event)
            except Exception as exc:
                if status_of(exc) == 409:
                    return  # posted by an earlier attempt: the name is deterministic
                raise

        try:
            retrying(post, settings=self._settings, sleep=self._sleep, what="post event")
        except Exception as exc:
            self.failures += 1
            logger.warning(
                "event not posted",
                extra={"reason": str(provenance.reason), "action": str(action), "error": repr(exc)},
            )
            return False
        return True
