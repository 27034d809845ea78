"""The controller as it ships: `pacekeeper operator run` processes (Kopf, Lease election)
against the API harness over HTTP. Two replicas run; exactly one acts, once. SIGTERM stops
a process within its bound in every state (API unreachable, follower, leader, mid-reconcile),
and a missing or broken kubeconfig is one line on stderr."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness import Fault, RunningServer, eventually
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
from pacekeeper.controller.runtime.shutdown import GRACE_S, STOP_TIMEOUT_S

LEASE = ("coordination.k8s.io/v1", "Lease", "pacekeeper-controller", CONTROLLER_NS)

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


def operator_process(
    policy: Path, kc: Path, identity: str, log: Path, extra: Sequence[str] = ()
) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable, "-m", "pacekeeper.controller.cli", "operator", "run",
        "--policy", str(policy), "--kubeconfig", str(kc), "--namespace", CONTROLLER_NS,
        "--identity", identity, "--resync-s", "1", "--log-format", "json", *extra,
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


# --- stopping -------------------------------------------------------------------------


def policy_and_kubeconfig(tmp_path: Path, policy_text: str, url: str) -> tuple[Path, Path]:
    policy = tmp_path / "policy.yaml"
    policy.write_text(policy_text)
    return policy, kubeconfig(url, tmp_path / "kubeconfig")


def logged(log: Path, msg: str) -> bool:
    return f'"msg": "{msg}"' in log.read_text(errors="replace")


def lease_holder(server: RunningServer) -> str | None:
    lease = server.read(*LEASE) or {}
    holder: str | None = lease.get("spec", {}).get("holderIdentity")
    return holder


def sigterm(proc: subprocess.Popen[bytes]) -> tuple[int, float]:
    """SIGTERM as the kubelet sends it; the exit code and the seconds it took to exit."""
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail(f"still running {GRACE_S} s after SIGTERM: the kubelet would SIGKILL it")
    took_s = time.monotonic() - started
    print(f"stopped in {took_s:.2f} s with exit code {code}")  # the measurement, with -s
    return code, took_s


class SilentServer:
    """A loopback port that accepts connections and never answers: an API server that
    hangs (a black-holed address, without leaving the machine)."""

    def __init__(self) -> None:
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.1)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self.connected = threading.Event()
        self._held: list[socket.socket] = []
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._closing.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            self._held.append(conn)
            self.connected.set()

    def close(self) -> None:
        self._closing.set()
        self._thread.join(5)
        for conn in self._held:
            conn.close()
        self._sock.close()


def refused_url() -> str:
    """A loopback port nobody listens on: every connection is refused at once."""
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.mark.parametrize("election", ["--leader-election", "--no-leader-election"])
@pytest.mark.parametrize("api", ["refused", "silent"])
def test_sigterm_stops_within_the_bound_while_the_api_is_unreachable(
    api: str, election: str, tmp_path: Path
) -> None:
    silent = SilentServer() if api == "silent" else None
    try:
        url = silent.url if silent is not None else refused_url()
        policy, kc = policy_and_kubeconfig(tmp_path, POLICY_YAML.format(mode="observe"), url)
        log = tmp_path / "a.log"
        proc = operator_process(policy, kc, "a", log, [election])
        try:
            if election == "--leader-election":
                eventually(lambda: logged(log, "waiting for leadership"), timeout_s=60)
            else:
                eventually(lambda: logged(log, "operator starting"), timeout_s=60)
            if silent is not None:  # a request is in flight and will never be answered
                assert silent.connected.wait(30)
            else:
                eventually(lambda: "Connection refused" in log.read_text(), timeout_s=30)
            code, took_s = sigterm(proc)
        finally:
            stop_all([proc])
    finally:
        if silent is not None:
            silent.close()
    assert code == 0, log.read_text()[-3000:]
    assert took_s < STOP_TIMEOUT_S
    assert logged(log, "operator stopped")


@pytest.mark.slow
def test_sigterm_stops_a_follower_then_the_leader_which_gives_the_lease_back(
    k8s_server: RunningServer, tmp_path: Path, publisher: dict[int, float]
) -> None:
    policy, kc = policy_and_kubeconfig(tmp_path, FAST_POLICY.format(mode="observe"), k8s_server.url)
    leader = operator_process(policy, kc, "a", tmp_path / "a.log")
    procs = [leader]
    try:
        eventually(lambda: lease_holder(k8s_server) == "a", timeout_s=60)
        # Leading for real: Kopf runs and the job has been reconciled.
        eventually(lambda: controller_status(k8s_server).get("decisions"), timeout_s=60)
        follower = operator_process(policy, kc, "b", tmp_path / "b.log")
        procs.append(follower)
        eventually(lambda: logged(tmp_path / "b.log", "waiting for leadership"), timeout_s=60)

        code, took_s = sigterm(follower)
        assert (code, lease_holder(k8s_server)) == (0, "a")
        assert took_s < STOP_TIMEOUT_S

        code, took_s = sigterm(leader)
        assert code == 0, (tmp_path / "a.log").read_text()[-3000:]
        assert took_s < STOP_TIMEOUT_S
        assert lease_holder(k8s_server) is None, "a clean stop gives the Lease back"
    finally:
        stop_all(procs)
    assert logged(tmp_path / "a.log", "lease released")


@pytest.mark.slow
def test_sigterm_mid_reconcile_stops_within_the_bound_and_leaves_the_lease_to_expire(
    k8s_server: RunningServer, tmp_path: Path, publisher: dict[int, float]
) -> None:
    policy, kc = policy_and_kubeconfig(tmp_path, FAST_POLICY.format(mode="enforce"), k8s_server.url)
    # Every node write is answered 8 s late: the reconcile that taints is stuck in it.
    k8s_server.inject(Fault(status=None, delay_s=8, verb="patch", plural="nodes", times=1000))
    log = tmp_path / "a.log"
    proc = operator_process(policy, kc, "a", log)
    try:
        eventually(
            lambda: k8s_server.history.find(verb="patch", plural="nodes", name="n1"), timeout_s=60
        )
        code, took_s = sigterm(proc)
    finally:
        stop_all([proc])
        k8s_server.faults.clear()
    assert code == 0, log.read_text()[-3000:]
    assert took_s < STOP_TIMEOUT_S
    assert logged(log, "reconcile still running at stop: lease left to expire")
    # A successor must not act beside a write that may still land: it waits for expiry.
    assert lease_holder(k8s_server) == "a"


def run_without_cluster(tmp_path: Path, kubeconfig_arg: Sequence[str] = ()) -> Any:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY_YAML.format(mode="observe"))
    env = {
        k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")
    }
    env["HOME"] = str(tmp_path)  # no ~/.kube/config
    return subprocess.run(
        [sys.executable, "-m", "pacekeeper.controller.cli", "operator", "run",
         "--policy", str(policy), "--no-leader-election", *kubeconfig_arg],
        check=False, capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip


def test_no_kubernetes_configuration_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = run_without_cluster(tmp_path)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "pacekeeper: no Kubernetes configuration (not in a cluster, no ~/.kube/config): "
        "set KUBECONFIG, pass --kubeconfig, or run in a cluster"
    ]


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "does not exist"),
        ("apiVersion: v1\nclusters: [\n", "is not valid YAML"),
        ("- just\n- a list\n", "is not a kubeconfig"),
        ("apiVersion: v1\nkind: Config\nclusters: []\n", "is invalid"),
        ("directory", "cannot read kubeconfig"),
    ],
)
def test_a_broken_kubeconfig_is_one_line_naming_the_file_and_exit_2(
    tmp_path: Path, content: str | None, problem: str
) -> None:
    kc = tmp_path / "kube" / "config"
    kc.parent.mkdir()
    if content == "directory":
        kc.mkdir()
    elif content is not None:
        kc.write_text(content)
    done = run_without_cluster(tmp_path, ["--kubeconfig", str(kc)])
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("pacekeeper: ") and str(kc) in line and problem in line
