"""The Helm chart on the real server: its RBAC applied, waited for, and taken away again.

The operator scenarios run the controller with exactly the rights the chart grants for
the values they use: the chart is rendered with real Helm (tests/chart/chart_render.py),
its ServiceAccount, Roles, ClusterRoles and bindings are applied as the admin, and a
scenario starts only once the server's authorizer grants every rule (RBAC reaches the
authorizer through an informer, a moment after the write). `uninstall` removes them, so
the next scenario has no right left over from this one. The Deployment's command, its
environment and the rendered policy document are kept for `e2e_operator`.

Where Helm's Go library is not installed (a GPU machine reached through the device tool
carries no 244 MB helm-python-sdk), `$PACEKEEPER_CHART_RENDERED` names a JSON file of
renderings made beforehand by `save_rendering` on a machine that has it; a rendering for
values it does not hold is an error, never a stale guess.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from binaries import KUBE_VERSION
from cluster import RealCluster, ServiceAccountIdentity
from identities import CHART_NAMESPACE, OPERATOR
from processes import wait_until

REPO_ROOT = Path(__file__).resolve().parents[2]
RBAC_KINDS = ("ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")
ACTIONS = ("notify", "restartRank", "taintNode", "cordonNode", "drainNode")
_GRANT_TIMEOUT_S = 30.0

Manifest = dict[str, Any]
RENDERED_ENV = "PACEKEEPER_CHART_RENDERED"


@cache
def chart_render() -> ModuleType:
    """tests/chart/chart_render.py, by file path: tests/chart is not on sys.path here."""
    path = REPO_ROOT / "tests" / "chart" / "chart_render.py"
    spec = importlib.util.spec_from_file_location("_chart_render", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def chart_values(
    *,
    actions: Iterable[str],
    policy: Mapping[str, Any],
    reporters: Sequence[Mapping[str, Any]],
    mode: str = "enforce",
) -> dict[str, Any]:
    """Values enabling exactly `actions` (ladder step names), with `policy` as the policy
    document's body and one reporter binding per entry of `reporters`
    (`{namespace, serviceAccount, reports}`)."""
    enabled = set(actions)
    unknown = enabled - set(ACTIONS)
    if unknown:
        raise ValueError(f"not chart actions: {sorted(unknown)}")
    return {
        "mode": mode,
        # The chart refuses its unpushed local default image; none runs here (the tier
        # starts the rendered command itself), so any pushed-looking name will do.
        "controller": {"image": {"repository": "registry.invalid/pacekeeper-controller"}},
        # The scenarios read the operator's /metrics on loopback, as a sidecar would; the
        # chart's default (kubernetes) has its own test: test_metrics_auth_e2e.py.
        "metrics": {"access": "localhost"},
        "actions": {a: {"enabled": a in enabled} for a in ACTIONS},
        "policy": dict(policy),
        "reporterRbac": {"enabled": bool(reporters), "bindings": [dict(r) for r in reporters]},
    }


@dataclass(frozen=True, slots=True)
class ChartRelease:
    """What a scenario took from one rendering of the chart."""

    values: Mapping[str, Any]
    rbac: tuple[Manifest, ...]
    """The RBAC objects applied, in apply order."""
    container: Mapping[str, Any]
    """The controller Deployment's container: command, env."""
    policy_yaml: str
    """The rendered policy ConfigMap's `policy.yaml`, as the Deployment mounts it."""
    operator: ServiceAccountIdentity
    namespaces: tuple[Manifest, ...] = ()
    """The Namespaces the chart creates (its state namespace): applied by `install`, kept
    by `uninstall` (helm.sh/resource-policy: keep)."""
    policy_map: Manifest | None = None
    """The rendered policy ConfigMap (not applied: the tier mounts it as a file)."""


def _rendering_key(values: Mapping[str, Any]) -> str:
    return json.dumps(values, sort_keys=True)


def save_rendering(values: Mapping[str, Any], path: Path) -> None:
    """Add the chart's rendering for `values` to the JSON file `path` (see RENDERED_ENV)."""
    saved = json.loads(path.read_text()) if path.exists() else {}
    saved[_rendering_key(values)] = chart_render().render(dict(values), kube_version=KUBE_VERSION)
    path.write_text(json.dumps(saved))


def _objects(values: Mapping[str, Any]) -> list[Manifest]:
    path = os.environ.get(RENDERED_ENV)
    if not path:
        # As Helm renders it for this server: the chart gates parts on the server's version.
        return list(chart_render().render(dict(values), kube_version=KUBE_VERSION))
    saved = json.loads(Path(path).read_text())
    key = _rendering_key(values)
    if key not in saved:
        raise LookupError(f"{RENDERED_ENV}={path} holds no rendering for the values {key}")
    return list(saved[key])


