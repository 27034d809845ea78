"""The operator's informer cache: opted-in pods and nodes as its watches last saw them.

A reconcile reads its job's pods and the cluster view from here instead of listing every
pod and node of the cluster: one LIST of each at start (``prime``), then every watch
event (``put_pod``/``put_node``). Separate from ``kubernetes.py`` (the pure converters
and the client reads) because this is the one piece of shared, mutable, thread-safe
state there: several reconciles read it at once while the watch handlers write it.

Lookups are indexed, so a reconcile costs the same on a cluster of 32,000 nodes as on one
of 30: pods by ``(namespace, job name)`` for every job-name label, and one ``ClusterView``
shared by all reconciles until a node's view (labels, cordon, our marks) changes. Node
heartbeats, which change none of these, rebuild nothing. Only what the reconcile reads is
kept of a pod (``POD_FIELDS``) and only the ``NodeView`` of a node, so the cache stays
small next to the full objects. Actuators still read the live object before they write,
so a cache that lags a watch event can delay an action, never misdirect one.

The priming LIST and the watch's own listing are two reads: an object deleted between
them would stay here with no DELETED event to remove it. Objects the watch has not
confirmed since the prime are ``unconfirmed``; ``sweep`` settles them against a second
LIST (the operator runs it once the watch's listing is through).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from pacekeeper.controller.core.ids import NodeName
from pacekeeper.controller.core.marks import DEFAULT_OWNER
from pacekeeper.controller.core.observations import ClusterView, NodeView
from pacekeeper.controller.sources.kubernetes import JOB_NAME_LABELS, node_view_of

PodKey = tuple[str, str]
"""(namespace, name)"""

POD_META_FIELDS = (
    "name", "namespace", "uid", "labels", "annotations", "ownerReferences",
    "creationTimestamp", "deletionTimestamp", "resourceVersion",
)  # fmt: skip
POD_FIELDS = {"spec": ("nodeName", "serviceAccountName"), "status": ("phase", "startTime")}
"""What trust, opt-in, placement, rank resolution and the memory's tenant read of a pod
(``trust.py``, ``ranks.py``, ``kubernetes.opt_in_of``); a new reader of another field
adds it here."""


def slim_pod(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of ``pod`` the reconcile reads (a real pod's spec and status are
    kilobytes: containers, env, volumes, container statuses)."""
    meta = pod.get("metadata") or {}
    out: dict[str, Any] = {"metadata": {k: meta[k] for k in POD_META_FIELDS if k in meta}}
    for part, fields in POD_FIELDS.items():
        src = pod.get(part) or {}
        out[part] = {k: src[k] for k in fields if k in src}
    return out


def _pod_key(pod: Mapping[str, Any]) -> PodKey:
    meta = pod.get("metadata") or {}
    return (str(meta.get("namespace", "")), str(meta.get("name", "")))


def _node_name(node: Mapping[str, Any]) -> NodeName:
    return NodeName(str((node.get("metadata") or {}).get("name", "")))


def _job_names(pod: Mapping[str, Any]) -> set[str]:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return {str(v) for k in JOB_NAME_LABELS if (v := labels.get(k))}


