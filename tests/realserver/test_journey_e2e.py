"""A platform engineer's journey, as docs/install.md, docs/opt-in.md and docs/upgrade.md
write it, with the tools they name, against a real kube-apiserver.

Nothing goes around Helm: the chart is installed by Helm's Go SDK (its install, upgrade
and uninstall, hooks, CRDs, the values schema and the kubeVersion check included), the
docs' manifests are applied with kubectl, the controller and the policy check run as the
chart's pods (`kubelet.ProcessKubelet` runs their containers under the chart's
ServiceAccount, in-cluster), and the training job's reporter runs inside its pod from its
environment. The cluster is this test's own: no CRD is installed before Helm's.

What it cannot prove here, and where that is covered instead: `helm test` and the webhook
(no Service routing to a pod without kube-proxy: tests/realserver/test_env_injection_e2e.py
calls the webhook by URL), images and pulls (tests/k8s/test_image.py), real GPUs.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from binaries import BUILD_COMMAND, KubeBinaries
from cluster import RealCluster, start_cluster
from journey_docs import REPO_ROOT, Tools, blocks, commands
from kubelet import ProcessKubelet, unshare_available
from processes import wait_until
from servers import write_kubeconfig

pytestmark = pytest.mark.slow

DOCS = REPO_ROOT / "docs"
SYSTEM = "pacekeeper-system"
TEAM = "team-a"
JOB = "llama-pretrain"
NODES = [f"gpu-node-{i}" for i in range(5)]
RANKS_PER_POD = 8  # the docs' --nproc-per-node
SLOW_RANK = 9  # pod 1's second rank
REPORTER = Path(__file__).with_name("journey_reporter.py")
TAINT_KEY = "pacekeeper.dev/straggler"


@pytest.fixture(scope="module")
def journey_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    binaries = KubeBinaries.located()
    missing = binaries.missing()
    why_not = unshare_available() or (
        None if shutil.which("kubectl") else f"no kubectl on PATH; {BUILD_COMMAND} installs one"
    )
    if missing or why_not:
        reason = why_not or f"real-server binaries missing; build them with {BUILD_COMMAND}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the journey: {reason}")
        pytest.skip(reason)
    with start_cluster(binaries) as cluster:
        yield cluster


@pytest.fixture
def tools(journey_cluster: RealCluster, tmp_path: Path) -> Iterator[tuple[Tools, ProcessKubelet]]:
    kubeconfig = tmp_path / "admin.kubeconfig"
    write_kubeconfig(kubeconfig, journey_cluster.base_url, journey_cluster.ca_path,
                     journey_cluster.admin_token)  # fmt: skip
    journey_cluster.apply(
        [{"apiVersion": "v1", "kind": "Node",
          "metadata": {"name": n, "labels": {"kubernetes.io/hostname": n}}} for n in NODES]
    )  # fmt: skip
    kubelet = ProcessKubelet(journey_cluster, NODES, tmp_path / "kubelet",
                             run=[SYSTEM], hold=[TEAM]).start()  # fmt: skip
    # The registry the reader pushed the image to (install.md); never pulled here.
    cwd = tmp_path / "user"
    cwd.mkdir()
    (cwd / "charts").symlink_to(REPO_ROOT / "charts")
    env = {"REGISTRY": "registry.example.com/platform", "TAG": "0.1.0"}
    try:
        yield Tools(kubeconfig, cwd, env), kubelet
    finally:
        kubelet.close()


def _install_block(env: dict[str, str]) -> list[list[str]]:
    (block, *_) = blocks(DOCS / "install.md", "Install", "bash")
    return commands(block, env)


def _objects(cluster: RealCluster, path: str) -> dict[str, Any]:
    """GET `path` as the admin; the decoded JSON."""
    response = cluster.probe_pool.request(
        "GET", cluster.base_url + path, headers={"Authorization": f"Bearer {cluster.admin_token}"}
    )
    assert response.status == 200, f"GET {path}: {response.status} {response.data[:300]!r}"
    return cast(dict[str, Any], json.loads(response.data))


def _wait(what: str, check: Callable[[], bool], timeout_s: float, kubelet: ProcessKubelet) -> None:
    try:
        wait_until(check, timeout_s=timeout_s, what=what)
    except Exception as error:
        # The controller's state: in the chart's state namespace (docs/security.md).
        states = _objects(kubelet.cluster, f"/api/v1/namespaces/{SYSTEM}-state/configmaps")
        decisions = [c.get("data") for c in states["items"] if "job" in c["metadata"]["name"]]
        raise AssertionError(
            f"{what}: {error}\nkubelet errors: {kubelet.errors[-5:]}\n"
            f"controller log:\n{kubelet.logs(SYSTEM, 'pacekeeper-')[-4000:]}\n"
            f"controller state: {json.dumps(decisions)[-6000:]}"
        ) from error


def test_install_opt_in_observe_enforce_and_uninstall_as_the_docs_say(
    journey_cluster: RealCluster, tools: tuple[Tools, ProcessKubelet], tmp_path: Path
) -> None:
    user, kubelet = tools
    cluster = journey_cluster
    install_commands = _install_block(user.env)
    helm_install = next(c for c in install_commands if c[:2] == ["helm", "install"])

    # 1. A bad value is refused by Helm, naming the field, before the chart's objects are
    #    created (Helm installs crds/ before it checks values: the CRD may be there).
    # (A value file: helm's --set keeps 1.5 a string; only ints, bools and null are typed.)
    bad = [*helm_install, "-f", _values(tmp_path, "bad-act.yaml", {"act": 1.5})]
    with pytest.raises(Exception, match=r"/policy/policies/default/thresholds/act"):
        user.run(bad)
    assert _objects(cluster, "/apis/apps/v1/deployments")["items"] == []

    # 2. A policy only the controller can refuse fails the pre-install hook, which says why.
    bad = [*helm_install, "-f", _values(tmp_path, "bad-recover.yaml", {"recover": 0.5})]
    with pytest.raises(Exception, match=r"failed pre-install: .*policy-check"):
        user.run(bad)
    check_log = kubelet.logs(SYSTEM, "pacekeeper-policy-check")
    assert "recover" in check_log, check_log[-2000:]
    user.run(["helm", "uninstall", "pacekeeper", "-n", SYSTEM])

    # 3. The Install block as written (install.md), then the opt-in job (opt-in.md).
    for argv in install_commands:
        if argv[:2] == ["helm", "test"]:
            continue  # needs Service routing to the pod (module docstring)
        user.run(argv)
    _wait("the controller holds its Lease", lambda: _lease_holder(cluster) is not None, 90,
          kubelet)  # fmt: skip
    user.run(["kubectl", "-n", TEAM, "create", "serviceaccount", "trainer"])
    (job_yaml, *_) = blocks(DOCS / "opt-in.md", "Indexed Job (batch/v1)", "yaml")
    job_yaml = _for_kubernetes_1_20(job_yaml)
    (tmp_path / "user" / "job.yaml").write_text(job_yaml)
    user.run(["kubectl", "apply", "-f", "job.yaml"])
    pods = _job_pods(cluster, kubelet, 4)

    # 4. Rank 0 reports from inside its pod; rank 9 is slow. The default policy gives a
    #    new job five minutes: the controller holds (WarmingUp) and marks nothing.
    _report(kubelet, pods, count=3)
    status = user.run(["pacekeeper", "status", "kubernetes", "-n", TEAM])
    assert JOB in status and SYSTEM in status, status
    assert _taints(cluster) == {}, "observe mode marked a node"

    # 5. The rehearsal values (install.md) make the controller enforce. The docs' job
    #    still only observes: a notice as an Event on the Job, the annotation named.
    (values,) = blocks(DOCS / "install.md", "Rehearse the ladder on a test cluster", "yaml")
    (tmp_path / "user" / "values-rehearsal.yaml").write_text(values)
    (upgrade, *_) = blocks(DOCS / "install.md", "Rehearse the ladder on a test cluster", "bash")
    before = _lease_holder(cluster)
    for argv in commands(upgrade, user.env):
        user.run(argv)
    _wait("the upgraded controller holds the Lease", lambda: _lease_holder(cluster) not in
          (None, before), 120, kubelet)  # fmt: skip
    _report(kubelet, pods, count=5)
    _wait("an Event on the Job", lambda: _job_events(cluster) != [], 60, kubelet)
    described = user.run(["kubectl", "describe", "job", JOB, "-n", TEAM])
    assert "ObserveMode" in described and "pacekeeper.dev/mode" in described, described
    status = user.run(["pacekeeper", "status", "kubernetes", "-n", TEAM])
    assert "pacekeeper.dev/mode" in status, status
    assert _taints(cluster) == {}, "a job that asked for observe was acted on"

    # 6. Without the mode line (a new Job), the slow rank's node is tainted.
    user.run(["kubectl", "delete", "job", JOB, "-n", TEAM])
    without_mode = "\n".join(
        line for line in job_yaml.splitlines() if "pacekeeper.dev/mode" not in line
    )
    (tmp_path / "user" / "job.yaml").write_text(without_mode + "\n")
    user.run(["kubectl", "apply", "-f", "job.yaml"])
    pods = _job_pods(cluster, kubelet, 4, exclude={p for p, _ in pods})
    slow_node = pods[SLOW_RANK // RANKS_PER_POD][1]
    _report(kubelet, pods, count=12)
    _wait("the slow rank's node tainted", lambda: slow_node in _taints(cluster), 60, kubelet)
    assert set(_taints(cluster)) == {slow_node}
    described = user.run(["kubectl", "describe", "job", JOB, "-n", TEAM])
    assert "taint" in described.lower(), described
    status = user.run(["pacekeeper", "status", "kubernetes", "-n", TEAM])
    assert JOB in status, status
    _hold_for_a_look(user)

    # 7. helm uninstall (upgrade.md): the CRD, the reports and our mark stay.
    (uninstall, *_) = blocks(DOCS / "upgrade.md", "Uninstall", "bash")
    for argv in commands(uninstall, user.env):
        user.run(argv)
    crds = _objects(cluster, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
    assert [c["metadata"]["name"] for c in crds["items"]] == ["stragglerreports.pacekeeper.dev"]
    reports = _objects(cluster, f"/apis/pacekeeper.dev/v1alpha1/namespaces/{TEAM}/stragglerreports")
    assert [r["metadata"]["name"] for r in reports["items"]] == [JOB]
    assert slow_node in _taints(cluster)
    deployments = _objects(cluster, f"/apis/apps/v1/namespaces/{SYSTEM}/deployments")
    assert deployments["items"] == []
    # The record of what the controller did stays with the kept state namespace.
    states = _objects(cluster, f"/api/v1/namespaces/{SYSTEM}-state/configmaps")
    assert "pacekeeper-state" in [c["metadata"]["name"] for c in states["items"]]


def _for_kubernetes_1_20(manifest: str) -> str:
    """The example as opt-in.md says to write it before 1.21: no Indexed-Job fields."""
    dropped = ("completionMode:", "backoffLimitPerIndex:", "maxFailedIndexes:")
    lines = [line for line in manifest.splitlines() if line.strip().split(" ")[0] not in dropped]
    assert len(lines) == len(manifest.splitlines()) - len(dropped), "the example changed"
    return "\n".join(lines) + "\n"


def _values(tmp_path: Path, name: str, thresholds: dict[str, float]) -> str:
    body = {"policy": {"policies": {"default": {"thresholds": thresholds}}}}
    (tmp_path / "user" / name).write_text(json.dumps(body))
    return name


def _hold_for_a_look(user: Tools) -> None:
    """With PACEKEEPER_JOURNEY_LOOK=DIR: the transcript so far and the kubeconfig go to DIR
    and the journey waits while DIR/hold exists, so a person can look at the cluster
    (docs/status.md's capture was taken so)."""
    look = os.environ.get("PACEKEEPER_JOURNEY_LOOK")
    if not look:
        return
    directory = Path(look)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "transcript.txt").write_text("\n".join(user.transcript) + "\n")
    (directory / "kubeconfig").write_text(user.kubeconfig.read_text())
    (directory / "hold").touch()
    deadline = time.monotonic() + 600
    while (directory / "hold").exists() and time.monotonic() < deadline:
        time.sleep(1)


