"""The controller as the chart runs it: `pacekeeper operator run`, a process of its own.

Started with the rendered Deployment's command and environment (downward-API values
filled in as the kubelet would), its policy ConfigMap written where the Deployment
mounts it, and a kubeconfig holding the chart ServiceAccount's token: every request
it makes is authorized by the chart's RBAC. The process runs under the tier's
`ServerProcess` (its own log file, killed with pytest), so a scenario can SIGTERM it,
SIGKILL it mid-ladder and start it again.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import urllib3
from cluster import RealCluster
from e2e_chart import ChartRelease
from processes import ServerProcess, free_loopback_ports, wait_until
from servers import write_kubeconfig

POD_NAME = "pk-pacekeeper-7d9f8-x2x7q"
"""The controller pod's name: its Lease identity (a restarted container keeps it)."""
_START_TIMEOUT_S = 60.0
# A refusal in the operator's log, whatever logged it (our JSON lines, Kopf, urllib3);
# read without the line's timestamp, whose milliseconds may well be 403.
_FORBIDDEN = re.compile(r"(?<![\d.:])403(?!\d)|[Ff]orbidden")


def _argv(container: Mapping[str, Any], policy_dir: Path, metrics_port: int) -> list[str]:
    mount = next(m for m in container["volumeMounts"] if m["name"] == "policy")
    argv = [a.replace(mount["mountPath"], str(policy_dir)) for a in container["command"]]
    argv += list(container.get("args") or [])
    if argv[:3] != ["pacekeeper", "operator", "run"]:
        raise AssertionError(f"the chart's command changed: {argv}")
    argv[0] = str(Path(sys.executable).with_name("pacekeeper"))
    if "--metrics-port" in argv:  # a free port: the pod's 8080 may be taken here
        argv[argv.index("--metrics-port") + 1] = str(metrics_port)
    return argv


def _env(container: Mapping[str, Any], namespace: str) -> dict[str, str]:
    """The container's env as the kubelet sets it (downward API resolved)."""
    fields = {"metadata.namespace": namespace, "metadata.name": POD_NAME}
    return {
        e["name"]: e["value"] if "value" in e else fields[e["valueFrom"]["fieldRef"]["fieldPath"]]
        for e in container.get("env") or []
    }


class Operator:
    """One `pacekeeper operator run` for a chart release; `start` may be called again."""

    def __init__(self, cluster: RealCluster, release: ChartRelease, directory: Path) -> None:
        self.cluster = cluster
        self.release = release
        self.directory = directory
        self.runs: list[ServerProcess] = []
        (self.metrics_port,) = free_loopback_ports(1)
        self._pool = urllib3.PoolManager()

    @property
    def process(self) -> ServerProcess:
        return self.runs[-1]

    def start(self) -> Operator:
        """Start a process and wait until it holds the Lease."""
        container = self.release.container
        mount = next(m for m in container["volumeMounts"] if m["name"] == "policy")
        policy_dir = self.directory / mount["mountPath"].lstrip("/")
        policy_dir.mkdir(parents=True, exist_ok=True)
        (policy_dir / "policy.yaml").write_text(self.release.policy_yaml)
        kubeconfig = self.directory / "operator.kubeconfig"
        token = self.cluster.token_for(self.release.operator)
        write_kubeconfig(kubeconfig, self.cluster.base_url, self.cluster.ca_path, token)
        env = {
            **os.environ,
            **_env(container, self.release.operator.namespace),
            "KUBECONFIG": str(kubeconfig),
            "PYTHONUNBUFFERED": "1",
        }
        number = len(self.runs)
        process = ServerProcess(
            f"operator-{number}",
            _argv(container, policy_dir, self.metrics_port),
            self.directory / f"operator-{number}.log",
            env,
        )
        self.runs.append(process)
        wait_until(
            lambda: self.logged("operator starting") and self.metric("pacekeeper_leader") == 1,
            timeout_s=_START_TIMEOUT_S,
            what="the operator leads",
            watched=[process],
        )
        return self

    # --- what it said ---------------------------------------------------------------------

    def log_text(self) -> str:
        return "".join(p.log_path.read_text(errors="replace") for p in self.runs)

    def records(self) -> Iterator[dict[str, Any]]:
        """The JSON log lines of every run, in order."""
        for line in self.log_text().splitlines():
            if line.startswith("{"):
                try:
                    yield json.loads(line)
                except ValueError:
                    continue

    def logged(self, msg: str) -> bool:
        return f'"msg": "{msg}"' in self.process.log_path.read_text(errors="replace")

    def applied(self) -> list[str]:
        """`<action> <target> <outcome>` of every "action applied" line, all runs."""
        return [str(r.get("result")) for r in self.records() if r.get("msg") == "action applied"]

    def forbidden_lines(self) -> list[str]:
        out = []
        for line in self.log_text().splitlines():
            text = line
            if line.startswith("{"):
                try:
                    record = json.loads(line)
                except ValueError:
                    pass
                else:
                    record.pop("time", None)
                    text = json.dumps(record)
            if _FORBIDDEN.search(text):
                out.append(line)
        return out

    def metric(self, name: str, **labels: str) -> float | None:
        """One sample of its /metrics, None when absent or not served (yet)."""
        try:
            response = self._pool.request(
                "GET", f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=2.0, retries=False
            )
        except urllib3.exceptions.HTTPError:
            return None
        from prometheus_client.parser import text_string_to_metric_families

        for family in text_string_to_metric_families(response.data.decode()):
            for sample in family.samples:
                if sample.name == name and sample.labels == labels:
                    return float(sample.value)
        return None

    def tail(self, chars: int = 4000) -> str:
        return self.log_text()[-chars:] if self.runs else "<not started>"

    # --- stopping -------------------------------------------------------------------------

    def kill(self) -> int:
        """SIGKILL the running process (no goodbye: the Lease stays held)."""
        return self.process.kill()

    def close(self) -> None:
        for process in self.runs:
            process.stop(grace_s=25.0)
        self._pool.clear()
