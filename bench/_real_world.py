"""The time-to-act bench's world on a real kube-apiserver (the real-server tier's build).

`bench/controller_time_to_act.py --server real` starts etcd and kube-apiserver 1.20.2 as
the real-server tier does (tests/realserver: HTTPS, static tokens, RBAC, an audit log of
every ServiceAccount's requests; no kube-controller-manager: nothing here needs garbage
collection, and its Job controller would only watch 1,000 Jobs), applies the chart's
RBAC, and runs the controller as the chart's Deployment runs it, authenticated as the
chart's ServiceAccount, with leader election on. The world is what a Job controller and
a scheduler would leave: real batch/v1 Jobs, their pods owned by them (controlling
ownerReference with the Job's uid), bound to nodes and Running through `/status`.

Where the figures come from, none of them from the controller's word:
- t0, when a slow report was sent: the publisher's CLOCK_MONOTONIC just before its status
  PATCH (written to a file per report), so t1 - t0 includes the server's own time;
- t1, the job's notify Event: when this process's watch of Events delivered it;
- API calls per reconcile: the server's audit log (every request of the controller's
  ServiceAccount), over the controller's own reconcile counter;
- CPU and RSS: /proc of the controller's process, and of kube-apiserver and etcd beside it.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import urllib3
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "realserver"))

from audit import AuditEvent  # noqa: E402
from binaries import BUILD_COMMAND, KubeBinaries  # noqa: E402
from cluster import RealCluster, start_cluster  # noqa: E402
from e2e_chart import chart_values, install, save_rendering  # noqa: E402
from e2e_jobs import job_manifest, pod_manifest  # noqa: E402
from e2e_operator import Operator  # noqa: E402
from identities import OPERATOR  # noqa: E402

CRD_DIR = ROOT / "charts" / "pacekeeper" / "crds"
TRAINER = "trainer"
SETUP_THREADS = 8


def start(directory: Path) -> RealCluster:
    binaries = KubeBinaries.located()
    missing = binaries.missing(controller_manager=False)
    if missing:
        raise SystemExit(f"real-server binaries missing; build them with: {BUILD_COMMAND}")
    return start_cluster(
        binaries,
        service_accounts=[OPERATOR],
        crds=sorted(CRD_DIR.glob("*.yaml")),
        controller_manager=False,
    )


class _Api:
    """Plain HTTPS calls as the admin: the world's 65,000 objects are made in minutes, not
    the half hour the typed client's per-call overhead would take on two cores."""

    def __init__(self, cluster: RealCluster) -> None:
        self.base = cluster.base_url
        self.headers = {
            "Authorization": f"Bearer {cluster.admin_token}",
            "Content-Type": "application/json",
        }
        self.pool = urllib3.PoolManager(
            maxsize=SETUP_THREADS, cert_reqs="CERT_REQUIRED", ca_certs=str(cluster.ca_path)
        )

    def call(self, method: str, path: str, body: Any, content_type: str | None = None) -> Any:
        headers = dict(self.headers)
        if content_type:
            headers["Content-Type"] = content_type
        for attempt in range(5):
            r = self.pool.request(
                method, self.base + path, body=json.dumps(body), headers=headers, retries=False
            )
            if r.status < 300:
                return json.loads(r.data)
            if r.status == 409 and method == "POST":
                return None  # made by an earlier attempt
            if r.status in (429, 500, 503) and attempt < 4:
                time.sleep(0.5 * (attempt + 1))
                continue
            raise RuntimeError(f"{method} {path}: {r.status} {r.data[:300]!r}")
        raise AssertionError("unreachable")


def build(
    cluster: RealCluster, namespace: str, *, jobs: int, pods_per_job: int,
    job_name: Any, node_name: Any,
) -> float:  # fmt: skip
    """Namespace, ServiceAccount, then per job: its nodes, the Job, its pods (Running)."""
    api = _Api(cluster)
    t = time.monotonic()
    api.call("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
    api.call(
        "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": TRAINER}}
    )
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    def one_job(i: int) -> None:
        name = job_name(i)
        for k in range(pods_per_job):
            n = node_name(i, k)
            node = {"metadata": {"name": n, "labels": {"kubernetes.io/hostname": n}}}
            api.call("POST", "/api/v1/nodes", node)
        job = api.call(
            "POST", f"/apis/batch/v1/namespaces/{namespace}/jobs", job_manifest(name, pods_per_job)
        )
        if job is None:
            job = api.call("GET", f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}", None)
        for k in range(pods_per_job):
            pod = f"{name}-{k}"
            body = pod_manifest(job, pod, k, node_name(i, k), TRAINER)
            api.call("POST", f"/api/v1/namespaces/{namespace}/pods", body)
            api.call(
                "PATCH",
                f"/api/v1/namespaces/{namespace}/pods/{pod}/status",
                {"status": {"phase": "Running", "startTime": started}},
                "application/merge-patch+json",
            )

    with ThreadPoolExecutor(SETUP_THREADS) as pool:
        for _ in pool.map(one_job, range(jobs)):
            pass
    api.pool.clear()
    return time.monotonic() - t


def operator_values(policy_document: str, workers: int | None) -> dict[str, Any]:
    """The chart's values: notify only, the bench's policy, `workers` when given."""
    body = yaml.safe_load(policy_document)
    mode = body.pop("mode", "enforce")
    for key in ("apiVersion", "kind"):
        body.pop(key, None)
    values = chart_values(actions=("notify",), policy=body, reporters=[], mode=mode)
    if workers is not None:
        values["controller"] = {"workers": workers}
    return values


