"""The workload a job's pods belong to: the outermost controller above them.

People look at what they created (``kubectl describe job``, ``jobset``, ``pytorchjob``),
not at the StragglerReport, so that is where the controller's Events go. The chain is
followed from a live pod of the job through each object's controlling ownerReference
(Pod -> Job -> JobSet, Pod -> PyTorchJob, Pod -> Job -> RayJob ...), reading each owner
from the API: the pods and their owners are the API's record, never the report's claim.

A link that cannot be read (not served, forbidden by RBAC, deleted) ends the chain at
the last object known by its reference, which is still a valid ``involvedObject``.
Owners are cached by uid: a controller's owner does not change while it lives.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

MAX_DEPTH = 6
"""Owner links followed at most (the deepest real chains have three)."""
CACHE_LIMIT = 4096

PLURALS: dict[tuple[str, str], str] = {
    ("batch", "Job"): "jobs",
    ("jobset.x-k8s.io", "JobSet"): "jobsets",
    ("kubeflow.org", "PyTorchJob"): "pytorchjobs",
    ("kubeflow.org", "MPIJob"): "mpijobs",
    ("trainer.kubeflow.org", "TrainJob"): "trainjobs",
    ("batch.volcano.sh", "Job"): "jobs",
    ("ray.io", "RayJob"): "rayjobs",
    ("ray.io", "RayCluster"): "rayclusters",
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): "leaderworkersets",
    ("apps", "StatefulSet"): "statefulsets",
    ("apps", "ReplicaSet"): "replicasets",
    ("apps", "Deployment"): "deployments",
}
"""Resource names of the kinds training pods are known to sit under; any other kind is
read under the API's own convention (lower-case kind plus ``s``)."""


@dataclass(frozen=True, slots=True)
class OwnerRef:
    """An object named the way an ownerReference names it."""

    api_version: str
    kind: str
    name: str
    namespace: str
    uid: str | None = None


def controller_ref(obj: Mapping[str, Any]) -> OwnerRef | None:
    """The object's controlling owner, as its ownerReferences name it."""
    meta = obj.get("metadata") or {}
    for ref in meta.get("ownerReferences") or ():
        if ref.get("controller") and ref.get("kind") and ref.get("name"):
            return OwnerRef(
                api_version=str(ref.get("apiVersion") or "v1"),
                kind=str(ref["kind"]),
                name=str(ref["name"]),
                namespace=str(meta.get("namespace") or ""),
                uid=str(ref["uid"]) if ref.get("uid") else None,
            )
    return None


def first_controlled(pods: Iterable[Mapping[str, Any]]) -> OwnerRef | None:
    """The controller of the job's pods (the first by name that has one)."""
    named = sorted(pods, key=lambda p: str((p.get("metadata") or {}).get("name")))
    for p in named:
        ref = controller_ref(p)
        if ref is not None:
            return ref
    return None


class WorkloadResolver:
    """Follows owner links through the API, with the official client."""

    def __init__(self, api_client: Any, *, request_timeout_s: float = 10.0) -> None:
        from kubernetes import client

        self._custom = client.CustomObjectsApi(api_client)
        self._timeout = request_timeout_s
        self._tops: dict[str, OwnerRef] = {}

    def top_owner(self, pods: Iterable[Mapping[str, Any]]) -> OwnerRef | None:
        """The outermost controller above the job's pods; None when they have none."""
        ref = first_controlled(pods)
        if ref is None:
            return None
        if ref.uid is not None and ref.uid in self._tops:
            return self._tops[ref.uid]
        start = ref
        for _ in range(MAX_DEPTH):
            obj = self._read(ref)
            if obj is None:
                break
            above = controller_ref(obj)
            if above is None:
                break
            ref = above
        if start.uid is not None:
            if len(self._tops) >= CACHE_LIMIT:
                self._tops.clear()
            self._tops[start.uid] = ref
        return ref

    def _read(self, ref: OwnerRef) -> dict[str, Any] | None:
        from kubernetes.client.exceptions import ApiException

        group, _, version = ref.api_version.rpartition("/")
        if not group:
            return None  # core kinds (ReplicationController) have no training owners
        plural = PLURALS.get((group, ref.kind), ref.kind.lower() + "s")
        try:
            resp: Any = self._custom.get_namespaced_custom_object(
                group, version, ref.namespace, plural, ref.name,
                _preload_content=False, _request_timeout=self._timeout,
            )  # fmt: skip
        except ApiException as e:
            logger.debug(
                "workload owner not read",
                extra={"kind": ref.kind, "owner": ref.name, "status": e.status},
            )
            return None
        except OSError as e:
            logger.debug("workload owner not read", extra={"kind": ref.kind, "error": repr(e)})
            return None
        obj: dict[str, Any] = json.loads(resp.data or b"{}")
        uid = (obj.get("metadata") or {}).get("uid")
        if ref.uid is not None and uid != ref.uid:
            return None  # a namesake: the owner we were pointed at is gone
        return obj
