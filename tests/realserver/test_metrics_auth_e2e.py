"""/metrics behind real TokenReviews and SubjectAccessReviews (metrics.access=kubernetes).

The controller runs as the chart runs it: the rendered Deployment's command and env,
its TLS Secret's files where the Deployment mounts them (a certificate for 127.0.0.1
from a throwaway CA), and the token of the chart's ServiceAccount with exactly the chart's
RBAC applied (`e2e_chart.install`), so every review it makes is authorised by the
`-metrics-auth` ClusterRole or not at all. Its policy file is one the controller refuses:
with the chart's `--on-invalid-policy wait` it then serves /metrics and decides nothing,
so it writes nothing the operator scenarios could find later.

The scrapers are real ServiceAccounts with real tokens (TokenRequest, signed by the
server): `scraper` bound to the chart's `-metrics-reader` ClusterRole, `stranger` not.
"""

from __future__ import annotations

import http.client
import shutil
import socket
import ssl
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cluster import RealCluster
from e2e_chart import ChartRelease, chart_values, install, uninstall
from pki import ClusterPki, make_pki
from processes import ServerProcess, free_loopback_ports, wait_until
from servers import write_kubeconfig

pytestmark = pytest.mark.slow

# thresholds.recover below act: what a hand edit of the ConfigMap may leave (issue 21).
REFUSED_POLICY = """\
apiVersion: pacekeeper.dev/v1alpha1
kind: RemediationPolicies
mode: observe
policies:
  default:
    thresholds: {act: 0.8, recover: 0.5}
"""
_START_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class Endpoint:
    url: str
    ca: ssl.SSLContext
    process: ServerProcess

    def get(self, path: str = "/metrics", token: str | None = None) -> tuple[int, str, Any]:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        request = urllib.request.Request(self.url + path, headers=headers)
        try:
            with urllib.request.urlopen(request, context=self.ca, timeout=10) as r:
                return r.status, r.read().decode(), r.headers
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(), e.headers


def _mounted(container: Mapping[str, Any], local: Mapping[str, Path]) -> list[str]:
    """The container's command with each volume's mountPath replaced by a local dir."""
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    argv = [str(a) for a in container["command"]]
    for name, directory in local.items():
        argv = [a.replace(mounts[name], str(directory)) for a in argv]
    return argv


def _env(container: Mapping[str, Any]) -> dict[str, str]:
    fields = {"metadata.namespace": "pacekeeper-system", "metadata.name": "pk-pacekeeper-m-1"}
    return {
        e["name"]: e["value"] if "value" in e else fields[e["valueFrom"]["fieldRef"]["fieldPath"]]
        for e in container.get("env") or []
    }


def start_controller(
    cluster: RealCluster, release: ChartRelease, pki: ClusterPki, directory: Path
) -> Endpoint:
    policy_dir = directory / "policy"
    policy_dir.mkdir(parents=True)
    (policy_dir / "policy.yaml").write_text(REFUSED_POLICY)
    tls_dir = directory / "tls"  # what the kubelet makes of the Secret: tls.crt, tls.key
    tls_dir.mkdir()
    shutil.copy(pki.serving_cert, tls_dir / "tls.crt")
    shutil.copy(pki.serving_key, tls_dir / "tls.key")
    argv = _mounted(release.container, {"policy": policy_dir, "tls": tls_dir})
    assert argv[:3] == ["pacekeeper", "operator", "run"], argv
    assert argv[argv.index("--metrics-access") + 1] == "kubernetes"
    argv[0] = str(Path(sys.executable).with_name("pacekeeper"))
    (port,) = free_loopback_ports(1)
    argv[argv.index("--metrics-port") + 1] = str(port)
    kubeconfig = directory / "kubeconfig"
    token = cluster.token_for(release.operator)
    write_kubeconfig(kubeconfig, cluster.base_url, cluster.ca_path, token)
    env = {"PATH": "/usr/bin:/bin", **_env(release.container), "KUBECONFIG": str(kubeconfig),
           "PYTHONUNBUFFERED": "1", "HOME": str(directory)}  # fmt: skip
    process = ServerProcess("metrics-operator", argv, directory / "operator.log", env)
    endpoint = Endpoint(
        f"https://127.0.0.1:{port}", ssl.create_default_context(cafile=str(pki.ca_cert)), process
    )
    wait_until(
        lambda: endpoint.get("/healthz")[0] == 200,
        timeout_s=_START_TIMEOUT_S,
        what="the controller serves /healthz over HTTPS",
        watched=[process],
    )
    return endpoint


def service_account_token(cluster: RealCluster, namespace: str, name: str) -> str:
    """A real, server-signed token of ServiceAccount namespace/name (TokenRequest)."""
    import kubernetes

    core: Any = kubernetes.client.CoreV1Api(cluster.admin)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": 600}}  # fmt: skip
    answer = core.create_namespaced_service_account_token(name, namespace, body)
    return str(answer.status.token)


@dataclass(frozen=True, slots=True)
class Scrapers:
    reader: str
    stranger: str