def start_operator(
    cluster: RealCluster, policy_document: str, directory: Path, workers: int | None
) -> Operator:
    """The chart's RBAC for notify only, then the chart's controller as its ServiceAccount."""
    release = install(cluster, operator_values(policy_document, workers))
    return Operator(cluster, release, directory).start()


def save_chart_rendering(policy_document: str, workers: int | None, path: Path) -> None:
    """The chart rendered for `start_operator`'s values into `path`, for a machine without
    Helm's library (tests/realserver/e2e_chart.py, RENDERED_ENV)."""
    save_rendering(operator_values(policy_document, workers), path)


def publisher_config(cluster: RealCluster) -> dict[str, Any]:
    return {"url": cluster.base_url, "ca": str(cluster.ca_path), "token": cluster.admin_token}


class EventWatch:
    """t1: when the server's watch delivered each new Event, by the involved object's name."""

    def __init__(self, cluster: RealCluster, namespace: str) -> None:
        self.cluster, self.namespace = cluster, namespace
        self.seen: dict[str, list[float]] = {}
        self.restarts = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> EventWatch:
        self._thread.start()
        return self

    def _lines(self, pool: urllib3.PoolManager, rv: str) -> Iterator[dict[str, Any]]:
        url = (
            f"{self.cluster.base_url}/api/v1/namespaces/{self.namespace}/events"
            f"?watch=1&allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds=300"
        )
        r = pool.request(
            "GET", url, headers={"Authorization": f"Bearer {self.cluster.admin_token}"},
            preload_content=False, timeout=urllib3.Timeout(connect=5, read=330), retries=False,
        )  # fmt: skip
        buf = b""
        with contextlib.closing(r):
            for chunk in r.stream(65536):
                buf += chunk
                *whole, buf = buf.split(b"\n")
                for line in whole:
                    if line.strip():
                        yield json.loads(line)

    def _run(self) -> None:
        pool = urllib3.PoolManager(cert_reqs="CERT_REQUIRED", ca_certs=str(self.cluster.ca_path))
        headers = {"Authorization": f"Bearer {self.cluster.admin_token}"}
        rv = ""
        while not self._stop.is_set():
            if not rv:  # (re)start from now: what is already there was not caused by a report
                events = f"{self.cluster.base_url}/api/v1/namespaces/{self.namespace}/events"
                listed = pool.request("GET", f"{events}?limit=1", headers=headers)
                rv = json.loads(listed.data)["metadata"]["resourceVersion"]
            try:
                for ev in self._lines(pool, rv):
                    obj = ev.get("object") or {}
                    if ev.get("type") == "ERROR":  # 410 Gone: resume from now, counted
                        rv, self.restarts = "", self.restarts + 1
                        break
                    rv = (obj.get("metadata") or {}).get("resourceVersion", rv)
                    if ev.get("type") == "ADDED":
                        name = str((obj.get("involvedObject") or {}).get("name"))
                        with self._lock:
                            self.seen.setdefault(name, []).append(time.monotonic())
            except (urllib3.exceptions.HTTPError, OSError):
                if not self._stop.is_set():  # not the server going away at the end
                    self.restarts += 1
                    time.sleep(0.5)

    def snapshot(self) -> dict[str, list[float]]:
        with self._lock:
            return {k: list(v) for k, v in self.seen.items()}

    def stop(self) -> None:
        self._stop.set()


class SendLog:
    """t0: the publisher's one line per report sent, `job seq slow t_before t_after`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self.slow_t0: dict[str, list[float]] = {}
        self.sent: list[float] = []

    def drain(self) -> None:
        with contextlib.suppress(FileNotFoundError), self.path.open("rb") as f:
            f.seek(self._offset)
            data = f.read()
            end = data.rfind(b"\n") + 1
            self._offset += end
            for line in data[:end].decode().splitlines():
                job, _seq, slow, t_before, _t_after = line.split()
                self.sent.append(float(t_before))
                if slow == "1":
                    self.slow_t0.setdefault(job, []).append(float(t_before))


class AuditCalls:
    """The controller's requests (its ServiceAccount's) from the server's audit log."""

    def __init__(self, cluster: RealCluster) -> None:
        self.audit = cluster.audit
        self._offset = self.audit.mark()
        self.reconciled: set[str] = set()
        self.calls: Counter[str] = Counter()
        self.counting = False
        self.denied = 0

    def drain(self) -> None:
        with self.audit.path.open("rb") as f:
            f.seek(self._offset)
            data = f.read()
        end = data.rfind(b"\n") + 1  # the server may be half-way through a line
        self._offset += end
        for line in data[:end].splitlines():
            raw = json.loads(line)
            if raw.get("stage") != "ResponseComplete":
                continue
            e = AuditEvent(raw)
            if e.user != OPERATOR.username:
                continue
            if e.code == 403:
                self.denied += 1
            if e.resource == "stragglerreports" and e.subresource == "status" and e.verb == "patch":
                self.reconciled.add(str(e.name))
            if self.counting and e.verb != "watch":
                sub = f"/{e.subresource}" if e.subresource else ""
                self.calls[f"{e.verb} {e.resource}{sub}"] += 1


def server_pids(cluster: RealCluster) -> Mapping[str, int]:
    return {p.name: p.pid for p in cluster.processes}
