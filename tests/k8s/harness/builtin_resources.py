"""The built-in resources the harness serves, with their discovery details."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Builtin:
    group_version: str  # "v1" for the core group
    plural: str
    kind: str
    namespaced: bool
    subresources: tuple[str, ...] = ()
    shortnames: tuple[str, ...] = ()


VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")

BUILTINS: tuple[Builtin, ...] = (
    Builtin("v1", "namespaces", "Namespace", False, ("status",), ("ns",)),
    Builtin("v1", "nodes", "Node", False, ("status",), ("no",)),
    Builtin("v1", "pods", "Pod", True, ("status", "eviction"), ("po",)),
    Builtin("v1", "events", "Event", True, (), ("ev",)),
    Builtin("v1", "configmaps", "ConfigMap", True, (), ("cm",)),
    Builtin("v1", "secrets", "Secret", True),
    Builtin("v1", "serviceaccounts", "ServiceAccount", True, (), ("sa",)),
    Builtin("events.k8s.io/v1", "events", "Event", True, (), ("ev",)),
    Builtin(
        "policy/v1", "poddisruptionbudgets", "PodDisruptionBudget", True, ("status",), ("pdb",)
    ),
    Builtin("coordination.k8s.io/v1", "leases", "Lease", True),
    Builtin("batch/v1", "jobs", "Job", True, ("status",)),
    Builtin("apps/v1", "deployments", "Deployment", True, ("status",), ("deploy",)),
    Builtin("v1", "services", "Service", True, ("status",), ("svc",)),
    # RBAC objects are stored (so a rendered chart applies whole), never enforced.
    Builtin("rbac.authorization.k8s.io/v1", "roles", "Role", True),
    Builtin("rbac.authorization.k8s.io/v1", "rolebindings", "RoleBinding", True),
    Builtin("rbac.authorization.k8s.io/v1", "clusterroles", "ClusterRole", False),
    Builtin("rbac.authorization.k8s.io/v1", "clusterrolebindings", "ClusterRoleBinding", False),
    Builtin(
        "apiextensions.k8s.io/v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        False,
        ("status",),
        ("crd",),
    ),
)