class WorldCache:
    """Pods (opted-in) and node views, indexed for one job's reconcile; thread-safe."""

    def __init__(self, owner: str = DEFAULT_OWNER) -> None:
        self.owner = owner
        """Whose marks the node views show (``NodeView.our_marks``)."""
        self._lock = threading.Lock()
        self._pods: dict[PodKey, dict[str, Any]] = {}
        self._by_job: dict[PodKey, set[PodKey]] = {}
        """(namespace, job name) -> pods carrying that name under a job-name label."""
        self._views: dict[NodeName, NodeView] = {}
        self._cluster: ClusterView | None = None
        """Built on demand; dropped when a node's view changes."""
        self._unconfirmed_pods: set[PodKey] = set()
        self._unconfirmed_nodes: set[NodeName] = set()
        self.primed = False

    # --- writes: the priming LIST and the watches ----------------------------------------

    def prime(self, pods: Iterable[Mapping[str, Any]], nodes: Iterable[Mapping[str, Any]]) -> None:
        """Fill from one LIST of each. An object a watch event already delivered wins."""
        with self._lock:
            for p in pods:
                key = _pod_key(p)
                if key not in self._pods:
                    self._set_pod(key, slim_pod(p))
                    self._unconfirmed_pods.add(key)
            for n in nodes:
                name = _node_name(n)
                if name not in self._views:
                    self._views[name] = node_view_of(n, self.owner)
                    self._unconfirmed_nodes.add(name)
            self._cluster = None
            self.primed = True

    def put_pod(self, event_type: str | None, pod: Mapping[str, Any]) -> None:
        key = _pod_key(pod)
        slim = None if event_type == "DELETED" else slim_pod(pod)
        with self._lock:
            self._unconfirmed_pods.discard(key)
            if slim is None:
                self._drop_pod(key)
            else:
                self._set_pod(key, slim)

    def put_node(self, event_type: str | None, node: Mapping[str, Any]) -> None:
        name = _node_name(node)
        view = None if event_type == "DELETED" else node_view_of(node, self.owner)
        with self._lock:
            self._unconfirmed_nodes.discard(name)
            if view is None:
                if self._views.pop(name, None) is not None:
                    self._cluster = None
            elif self._views.get(name) != view:
                self._views[name] = view
                self._cluster = None

    def _set_pod(self, key: PodKey, pod: dict[str, Any]) -> None:
        old = self._pods.get(key)
        if old is not None:
            for job in _job_names(old) - _job_names(pod):
                self._unindex(key, job)
        self._pods[key] = pod
        for job in _job_names(pod):
            self._by_job.setdefault((key[0], job), set()).add(key)

    def _drop_pod(self, key: PodKey) -> None:
        old = self._pods.pop(key, None)
        if old is not None:
            for job in _job_names(old):
                self._unindex(key, job)

    def _unindex(self, key: PodKey, job: str) -> None:
        members = self._by_job.get((key[0], job))
        if members is not None:
            members.discard(key)
            if not members:
                del self._by_job[(key[0], job)]

    # --- settling what the prime saw and the watch never confirmed --------------------------

    def unconfirmed(self) -> int:
        """Primed objects no watch event has delivered since."""
        with self._lock:
            return len(self._unconfirmed_pods) + len(self._unconfirmed_nodes)

    def sweep(self, pods: Iterable[Mapping[str, Any]], nodes: Iterable[Mapping[str, Any]]) -> int:
        """Settle the unconfirmed objects against a newer LIST: gone there, gone here;
        still there, taken from it. Returns how many were dropped."""
        listed_pods = {_pod_key(p): p for p in pods}
        listed_nodes = {_node_name(n): n for n in nodes}
        dropped = 0
        with self._lock:
            for key in self._unconfirmed_pods:
                if key in listed_pods:
                    self._set_pod(key, slim_pod(listed_pods[key]))
                else:
                    self._drop_pod(key)
                    dropped += 1
            for name in self._unconfirmed_nodes:
                if name in listed_nodes:
                    self._views[name] = node_view_of(listed_nodes[name], self.owner)
                else:
                    self._views.pop(name, None)
                    dropped += 1
            self._unconfirmed_pods.clear()
            self._unconfirmed_nodes.clear()
            self._cluster = None
        return dropped

    # --- reads: one job's reconcile ----------------------------------------------------

    def pods_of_job(self, namespace: str, job_name: str) -> list[dict[str, Any]]:
        """The pods in ``namespace`` that carry ``job_name`` under a job-name label
        (``kubernetes.pods_of_job``), by name. Treat them as read-only."""
        with self._lock:
            keys = sorted(self._by_job.get((namespace, job_name), ()))
            return [self._pods[k] for k in keys]

    def cluster_view(self) -> ClusterView:
        """Every node's view; the same object until a node's view changes."""
        with self._lock:
            if self._cluster is None:
                views = dict(self._views)
                self._cluster = ClusterView(nodes=views, total_nodes=len(views))
            return self._cluster

    def pod_count(self) -> int:
        with self._lock:
            return len(self._pods)