@pytest.fixture
def scrapers(real_cluster: RealCluster, real_namespace: str) -> Iterator[Scrapers]:
    import kubernetes

    reader = service_account_token(real_cluster, real_namespace, "scraper")
    stranger = service_account_token(real_cluster, real_namespace, "stranger")
    binding = f"{real_namespace}-scraper"
    real_cluster.apply({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": binding},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "pk-pacekeeper-metrics-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "scraper",
                      "namespace": real_namespace}],
    })  # fmt: skip
    yield Scrapers(reader, stranger)
    kubernetes.client.RbacAuthorizationV1Api(real_cluster.admin).delete_cluster_role_binding(
        binding
    )


@pytest.fixture
def chart_release(real_cluster: RealCluster) -> Iterator[ChartRelease]:
    values = chart_values(actions=("notify",), policy={}, reporters=(), mode="observe")
    release = install(real_cluster, {**values, "metrics": {"access": "kubernetes"}})
    try:
        yield release
    finally:
        uninstall(real_cluster, release)


@pytest.fixture
def endpoint(
    real_cluster: RealCluster, chart_release: ChartRelease, tmp_path: Path
) -> Iterator[Endpoint]:
    pki = make_pki(tmp_path / "pki")
    started = start_controller(real_cluster, chart_release, pki, tmp_path / "controller")
    try:
        yield started
    finally:
        started.process.stop()


def reader_allowed(cluster: RealCluster, namespace: str) -> bool:
    import kubernetes

    api: Any = kubernetes.client.AuthorizationV1Api(cluster.admin)
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
              "spec": {"user": f"system:serviceaccount:{namespace}:scraper",
                       "groups": ["system:serviceaccounts", "system:authenticated"],
                       "nonResourceAttributes": {"path": "/metrics", "verb": "get"}}}  # fmt: skip
    return bool(api.create_subject_access_review(review).status.allowed)


def test_a_reader_gets_metrics_a_stranger_403_garbage_and_no_token_401(
    real_cluster: RealCluster, real_namespace: str, scrapers: Scrapers, endpoint: Endpoint
) -> None:
    wait_until(
        lambda: reader_allowed(real_cluster, real_namespace),
        timeout_s=30, what="the reader's ClusterRoleBinding reaches the authorizer",
    )  # fmt: skip
    since = real_cluster.audit.mark()

    status, body, _ = endpoint.get(token=scrapers.reader)
    assert status == 200, body
    assert "pacekeeper_policy_valid 0.0" in body  # the controller, waiting on its policy

    status, body, _ = endpoint.get(token=scrapers.stranger)
    assert (status, body) == (403, "Forbidden\n")

    for token in ("garbage", scrapers.reader[:-4] + "AAAA", None):  # forged signature too
        status, body, headers = endpoint.get(token=token)
        assert (status, body) == (401, "Unauthenticated\n"), token
        assert headers["WWW-Authenticate"] == 'Bearer realm="pacekeeper"'

    # The reviews went to the API as the chart's ServiceAccount, and its RBAC let them.
    operator = "system:serviceaccount:pacekeeper-system:pk-pacekeeper"
    reviews = real_cluster.audit.find(since, user=operator, verb="create")
    by_kind = sorted((e.resource, e.code) for e in reviews)
    assert by_kind == sorted([("tokenreviews", 201)] * 4 + [("subjectaccessreviews", 201)] * 2)


def test_answers_are_cached_so_scrapes_do_not_cost_a_review_each(
    real_cluster: RealCluster, real_namespace: str, scrapers: Scrapers, endpoint: Endpoint
) -> None:
    wait_until(
        lambda: reader_allowed(real_cluster, real_namespace),
        timeout_s=30, what="the reader's ClusterRoleBinding reaches the authorizer",
    )  # fmt: skip
    since = real_cluster.audit.mark()
    for _ in range(5):
        assert endpoint.get(token=scrapers.reader)[0] == 200
        assert endpoint.get(token=scrapers.stranger)[0] == 403
    operator = "system:serviceaccount:pacekeeper-system:pk-pacekeeper"
    reviews = real_cluster.audit.find(since, user=operator, verb="create")
    assert sorted(e.resource for e in reviews) == sorted(
        ["tokenreviews", "subjectaccessreviews"] * 2
    )


def test_health_needs_no_token_and_plain_http_gets_nothing(endpoint: Endpoint) -> None:
    assert endpoint.get("/healthz")[:2] == (200, "ok\n")
    assert endpoint.get("/")[0] == 404
    plain = endpoint.url.replace("https://", "http://") + "/metrics"
    with pytest.raises((http.client.HTTPException, OSError)):
        urllib.request.urlopen(plain, timeout=5)


def test_a_client_that_does_not_trust_the_ca_sends_no_token(endpoint: Endpoint) -> None:
    # The pki of another cluster: its CA signed nothing here.
    with socket.create_connection(("127.0.0.1", int(endpoint.url.rsplit(":", 1)[1])), 5) as raw:
        other = ssl.create_default_context()  # the system store, as a careless client
        with pytest.raises(ssl.SSLCertVerificationError):
            other.wrap_socket(raw, server_hostname="127.0.0.1")