# --- reading the world -------------------------------------------------------------------


def _lease_holder(cluster: RealCluster) -> str | None:
    leases = _objects(cluster, f"/apis/coordination.k8s.io/v1/namespaces/{SYSTEM}/leases")
    holders = [(lease.get("spec") or {}).get("holderIdentity") for lease in leases["items"]]
    return next((h for h in holders if h), None)


def _job_pods(
    cluster: RealCluster,
    kubelet: ProcessKubelet,
    count: int,
    exclude: set[str] = frozenset(),  # type: ignore[assignment]
) -> list[tuple[str, str]]:
    """The job's Running pods as (pod, node), in a stable order, once `count` are."""
    found: list[tuple[str, str]] = []

    def running() -> bool:
        pods = _objects(cluster, f"/api/v1/namespaces/{TEAM}/pods?labelSelector=job-name%3D{JOB}")
        live = [
            (p["metadata"]["name"], p["spec"].get("nodeName", ""))
            for p in pods["items"]
            if p["metadata"]["name"] not in exclude
            and (p.get("status") or {}).get("phase") == "Running"
        ]
        found[:] = sorted(live)
        return len(live) == count

    _wait(f"{count} pods of {JOB} running", running, 60, kubelet)
    return found


def _report(kubelet: ProcessKubelet, pods: list[tuple[str, str]], count: int) -> None:
    done = kubelet.exec(
        TEAM, pods[0][0],
        [sys.executable, str(REPORTER), json.dumps(pods), str(RANKS_PER_POD), str(SLOW_RANK),
         "0.5", str(count), "1.0"],
        timeout_s=60 + 15 * count,
    )  # fmt: skip
    assert done.returncode == 0, f"reporter exited {done.returncode}: {done.stdout}{done.stderr}"


def _job_events(cluster: RealCluster) -> list[dict[str, Any]]:
    events = _objects(cluster, f"/api/v1/namespaces/{TEAM}/events")
    return [
        e for e in events["items"]
        if e["involvedObject"].get("kind") == "Job" and e["involvedObject"].get("name") == JOB
        and "pacekeeper" in ((e.get("source") or {}).get("component") or
                             e.get("reportingComponent") or "")
    ]  # fmt: skip


def _taints(cluster: RealCluster) -> dict[str, list[dict[str, Any]]]:
    nodes = _objects(cluster, "/api/v1/nodes")
    out = {}
    for node in nodes["items"]:
        ours = [t for t in (node["spec"].get("taints") or []) if t["key"] == TAINT_KEY]
        if ours:
            out[node["metadata"]["name"]] = ours
    return out
