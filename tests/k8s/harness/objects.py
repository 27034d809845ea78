"""Small builders of Kubernetes objects for tests (plain dicts, as sent over the wire)."""

from __future__ import annotations

from typing import Any

from .clients import DEFAULT_NAMESPACE


def node(name: str, *, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
    }


def pod(
    name: str,
    *,
    namespace: str = DEFAULT_NAMESPACE,
    node_name: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    phase: str | None = "Running",
    ready: bool = True,
    owner: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``owner``: the controlling ownerReference (kind, name, uid), as a Job sets it."""
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "trainer:1"}]}
    if node_name is not None:
        spec["nodeName"] = node_name
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels or {},
            "annotations": annotations or {},
        },
        "spec": spec,
    }
    if owner is not None:
        obj["metadata"]["ownerReferences"] = [
            {"apiVersion": "batch/v1", "controller": True, "blockOwnerDeletion": True, **owner}
        ]
    if phase is not None:
        obj["status"] = {
            "phase": phase,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        }
    return obj


def pdb(
    name: str,
    match_labels: dict[str, str],
    *,
    namespace: str = DEFAULT_NAMESPACE,
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"selector": {"matchLabels": match_labels}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def crd(
    group: str,
    kind: str,
    plural: str,
    *,
    version: str = "v1alpha1",
    namespaced: bool = True,
    status_subresource: bool = True,
) -> dict[str, Any]:
    served: dict[str, Any] = {
        "name": version,
        "served": True,
        "storage": True,
        "schema": {
            "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        },
    }
    if status_subresource:
        served["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
            "scope": "Namespaced" if namespaced else "Cluster",
            "versions": [served],
        },
    }
