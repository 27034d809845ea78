"""An invalid policy met at start (a ConfigMap edited by hand): with
``--on-invalid-policy wait`` the controller stays up, decides nothing, says why (log line,
``pacekeeper_policy_valid 0``) and starts as usual once the file becomes valid."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from harness import RunningServer, eventually
from operator_world import CONTROLLER_NS, cordoned, taints
from test_operator_process import (
    FAST_POLICY,
    LEASE,
    kubeconfig,
    logged,
    publisher,  # noqa: F401 (a fixture)
    sigterm,
    stop_all,
)

from pacekeeper.controller.core.marks import TAINT_KEY


def free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        return int(probe.getsockname()[1])


def metric(port: int, name: str) -> float | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def waiting_operator(policy: Path, kc: Path, log: Path, port: int) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable, "-m", "pacekeeper.controller.cli", "operator", "run",
        "--policy", str(policy), "--kubeconfig", str(kc), "--namespace", CONTROLLER_NS,
        "--identity", "a", "--resync-s", "1", "--log-format", "json",
        "--metrics-port", str(port), "--on-invalid-policy", "wait",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PACEKEEPER_POLICY_RETRY_S": "0.3"}
    return subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env)


BAD = FAST_POLICY.format(mode="enforce").replace("act: 0.75", "act: 1.5")


def test_invalid_policy_waits_deciding_nothing_then_starts_once_fixed(
    k8s_server: RunningServer,
    tmp_path: Path,
    publisher: dict[int, float],  # noqa: F811
) -> None:
    assert FAST_POLICY.format(mode="enforce") != BAD
    policy = tmp_path / "policy.yaml"
    policy.write_text(BAD)
    kc = kubeconfig(k8s_server.url, tmp_path / "kubeconfig")
    port, log = free_port(), tmp_path / "a.log"
    proc = waiting_operator(policy, kc, log, port)
    try:
        eventually(lambda: metric(port, "pacekeeper_policy_valid") == 0.0, timeout_s=60)
        eventually(lambda: log.read_text().count("policy invalid") >= 3, timeout_s=30)
        assert "1.5" in log.read_text()
        time.sleep(2)  # reports keep coming: nothing may be decided on them
        assert proc.poll() is None, log.read_text()[-3000:]
        assert k8s_server.read(*LEASE) is None  # not even standing for leadership
        assert taints(k8s_server, "n1") == [] and not cordoned(k8s_server, "n1")
        assert k8s_server.history.find(verb="patch", plural="nodes") == []

        policy.write_text(FAST_POLICY.format(mode="enforce"))  # the kubelet's refresh
        eventually(lambda: metric(port, "pacekeeper_policy_valid") == 1.0, timeout_s=30)
        eventually(lambda: cordoned(k8s_server, "n1"), timeout_s=60)
        assert [t["key"] for t in taints(k8s_server, "n1")] == [TAINT_KEY]
        code, _ = sigterm(proc)
    finally:
        stop_all([proc])
    assert code == 0, log.read_text()[-3000:]
    assert logged(log, "policy valid: operator starting")


def test_invalid_policy_wait_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(BAD)
    kc: Any = kubeconfig("http://127.0.0.1:9", tmp_path / "kubeconfig")
    port, log = free_port(), tmp_path / "a.log"
    proc = waiting_operator(policy, kc, log, port)
    try:
        eventually(lambda: logged(log, "policy invalid: deciding nothing until it is fixed"),
                   timeout_s=60)  # fmt: skip
        code, took_s = sigterm(proc)
    finally:
        stop_all([proc])
    assert code == 0 and took_s < 5, log.read_text()[-3000:]
