"""How etcd, kube-apiserver and kube-controller-manager are launched and probed for readiness.

Separate from cluster.py, which composes them: this module holds each server's command
line (every flag that makes it run here without kubelets, cloud or a real network) and
the probe that says it is ready. Each `start_*` appends its process to `processes` before
waiting, so a caller that stops `processes` on failure also stops a half-started server.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import urllib3
import yaml
from pki import ClusterPki
from processes import ServerProcess, free_loopback_ports, wait_until

SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
AUDIT_LOG = "audit.log"
"""kube-apiserver's audit log in the cluster directory: one JSON event per line."""
_PROBE_TIMEOUT_S = 2.0
# Every request of a ServiceAccount identity (the operator, the reporters) is audited:
# what the operator wrote, and every 403 anyone got. Node patches keep their body, so a
# test can tell a taint write from a cordon write. The admin and the controller manager
# (system:masters, not ServiceAccounts) are left out: they are the test's own hands.
_AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {
            "level": "Request",
            "userGroups": ["system:serviceaccounts"],
            "verbs": ["patch"],
            "resources": [{"group": "", "resources": ["nodes"]}],
        },
        {"level": "Metadata", "userGroups": ["system:serviceaccounts"]},
        {"level": "None"},
    ],
}


def write_kubeconfig(path: Path, base_url: str, ca_cert: Path, token: str) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "test", "cluster": {"server": base_url, "certificate-authority": str(ca_cert)}}
        ],
        "users": [{"name": "test", "user": {"token": token}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
        "current-context": "test",
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)


def minimal_env(home: Path) -> dict[str, str]:
    # Nothing from the test process leaks in (ETCD_* settings, proxies, CA bundles).
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)}


def get_ok(pool: urllib3.PoolManager, url: str, token: str | None = None) -> bool:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = pool.request("GET", url, headers=headers, timeout=_PROBE_TIMEOUT_S, retries=False)
    return response.status == 200


def start_etcd(
    etcd_binary: Path, directory: Path, processes: list[ServerProcess], timeout_s: float
) -> str:
    """Start a one-member etcd with its data in `directory`; return its client URL."""
    client_port, peer_port = free_loopback_ports(2)
    client_url = f"http://127.0.0.1:{client_port}"
    peer_url = f"http://127.0.0.1:{peer_port}"
    etcd = ServerProcess(
        "etcd",
        [
            str(etcd_binary),
            "--name=pk",
            f"--data-dir={directory / 'etcd'}",
            f"--listen-client-urls={client_url}",
            f"--advertise-client-urls={client_url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=pk={peer_url}",
            "--initial-cluster-state=new",
            "--logger=zap",
            "--log-level=warn",
        ],
        directory / "etcd.log",
        minimal_env(directory),
    )
    processes.append(etcd)
    pool = urllib3.PoolManager()

    def healthy() -> bool:
        response = pool.request(
            "GET", f"{client_url}/health", timeout=_PROBE_TIMEOUT_S, retries=False
        )
        return response.status == 200 and json.loads(response.data).get("health") == "true"

    try:
        wait_until(healthy, timeout_s=timeout_s, what="etcd healthy", watched=[etcd])
    finally:
        pool.clear()
    return client_url


def _write_audit_policy(directory: Path) -> Path:
    path = directory / "audit-policy.yaml"
    path.write_text(yaml.safe_dump(_AUDIT_POLICY))
    return path


def start_apiserver(
    apiserver_binary: Path,
    directory: Path,
    pki: ClusterPki,
    *,
    etcd_url: str,
    port: int,
    token_file: Path,
    admin_token: str,
    probe_pool: urllib3.PoolManager,
    processes: list[ServerProcess],
    timeout_s: float,
) -> None:
    """Start kube-apiserver on 127.0.0.1:`port` and wait for `/readyz` (as the admin)."""
    apiserver = ServerProcess(
        "kube-apiserver",
        [
            str(apiserver_binary),
            f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={port}",
            # 1.20 still serves plain HTTP on 127.0.0.1:8080 unless told not to.
            "--insecure-port=0",
            f"--cert-dir={directory / 'apiserver-certs'}",
            f"--tls-cert-file={pki.serving_cert}",
            f"--tls-private-key-file={pki.serving_key}",
            f"--token-auth-file={token_file}",
            "--authorization-mode=RBAC",
            f"--service-account-key-file={pki.service_account_public_key}",
            f"--service-account-signing-key-file={pki.service_account_key}",
            f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
            f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
            "--allow-privileged=true",
            "--profiling=false",
            f"--audit-policy-file={_write_audit_policy(directory)}",
            f"--audit-log-path={directory / AUDIT_LOG}",
            # Written as each request completes (not batched), so a test reads what the
            # server has answered so far.
            "--audit-log-mode=blocking",
        ],
        directory / "kube-apiserver.log",
        minimal_env(directory),
    )
    processes.append(apiserver)
    wait_until(
        lambda: get_ok(probe_pool, f"https://127.0.0.1:{port}/readyz", admin_token),
        timeout_s=timeout_s,
        what="kube-apiserver /readyz",
        watched=processes,
    )


def start_controller_manager(
    manager_binary: Path,
    directory: Path,
    pki: ClusterPki,
    *,
    base_url: str,
    token: str,
    probe_pool: urllib3.PoolManager,
    processes: list[ServerProcess],
    timeout_s: float,
) -> None:
    """Start kube-controller-manager against `base_url` as `token`; wait for `/healthz`."""
    kubeconfig = directory / "controller-manager.kubeconfig"
    write_kubeconfig(kubeconfig, base_url, pki.ca_cert, token)
    (port,) = free_loopback_ports(1)
    manager = ServerProcess(
        "kube-controller-manager",
        [
            str(manager_binary),
            f"--kubeconfig={kubeconfig}",
            # No kubelets: node lifecycle would taint and evict from every fake node.
            "--controllers=*,-nodelifecycle",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            "--port=0",
            f"--cert-dir={directory / 'controller-manager-certs'}",
            f"--tls-cert-file={pki.serving_cert}",
            f"--tls-private-key-file={pki.serving_key}",
            f"--service-account-private-key-file={pki.service_account_key}",
            f"--root-ca-file={pki.ca_cert}",
            "--profiling=false",
        ],
        directory / "kube-controller-manager.log",
        minimal_env(directory),
    )
    processes.append(manager)
    wait_until(
        lambda: get_ok(probe_pool, f"https://127.0.0.1:{port}/healthz"),
        timeout_s=timeout_s,
        what="kube-controller-manager /healthz",
        watched=processes,
    )
