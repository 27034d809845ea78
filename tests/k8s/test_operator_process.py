"""The controller as it ships: `pacekeeper operator run` processes (Kopf, Lease election)
against the API harness over HTTP. Two replicas run; exactly one acts, once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness import RunningServer, eventually
from operator_world import (
    CONTROLLER_NS,
    POLICY_YAML,
    controller_status,
    cordoned,
    report,
    setup_world,
    sink,
    taints,
)

from pacekeeper.controller.core.marks import TAINT_KEY

FAST_POLICY = (
    POLICY_YAML.replace("timeoutS: 60", "timeoutS: 1")
    .replace("timeoutS: 120", "timeoutS: 1")
    .replace("holdS: 60", "holdS: 1")
)


def kubeconfig(url: str, path: Path) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "h", "cluster": {"server": url}}],
                "users": [{"name": "u", "user": {"token": "test-token"}}],
                "contexts": [{"name": "c", "context": {"cluster": "h", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    return path


def operator_process(policy: Path, kc: Path, identity: str, log: Path) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable, "-m", "pacekeeper.controller.cli", "operator", "run",
        "--policy", str(policy), "--kubeconfig", str(kc), "--namespace", CONTROLLER_NS,
        "--identity", identity, "--resync-s", "1", "--log-format", "json",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env)


def stop_all(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM (a graceful stop releases the Lease), then SIGKILL what lingers."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()


@pytest.fixture
def publisher(k8s_server: RunningServer, k8s_api_client: Any) -> Iterator[dict[int, float]]:
    """The job's world (CRD, nodes, opted-in pods), then its report every 0.3 s through the
    real reporter sink. The world comes first: a report sent before the CRD exists is
    refused with 404."""
    setup_world(k8s_server)
    slow: dict[int, float] = {5: 0.5}
    stop = threading.Event()
    out = sink(k8s_api_client)

    def loop() -> None:
        seq = 0
        while not stop.is_set():
            out.send(report(seq, datetime.now(UTC), dict(slow)))
            seq += 1
            stop.wait(0.3)

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    yield slow
    stop.set()
    t.join(5)


@pytest.mark.slow
def test_two_replicas_one_leader_act_once_then_undo_on_recovery(
    k8s_server: RunningServer, k8s_api_client: Any, tmp_path: Path,
    publisher: dict[int, float],
) -> None:  # fmt: skip
    policy = tmp_path / "policy.yaml"
    policy.write_text(FAST_POLICY.format(mode="enforce"))
    kc = kubeconfig(k8s_server.url, tmp_path / "kubeconfig")
    procs = [operator_process(policy, kc, name, tmp_path / f"{name}.log") for name in ("a", "b")]
    try:
        eventually(lambda: cordoned(k8s_server, "n1"), timeout_s=60)
        assert [t["key"] for t in taints(k8s_server, "n1")] == [TAINT_KEY]
        lease = k8s_server.read(
            "coordination.k8s.io/v1", "Lease", "pacekeeper-controller", CONTROLLER_NS
        )
        assert lease is not None
        leader = lease["spec"]["holderIdentity"]
        assert leader in ("a", "b")
        writes = k8s_server.history.find(verb="patch", plural="nodes", name="n1", status=200)
        assert len(writes) == 2, "one taint and one cordon, by one replica"

        publisher.clear()  # the rank recovers
        eventually(lambda: not cordoned(k8s_server, "n1"), timeout_s=60)
        eventually(lambda: taints(k8s_server, "n1") == [], timeout_s=30)
        verdicts = [d["verdict"] for d in controller_status(k8s_server)["decisions"]]
        assert verdicts.count("undo") == 2
    finally:
        stop_all(procs)
    logs = {p.name: p.read_text() for p in tmp_path.glob("*.log")}
    follower = "b" if leader == "a" else "a"
    assert '"msg": "became leader"' in logs[f"{leader}.log"]
    assert '"msg": "action applied"' not in logs[f"{follower}.log"]


def test_bad_policy_file_exits_2_naming_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "policy.yaml"
    bad.write_text(POLICY_YAML.format(mode="enforce").replace("act: 0.75", "act: 1.5"))
    done = subprocess.run(
        [sys.executable, "-m", "pacekeeper.controller.cli", "operator", "run",
         "--policy", str(bad), "--no-leader-election"],
        check=False, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "act" in done.stderr and "1.5" in done.stderr


@pytest.mark.slow
def test_leader_killed_mid_ladder_the_other_replica_goes_on_without_repeating(
    k8s_server: RunningServer, k8s_api_client: Any, tmp_path: Path,
    publisher: dict[int, float],
) -> None:  # fmt: skip
    policy = tmp_path / "policy.yaml"
    # The taint step waits 3 s for an effect: time enough to kill the leader after it.
    text = POLICY_YAML.format(mode="enforce").replace("timeoutS: 60", "timeoutS: 1")
    taint = "taintNode: {enabled: true, timeoutS: "
    policy.write_text(text.replace(taint + "120}", taint + "3}"))
    kc = kubeconfig(k8s_server.url, tmp_path / "kubeconfig")
    first = operator_process(policy, kc, "a", tmp_path / "a.log")
    procs = [first]
    try:
        eventually(
            lambda: (k8s_server.read("coordination.k8s.io/v1", "Lease", "pacekeeper-controller",
                                     CONTROLLER_NS) or {}).get("spec", {}).get("holderIdentity")
            == "a",
            timeout_s=60,
        )  # fmt: skip
        procs.append(operator_process(policy, kc, "b", tmp_path / "b.log"))
        eventually(lambda: taints(k8s_server, "n1"), timeout_s=60)
        first.kill()  # no goodbye: the Lease is left to expire
        first.wait(10)
        eventually(lambda: cordoned(k8s_server, "n1"), timeout_s=90)
        lease = k8s_server.read(
            "coordination.k8s.io/v1", "Lease", "pacekeeper-controller", CONTROLLER_NS
        )
        assert lease is not None and lease["spec"]["holderIdentity"] == "b"
        writes = k8s_server.history.find(verb="patch", plural="nodes", name="n1", status=200)
        assert len(writes) == 2, "one taint (by a) and one cordon (by b), nothing repeated"
        acted = [d["action"] for d in controller_status(k8s_server)["decisions"]
                 if d["verdict"] == "act"]  # fmt: skip
        assert acted.count("taintNode") == 1 and acted.count("cordonNode") == 1
    finally:
        stop_all(procs)
    assert '"msg": "action applied"' in (tmp_path / "b.log").read_text()
