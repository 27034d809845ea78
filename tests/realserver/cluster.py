"""A real kube-apiserver + etcd (+ kube-controller-manager) on loopback, for the real-server tier.

`start_cluster(KubeBinaries.located(), ...)` starts etcd, then kube-apiserver (HTTPS with a
throwaway CA, static bearer tokens, RBAC, an audit log of every ServiceAccount's
requests: `RealCluster.audit`), waits for `/readyz`, installs the given CRDs and
then starts kube-controller-manager (garbage collector, disruption controller, ...; no
node lifecycle: there are no kubelets). It returns a `RealCluster`: base URL, CA path,
tokens, `api_client(token)` for the official client, `apply(...)` for setup, `close()`.

Identities come from a static token file: an admin (group `system:masters`) and one token
per `ServiceAccountIdentity`, whose user name and groups are exactly those a real
ServiceAccount token carries, so RBAC treats the bearer as that ServiceAccount.
Everything runs in a temporary directory that `close()` removes; processes are stopped by
the PIDs this module started.
"""

from __future__ import annotations

import contextlib
import copy
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import urllib3
import yaml
from audit import AuditLog
from binaries import KubeBinaries
from pki import ClusterPki, make_pki
from processes import ServerProcess, free_loopback_ports, wait_until
from servers import AUDIT_LOG, start_apiserver, start_controller_manager, start_etcd

ADMIN_USER = "pacekeeper-admin"
CONTROLLER_MANAGER_USER = "system:kube-controller-manager"
# Leaves the temporary directory (logs, etcd data) behind for a post-mortem.
KEEP_DIRECTORY_ENV = "PACEKEEPER_REALSERVER_KEEP"

_DIRECTORY_PREFIX = "pacekeeper-realserver-"
_OWNER_FILE = "owner.pid"
_CRD_ESTABLISHED_TIMEOUT_S = 30.0
# Unknown kinds are looked up again while discovery catches up with a new CRD.
_DISCOVERY_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True, order=True)
class ServiceAccountIdentity:
    """Who a static token authenticates as: the ServiceAccount `namespace`/`name`."""

    namespace: str
    name: str

    @property
    def username(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.name}"

    @property
    def groups(self) -> tuple[str, ...]:
        return (
            "system:serviceaccounts",
            f"system:serviceaccounts:{self.namespace}",
            "system:authenticated",
        )


@dataclass(frozen=True, slots=True)
class _Token:
    token: str
    user: str
    groups: tuple[str, ...]