def render(values: Mapping[str, Any]) -> ChartRelease:
    objects = _objects(values)
    if not os.environ.get(RENDERED_ENV) and chart_render().NAMESPACE != CHART_NAMESPACE:
        raise AssertionError("identities.CHART_NAMESPACE differs from chart_render.NAMESPACE")
    order = {kind: i for i, kind in enumerate(RBAC_KINDS)}
    # `helm test` hooks (the metrics test's ServiceAccount and binding) are not installed.
    installed = [
        o for o in objects if "helm.sh/hook" not in (o["metadata"].get("annotations") or {})
    ]
    rbac = sorted((o for o in installed if o["kind"] in order), key=lambda o: order[o["kind"]])
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    (policy_map,) = [
        o for o in objects if o["kind"] == "ConfigMap" and "policy.yaml" in (o.get("data") or {})
    ]
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    if (deployment["metadata"]["namespace"], account) != (OPERATOR.namespace, OPERATOR.name):
        raise AssertionError(f"the chart's controller runs as {account}, not {OPERATOR}")
    return ChartRelease(
        values=values,
        rbac=tuple(rbac),
        container=container,
        policy_yaml=policy_map["data"]["policy.yaml"],
        operator=OPERATOR,
        namespaces=tuple(o for o in installed if o["kind"] == "Namespace"),
        policy_map=policy_map,
    )


def install(cluster: RealCluster, values: Mapping[str, Any]) -> ChartRelease:
    """Apply the chart's RBAC for `values` and wait until the server grants all of it."""
    release = render(values)
    cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": CHART_NAMESPACE}})
    cluster.apply(list(release.namespaces))
    cluster.apply(list(release.rbac))
    wait_granted(cluster, release.rbac)
    return release


def uninstall(cluster: RealCluster, release: ChartRelease) -> None:
    """Delete the RBAC objects `install` applied (a missing one is fine); the state
    namespace stays, as Helm keeps it."""
    import kubernetes
    from kubernetes.client.exceptions import ApiException

    rbac = kubernetes.client.RbacAuthorizationV1Api(cluster.admin)
    core = kubernetes.client.CoreV1Api(cluster.admin)
    deleters: dict[str, Callable[[Manifest], object]] = {
        "ClusterRoleBinding": lambda o: rbac.delete_cluster_role_binding(_name(o)),
        "ClusterRole": lambda o: rbac.delete_cluster_role(_name(o)),
        "RoleBinding": lambda o: rbac.delete_namespaced_role_binding(_name(o), _namespace(o)),
        "Role": lambda o: rbac.delete_namespaced_role(_name(o), _namespace(o)),
        "ServiceAccount": lambda o: core.delete_namespaced_service_account(_name(o), _namespace(o)),
    }
    for obj in reversed(release.rbac):
        try:
            deleters[obj["kind"]](obj)
        except ApiException as error:
            if error.status != 404:
                raise


def _name(obj: Mapping[str, Any]) -> str:
    return str(obj["metadata"]["name"])


def _namespace(obj: Mapping[str, Any]) -> str:
    return str(obj["metadata"]["namespace"])


# --- waiting for the authorizer ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Access:
    user: str
    groups: tuple[str, ...]
    namespace: str | None
    verb: str
    group: str
    resource: str
    subresource: str | None
    name: str | None

    def review(self) -> Manifest:
        attributes = {
            "verb": self.verb,
            "group": self.group,
            "resource": self.resource,
            "subresource": self.subresource,
            "namespace": self.namespace,
            "name": self.name,
        }
        return {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": self.user,
                "groups": list(self.groups),
                "resourceAttributes": {k: v for k, v in attributes.items() if v is not None},
            },
        }


def _grants(objects: Sequence[Manifest]) -> Iterator[_Access]:
    """Every (subject, verb, resource, name) a binding among `objects` grants."""
    roles = {(o["kind"], o["metadata"].get("namespace"), _name(o)): o for o in objects}
    for binding in objects:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        namespace = binding["metadata"].get("namespace")
        ref = binding["roleRef"]
        role_namespace = namespace if ref["kind"] == "Role" else None
        role = roles[(ref["kind"], role_namespace, ref["name"])]
        for subject in binding["subjects"]:
            identity = ServiceAccountIdentity(subject["namespace"], subject["name"])
            for rule in role["rules"]:
                for group in rule["apiGroups"]:
                    for resource in rule["resources"]:
                        base, _, sub = resource.partition("/")
                        for verb in rule["verbs"]:
                            for name in rule.get("resourceNames") or [None]:
                                yield _Access(
                                    identity.username, identity.groups, namespace, verb,
                                    group, base, sub or None, name,
                                )  # fmt: skip


def wait_granted(cluster: RealCluster, objects: Sequence[Manifest]) -> None:
    """Until a SubjectAccessReview allows every right the bindings in `objects` grant."""
    import kubernetes

    api: Any = kubernetes.client.AuthorizationV1Api(cluster.admin)
    pending = set(_grants(objects))

    def all_granted() -> bool:
        for access in list(pending):
            answer = api.create_subject_access_review(access.review())
            if answer.status.allowed:
                pending.discard(access)
        return not pending

    wait_until(
        all_granted,
        timeout_s=_GRANT_TIMEOUT_S,
        what=f"the chart's RBAC granted ({len(pending)} rights pending)",
        watched=cluster.processes,
    )
