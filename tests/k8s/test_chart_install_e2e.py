"""The chart as installed: render it with real Helm, apply every rendered object to the API
harness, then start the controller exactly as the rendered Deployment would (its command,
its environment, its policy ConfigMap mounted as a file) and run the opt-in flow:
annotated pods + a StragglerReport -> a decision recorded in the report's status."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml
from harness import RunningServer, eventually
from operator_world import controller_status, cordoned, report, setup_world, sink, taints
from test_operator_process import kubeconfig, stop_all

from pacekeeper.controller.core.marks import TAINT_KEY

REPO = Path(__file__).resolve().parents[2]
RELEASE = "pk"
NAMESPACE = "pacekeeper"  # operator_world's controller namespace

VALUES: dict[str, Any] = {
    "mode": "enforce",
    # The image `make image` built here, run as it is (nothing is pulled): the chart takes
    # the local name only with pullPolicy Never (docs/install.md).
    "controller": {"image": {"pullPolicy": "Never"}},
    # Scraped over plain loopback here (the default, "kubernetes", serves HTTPS only).
    "metrics": {"access": "localhost"},
    "actions": {
        "notify": {"enabled": True},
        "taintNode": {"enabled": True},
        "cordonNode": {"enabled": True},
    },
    "policy": {
        "defaultPolicy": "gpu",
        "policies": {
            "gpu": {
                "score": {"kind": "gpuRelative"},
                "thresholds": {"act": 0.75, "recover": 0.9},
                "persistence": {"consecutiveReports": 2, "minSamples": 10},
                "warmup": {"afterJobStartS": 0, "afterActionS": 0},
                "ladder": {
                    "notify": {"enabled": True, "timeoutS": 1},
                    "taintNode": {"enabled": True, "timeoutS": 1},
                },
                "budgets": {"nodes": {"maxNodes": 1}, "betweenActionsS": 0},
            }
        },
        "cluster": {"nodes": {"maxNodes": 2}},
    },
}


def _render() -> list[dict[str, Any]]:
    chart = helm.Chart.load(REPO / "charts" / "pacekeeper")
    files = chart.render(VALUES, name=RELEASE, namespace=NAMESPACE, is_install=True)
    objects = [yaml.safe_load(c["data"]) for c in chart.crds]
    for path, text in sorted(files.items()):
        if path.endswith("NOTES.txt") or "/tests/" in path:
            continue
        objects.extend(d for d in yaml.safe_load_all(text) if d)
    return objects


def _container_env(container: dict[str, Any], pod_name: str) -> dict[str, str]:
    """The container's env as the kubelet would set it (downward API resolved)."""
    env: dict[str, str] = {}
    for e in container.get("env") or []:
        if "value" in e:
            env[e["name"]] = e["value"]
            continue
        path = e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        env[e["name"]] = {"metadata.namespace": NAMESPACE, "metadata.name": pod_name}[path]
    return env


@pytest.mark.slow
def test_rendered_deployment_runs_the_opt_in_flow_against_the_harness(
    k8s_server: RunningServer, k8s_api_client: Any, tmp_path: Path
) -> None:
    objects = _render()
    setup_world(k8s_server)  # the CRD, nodes and the job's annotated pods
    for obj in objects:
        if obj["kind"] == "CustomResourceDefinition":
            continue  # setup_world applied the same file
        obj.setdefault("metadata", {}).setdefault("namespace", NAMESPACE)
        if obj["kind"] in ("ClusterRole", "ClusterRoleBinding", "Namespace"):
            obj["metadata"].pop("namespace")
        k8s_server.apply(obj)

    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    (config_map,) = [
        o for o in objects if o["kind"] == "ConfigMap" and "policy.yaml" in o.get("data", {})
    ]
    # Mount the ConfigMap where the Deployment mounts it.
    mount = next(m for m in container["volumeMounts"] if m["name"] == "policy")
    policy_dir = tmp_path / mount["mountPath"].lstrip("/")
    policy_dir.mkdir(parents=True)
    (policy_dir / "policy.yaml").write_text(config_map["data"]["policy.yaml"])
    argv = [a.replace(mount["mountPath"], str(policy_dir)) for a in container["command"]] + list(
        container.get("args") or []
    )
    assert argv[:3] == ["pacekeeper", "operator", "run"]
    argv[0] = str(Path(sys.executable).with_name("pacekeeper"))
    # Metrics on a free port so the pod's port never collides on this machine.
    if "--metrics-port" in argv:
        argv[argv.index("--metrics-port") + 1] = "0"
    env = {
        **os.environ,
        **_container_env(container, "pk-controller-0"),
        "KUBECONFIG": str(kubeconfig(k8s_server.url, tmp_path / "kubeconfig")),
        "PYTHONUNBUFFERED": "1",
    }
    log = tmp_path / "controller.log"
    proc = subprocess.Popen(argv, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)

    stop = threading.Event()
    out = sink(k8s_api_client)

    def publish() -> None:
        seq = 0
        while not stop.is_set():
            out.send(report(seq, datetime.now(UTC), {5: 0.5}))
            seq += 1
            stop.wait(0.3)

    t = threading.Thread(target=publish, daemon=True)
    t.start()
    try:
        eventually(lambda: taints(k8s_server, "n1"), timeout_s=60)
        assert [x["key"] for x in taints(k8s_server, "n1")] == [TAINT_KEY]
        assert not cordoned(k8s_server, "n1"), "cordonNode is not in this policy's ladder"
        decisions = controller_status(k8s_server)["decisions"]
        assert any(d["verdict"] == "act" and d["action"] == "taintNode" for d in decisions)
        lease = k8s_server.read(
            "coordination.k8s.io/v1", "Lease", env["PACEKEEPER_LEASE_NAME"], NAMESPACE
        )
        assert lease is not None and lease["spec"]["holderIdentity"] == "pk-controller-0"
        # The state in its own namespace (issue 40), none beside the policy.
        state_ns = env["PACEKEEPER_STATE_NAMESPACE"]
        assert state_ns == f"{NAMESPACE}-state"
        assert k8s_server.read("v1", "ConfigMap", "pacekeeper-state", state_ns) is not None
        assert k8s_server.read("v1", "ConfigMap", "pacekeeper-state", NAMESPACE) is None
    finally:
        stop.set()
        t.join(5)
        stop_all([proc])
    assert '"msg": "operator starting"' in log.read_text()