def _write_token_file(path: Path, tokens: Iterable[_Token]) -> None:
    # kube-apiserver's --token-auth-file: token,user,uid,"group1,group2"
    lines = [f'{t.token},{t.user},{t.user},"{",".join(t.groups)}"' for t in tokens]
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o600)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_stale_directories(parent: Path) -> None:
    """Remove directories left by test processes that died without closing (on tmpfs
    they would hold memory until reboot). One whose owner file is not written yet may
    be starting right now, and is left alone."""
    for directory in parent.glob(f"{_DIRECTORY_PREFIX}*"):
        try:
            owner = int((directory / _OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue
        if not _pid_alive(owner):
            shutil.rmtree(directory, ignore_errors=True)


class RealCluster:
    """A started cluster. Use as a context manager or call `close()`."""

    def __init__(
        self,
        directory: Path,
        pki: ClusterPki,
        base_url: str,
        admin_token: str,
        service_account_tokens: Mapping[ServiceAccountIdentity, str],
    ) -> None:
        self.directory = directory
        self.pki = pki
        self.base_url = base_url
        self.ca_path = pki.ca_cert
        self.admin_token = admin_token
        self.service_account_tokens = dict(service_account_tokens)
        self.processes: list[ServerProcess] = []
        self.audit = AuditLog(directory / AUDIT_LOG)
        """Every request of a ServiceAccount identity, as the server answered it."""
        self._clients: list[Any] = []
        self._admin: Any = None
        self._dynamic: Any = None
        self._closed = False
        self.probe_pool = urllib3.PoolManager(cert_reqs="CERT_REQUIRED", ca_certs=str(pki.ca_cert))

    # --- clients -------------------------------------------------------------------------

    def token_for(self, identity: ServiceAccountIdentity) -> str:
        """The static token of a ServiceAccount identity given to `start_cluster`."""
        try:
            return self.service_account_tokens[identity]
        except KeyError:
            known = ", ".join(i.username for i in sorted(self.service_account_tokens))
            raise KeyError(
                f"no token for {identity.username}: tokens are fixed at start ({known})"
            ) from None

    def configuration(self, token: str | None = None) -> Any:
        """A `kubernetes.client.Configuration` for `token` (the admin's by default)."""
        import kubernetes

        configuration = kubernetes.client.Configuration()
        configuration.host = self.base_url
        # Trust this cluster's CA explicitly: REQUESTS_CA_BUNDLE and friends point at
        # the system bundle, which does not hold it.
        configuration.ssl_ca_cert = str(self.ca_path)
        configuration.verify_ssl = True
        configuration.api_key = {"authorization": token or self.admin_token}
        configuration.api_key_prefix = {"authorization": "Bearer"}
        # As in the harness fixtures: every attempt is the caller's own.
        configuration.retries = False
        return configuration

    def api_client(self, token: str | None = None) -> Any:
        """A new `kubernetes.client.ApiClient` for `token`; closed with the cluster."""
        import kubernetes

        client = kubernetes.client.ApiClient(self.configuration(token))
        self._clients.append(client)
        return client

    @property
    def admin(self) -> Any:
        """The admin's ApiClient (shared; setup and assertions)."""
        if self._admin is None:
            self._admin = self.api_client()
        return self._admin

    # --- setup ---------------------------------------------------------------------------

    def apply_yaml(self, path: Path) -> list[dict[str, Any]]:
        """`apply` every document of a YAML file, in order."""
        documents = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        return self.apply(documents)

    def apply(
        self, objects: Mapping[str, Any] | Sequence[Mapping[str, Any]]
    ) -> list[dict[str, Any]]:
        """Create each object as the admin, or replace it if it exists; return what is stored.

        CRDs are waited on until Established, so their kinds can follow in the same call.
        Status is not written (the API ignores it on create): use the `/status` endpoint.
        """
        items = [objects] if isinstance(objects, Mapping) else list(objects)
        return [self._apply_one(obj) for obj in items]

    def _dynamic_client(self) -> Any:
        from kubernetes.dynamic import DynamicClient

        # Untyped library class; bound to Any once so the strict check stays quiet.
        dynamic_client: Any = DynamicClient
        if self._dynamic is None:
            # Its discovery cache would otherwise land in the shared temp dir, one per port.
            cache_file = str(self.directory / "discovery-cache.json")
            self._dynamic = dynamic_client(self.admin, cache_file=cache_file)
        return self._dynamic

    def _resource(self, api_version: str, kind: str) -> Any:
        from kubernetes.dynamic.exceptions import ResourceNotFoundError

        dynamic = self._dynamic_client()
        found: list[Any] = []

        def lookup() -> bool:
            try:
                found.append(dynamic.resources.get(api_version=api_version, kind=kind))
            except ResourceNotFoundError:
                dynamic.resources.invalidate_cache()
                return False
            return True

        wait_until(
            lookup,
            timeout_s=_DISCOVERY_TIMEOUT_S,
            what=f"{api_version} {kind} served",
            watched=self.processes,
        )
        return found[0]

    def _apply_one(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        from kubernetes.dynamic.exceptions import ConflictError

        body = copy.deepcopy(dict(obj))
        resource = self._resource(body["apiVersion"], body["kind"])
        metadata = body.setdefault("metadata", {})
        namespace = metadata.get("namespace", "default") if resource.namespaced else None
        try:
            stored = resource.create(body=body, namespace=namespace)
        except ConflictError:
            # It exists: replace it at its current version. A controller may write it in
            # between (1.20's token controller adds a Secret to every new ServiceAccount),
            # so a stale version is read again, a few times.
            for attempt in range(5):
                current = resource.get(name=metadata["name"], namespace=namespace)
                metadata["resourceVersion"] = current.metadata.resourceVersion
                try:
                    stored = resource.replace(body=body, namespace=namespace)
                    break
                except ConflictError:
                    if attempt == 4:
                        raise
                    time.sleep(0.1 * (attempt + 1))
        if body["kind"] == "CustomResourceDefinition":
            self._wait_established(resource, metadata["name"])
        return cast(dict[str, Any], stored.to_dict())

    def _wait_established(self, resource: Any, name: str) -> None:
        def established() -> bool:
            conditions = resource.get(name=name).to_dict().get("status", {}).get("conditions")
            return any(
                c.get("type") == "Established" and c.get("status") == "True"
                for c in conditions or []
            )

        wait_until(
            established,
            timeout_s=_CRD_ESTABLISHED_TIMEOUT_S,
            what=f"CRD {name} Established",
            watched=self.processes,
        )

    # --- lifetime ------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the servers (newest first, by PID), close clients, remove the directory."""
        if self._closed:
            return
        self._closed = True
        try:
            for process in reversed(self.processes):
                process.stop()
        finally:
            for client in self._clients:
                with contextlib.suppress(Exception):
                    client.close()
            self.probe_pool.clear()
            if os.environ.get(KEEP_DIRECTORY_ENV) != "1":
                shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> RealCluster:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def start_cluster(
    binaries: KubeBinaries,
    *,
    service_accounts: Iterable[ServiceAccountIdentity] = (),
    crds: Iterable[Path] = (),
    controller_manager: bool = True,
    start_timeout_s: float = 90.0,
) -> RealCluster:
    """Start a cluster; CRD files are applied before the controller manager starts.

    Installing CRDs first means the garbage collector watches their kinds from its first
    sync instead of after its next 30 s discovery round.
    """
    missing = binaries.missing(controller_manager)
    if missing:
        raise FileNotFoundError(f"missing binaries: {', '.join(map(str, missing))}")
    # tmpfs when there is one: etcd fsyncs every write.
    shm = Path("/dev/shm")
    parent = shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())
    _remove_stale_directories(parent)
    directory = Path(tempfile.mkdtemp(prefix=_DIRECTORY_PREFIX, dir=parent))
    try:
        (directory / _OWNER_FILE).write_text(str(os.getpid()))
        pki = make_pki(directory / "pki")
        admin_token = secrets.token_hex(16)
        manager_token = secrets.token_hex(16)
        sa_tokens = {identity: secrets.token_hex(16) for identity in sorted(set(service_accounts))}
        _write_token_file(
            directory / "tokens.csv",
            [
                _Token(admin_token, ADMIN_USER, ("system:masters",)),
                _Token(manager_token, CONTROLLER_MANAGER_USER, ("system:masters",)),
                *(_Token(t, i.username, i.groups) for i, t in sa_tokens.items()),
            ],
        )
        (apiserver_port,) = free_loopback_ports(1)
        base_url = f"https://127.0.0.1:{apiserver_port}"
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise

    cluster = RealCluster(directory, pki, base_url, admin_token, sa_tokens)
    try:
        etcd_url = start_etcd(binaries.etcd, directory, cluster.processes, start_timeout_s)
        start_apiserver(
            binaries.kube_apiserver,
            directory,
            pki,
            etcd_url=etcd_url,
            port=apiserver_port,
            token_file=directory / "tokens.csv",
            admin_token=admin_token,
            probe_pool=cluster.probe_pool,
            processes=cluster.processes,
            timeout_s=start_timeout_s,
        )
        for path in crds:
            cluster.apply_yaml(path)
        if controller_manager:
            start_controller_manager(
                binaries.kube_controller_manager,
                directory,
                pki,
                base_url=base_url,
                token=manager_token,
                probe_pool=cluster.probe_pool,
                processes=cluster.processes,
                timeout_s=start_timeout_s,
            )
    except BaseException:
        cluster.close()
        raise
    return cluster
