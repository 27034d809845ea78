"""core/v1 Events on the objects the actuators touch, and on the job's workload.

``record``: Event names derive from the object, action, reason, job and decision time,
so a repeated call (a retry after a timeout, a controller restart mid-action) finds the
Event already there (409) instead of posting a second one.

``tell``: Events that repeat (a verdict on a job's workload that comes back) aggregate
the way Kubernetes' own event recorder does: one Event per (object, type, reason,
message), named from those, whose ``count`` and ``lastTimestamp`` grow. The name being
deterministic, a restarted controller finds the Event (409) and counts on it.

Events are best effort: a failure to post one is logged and counted, never raised into
the action.
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


def told_name(involved: ObjectRef, event_type: EventType, reason: str, message: str) -> str:
    """The one Event that says ``message`` with ``reason`` about ``involved``."""
    seed = "|".join(
        [involved.kind, involved.namespace or "", involved.name, involved.uid or "",
         str(event_type), reason, message]
    )  # fmt: skip
    digest = hashlib.sha256(seed.encode()).hexdigest()[:16]
    return f"{involved.name[:_MAX_NAME_PREFIX]}.{digest}"


TOLD_KEPT = 4096
"""Aggregated Events whose count the recorder remembers (an LRU would do no better: a
forgotten one costs one extra patch, to read the count back)."""


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
        self._told: dict[str, int] = {}
        """Aggregated Events posted by this process, by name: their count."""

    def _event_body(
        self,
        involved: ObjectRef,
        *,
        name: str,
        reason: str,
        message: str,
        event_type: EventType,
        action: str,
        provenance: Provenance,
    ) -> Body:
        stamp = _timestamp(provenance)
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": name,
                "namespace": involved.namespace or CLUSTER_EVENTS_NAMESPACE,
                "labels": {MANAGED_BY_LABEL: provenance.owner},
                "annotations": {
                    EVENT_JOB_ANNOTATION: provenance.job,
                    EVENT_POLICY_ANNOTATION: provenance.policy,
                },
            },
            "involvedObject": involved.to_api(),
            "reason": reason,
            "message": message,
            "type": str(event_type),
            "action": action,
            "source": {"component": EVENT_COMPONENT},
            "reportingComponent": EVENT_COMPONENT,
            "reportingInstance": self._instance,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }

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
        event = self._event_body(
            involved,
            name=event_name(involved, action, provenance),
            reason=str(provenance.reason),
            message=message,
            event_type=event_type,
            action=str(action),
            provenance=provenance,
        )
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

    def tell(
        self,
        involved: ObjectRef,
        *,
        reason: str,
        message: str,
        event_type: EventType,
        action: str,
        provenance: Provenance,
    ) -> bool:
        """Say ``message`` on ``involved`` once, or count one more time that it was said;
        False when the Event could not be written."""
        namespace = involved.namespace or CLUSTER_EVENTS_NAMESPACE
        message = message[:1000]
        name = told_name(involved, event_type, reason, message)
        stamp = _timestamp(provenance)
        event = self._event_body(
            involved,
            name=name,
            reason=reason,
            message=message,
            event_type=event_type,
            action=action,
            provenance=provenance,
        )
        tried: list[bool] = []

        def bump(count: int) -> None:
            self._api.patch_event(namespace, name, {"count": count, "lastTimestamp": stamp})
            self._told[name] = count

        def post() -> None:
            again = bool(tried)
            tried.append(True)
            known = self._told.get(name)
            if known is not None:
                try:
                    bump(known + 1)
                    return
                except Exception as exc:
                    if status_of(exc) != 404:
                        raise
                    # Expired (the API keeps Events an hour) or deleted: say it anew.
            try:
                self._api.create_event(namespace, event)
            except Exception as exc:
                if status_of(exc) != 409:
                    raise
                if again:
                    return  # our own earlier attempt got through before it timed out
                # Said before this process started: read its count back, add one.
                shown = self._api.patch_event(namespace, name, {"lastTimestamp": stamp})
                bump(int(shown.get("count") or 1) + 1)
                return
            if len(self._told) >= TOLD_KEPT:
                self._told.clear()
            self._told[name] = 1

        try:
            retrying(post, settings=self._settings, sleep=self._sleep, what="post event")
        except Exception as exc:
            self.failures += 1
            logger.warning(
                "event not posted",
                extra={"reason": reason, "action": action, "error": repr(exc)},
            )
            return False
        return True
