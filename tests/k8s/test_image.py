"""The controller image that `make image` builds (the Dockerfile, over the Debian base that
tests/image/build.sh makes offline), run by podman the way the chart's Deployment runs it:
the image's own entrypoint and user, a read-only root with only /tmp writable, no
capabilities, no new privileges. Against the API harness (host network, loopback only) it
takes the Lease and reconciles a job with a slow rank: notify, then taint.

Off CI a missing image (or no root, no podman) skips with the build command; on CI
(`CI=true`) it fails, so a broken build cannot pass as skipped."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import socket
import subprocess
import urllib.request
import uuid
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from harness import RunningServer, eventually
from operator_world import CONTROLLER_NS, controller_state, controller_status, taints
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from test_chart_install_e2e import _container_env, _render
from test_operator_process import kubeconfig, publisher  # noqa: F401 (a fixture, used by name)

from pacekeeper.controller.core.marks import TAINT_KEY

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "tests" / "image" / "build.sh"
CHART_IMAGE = "localhost/pacekeeper-controller:0.1.0"
"""What the chart runs by default, and what `make image` tags."""
IDENTITY = "pk-controller-0"
KUBECONFIG_IN_IMAGE = "/var/run/pacekeeper-test/kubeconfig"

# podman asks for RLIMIT_NOFILE and RLIMIT_NPROC of 1048576; runc may not raise them
# without CAP_SYS_RESOURCE, which this sandbox lacks. Ample for one controller.
RLIMITS = ("--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096")

PROBE = """
import errno, importlib.metadata as md, importlib.util, json, os
def write(path):
    try:
        with open(path, "w") as f:
            f.write("x")
    except OSError as e:
        return e.errno
    os.unlink(path)
    return 0
print(json.dumps({
    "uid": os.getuid(), "gid": os.getgid(),
    "dists": sorted(d.metadata["Name"] for d in md.distributions()),
    "heavy": [m for m in ("torch", "ray", "cupti", "matplotlib") if importlib.util.find_spec(m)],
    "writes": {p: write(p) for p in ("/probe", "/opt/pacekeeper/probe", "/etc/probe",
                                     "/tmp/probe")},
}))
"""


def podman(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    """podman on the store that build.sh fills, with its runtime."""
    return subprocess.run(
        ["bash", str(BUILD), "podman", *args],
        capture_output=True, text=True, check=False, timeout=timeout_s,
    )  # fmt: skip


@pytest.fixture(scope="module")
def image() -> str:
    """The image built from this tree: its `input-<hash>` tag."""
    reason = None
    if os.geteuid() != 0 or shutil.which("podman") is None or shutil.which("runc") is None:
        reason = "needs root, podman and runc (make image installs them)"
    else:
        done = subprocess.run(
            ["bash", str(BUILD), "ref"], capture_output=True, text=True, check=False, timeout=60
        )
        reason = None if done.returncode == 0 else "no image built from this tree"
    if reason is not None:
        reason += ": run `make image` (tests/image/build.sh)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must build the controller image first: {reason}")
        pytest.skip(reason)
    return done.stdout.strip()


def inspect(ref: str) -> dict[str, Any]:
    done = podman("image", "inspect", ref)
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)[0]
    return found


def hardened(container: dict[str, Any]) -> list[str]:
    """podman flags for the container's securityContext and its /tmp emptyDir."""
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] and not security["allowPrivilegeEscalation"]
    assert security["capabilities"]["drop"] == ["ALL"]
    assert any(m["mountPath"] == "/tmp" for m in container["volumeMounts"])
    return [
        "--pull", "never", "--network", "host", *RLIMITS,
        "--read-only", "--read-only-tmpfs=false", "--tmpfs", "/tmp:rw,size=64m,mode=1777",
        "--cap-drop", "all", "--security-opt", "no-new-privileges",
    ]  # fmt: skip


def chart_pod() -> tuple[dict[str, Any], dict[str, Any], str]:
    """The rendered Deployment's pod spec, its container, and the policy document."""
    objects = _render()
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    spec = deployment["spec"]["template"]["spec"]
    (config_map,) = [
        o for o in objects if o["kind"] == "ConfigMap" and "policy.yaml" in o.get("data", {})
    ]
    return spec, spec["containers"][0], config_map["data"]["policy.yaml"]


def dependency_closure(dist: str, extras: tuple[str, ...]) -> set[str]:
    """`dist[extras]` and every distribution it needs, from this environment's metadata
    (installed from the same constraints.txt as the image)."""
    names: set[str] = set()
    seen: set[tuple[str, str]] = set()
    todo = [(dist, extra) for extra in ("", *extras)]
    while todo:
        name, extra = todo.pop()
        key = canonicalize_name(name)
        if (key, extra) in seen:
            continue
        seen.add((key, extra))
        names.add(key)
        for line in metadata.requires(name) or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": extra}):
                todo.extend((req.name, e) for e in ("", *req.extras))
    return names


def test_the_chart_runs_what_make_image_builds_as_its_own_user(image: str) -> None:
    built = inspect(image)
    assert inspect(CHART_IMAGE)["Id"] == built["Id"]
    spec, container, _ = chart_pod()
    assert container["image"] == CHART_IMAGE
    config = built["Config"]
    pod_security = spec["securityContext"]
    assert config["User"] == f"{pod_security['runAsUser']}:{pod_security['runAsGroup']}"
    assert config["User"] == "65532:65532"
    # Kubernetes' `command` replaces the image's entrypoint: both name the same program.
    assert config["Entrypoint"] == container["command"][:1] == ["pacekeeper"]
    assert config["Cmd"] == ["operator", "run", "--policy", "/etc/pacekeeper/policy.yaml"]


def test_the_image_holds_the_controller_and_its_dependencies_only_and_writes_only_tmp(
    image: str,
) -> None:
    _, container, _ = chart_pod()
    done = podman(
        "run", "--rm", *hardened(container), "--entrypoint", "/opt/pacekeeper/bin/python",
        image, "-c", PROBE,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert (seen["uid"], seen["gid"]) == (65532, 65532)
    assert seen["heavy"] == [], "torch, ray, cupti and matplotlib stay out of the image"
    expected = dependency_closure("pacekeeper", ("kubernetes",))
    assert {canonicalize_name(d) for d in seen["dists"]} == expected, "no pip, no build tools"
    read_only = {p: e for p, e in seen["writes"].items() if p != "/tmp/probe"}
    assert read_only == dict.fromkeys(read_only, errno.EROFS)
    assert seen["writes"]["/tmp/probe"] == 0


def free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port: int = probe.getsockname()[1]
    return port


def metrics(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            return str(r.read().decode())
    except OSError:
        return ""


def holder(server: RunningServer, lease: tuple[str, str, str, str]) -> str | None:
    found: str | None = (server.read(*lease) or {}).get("spec", {}).get("holderIdentity")
    return found


@pytest.mark.slow
@pytest.mark.usefixtures("publisher")
def test_the_images_entrypoint_leads_and_reconciles_a_slow_rank(
    image: str, k8s_server: RunningServer, tmp_path: Path
) -> None:
    _, container, policy_text = chart_pod()
    (policy_mount,) = [m for m in container["volumeMounts"] if m["name"] == "policy"]
    policy_dir = tmp_path / "policy"
    policy_dir.mkdir()
    (policy_dir / "policy.yaml").write_text(policy_text)
    kc = kubeconfig(k8s_server.url, tmp_path / "kubeconfig")
    env = {**_container_env(container, IDENTITY), "KUBECONFIG": KUBECONFIG_IN_IMAGE}
    args = [str(a) for a in container["command"][1:]]  # after the entrypoint, `pacekeeper`
    port = free_port()  # host network: the chart's 8080 may be taken on this machine
    args[args.index("--metrics-port") + 1] = str(port)
    name = f"pacekeeper-image-test-{uuid.uuid4().hex[:12]}"
    argv = [
        "bash", str(BUILD), "podman", "run", "--rm", "--name", name, *hardened(container),
        "-v", f"{policy_dir}:{policy_mount['mountPath']}:ro",
        "-v", f"{kc}:{KUBECONFIG_IN_IMAGE}:ro",
        *[f"--env={k}={v}" for k, v in env.items()],
        image, *args,
    ]  # fmt: skip
    log = tmp_path / "controller.log"
    proc = subprocess.Popen(argv, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    lease = ("coordination.k8s.io/v1", "Lease", env["PACEKEEPER_LEASE_NAME"], CONTROLLER_NS)
    try:
        eventually(lambda: holder(k8s_server, lease) == IDENTITY, timeout_s=90)
        eventually(lambda: taints(k8s_server, "n1"), timeout_s=60)
        assert [t["key"] for t in taints(k8s_server, "n1")] == [TAINT_KEY]
        acted = [
            (d["action"], d["reason"])
            for d in controller_status(k8s_server)["decisions"]
            if d["verdict"] == "act"
        ]
        assert acted[:2] == [("notify", "BelowThreshold"), ("taintNode", "BelowThreshold")]
        state_ns = env["PACEKEEPER_STATE_NAMESPACE"]  # the chart's (issue 40)
        assert state_ns != CONTROLLER_NS
        assert controller_state(k8s_server, namespace=state_ns), "the job's state, in its namespace"
        events = k8s_server.list("v1", "Event", "default")
        assert any(e.get("action") == "notify" for e in events)
        assert "pacekeeper_leader 1.0" in eventually(lambda: metrics(port), timeout_s=30)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # podman passes it on to the controller
        try:
            code: int | None = proc.wait(30)
        except subprocess.TimeoutExpired:
            code = None
        podman("rm", "--force", "--ignore", name)  # only ours, by its name
        if code is None:
            proc.kill()
            proc.wait(10)
    text = log.read_text(errors="replace")
    assert code == 0, text[-3000:]
    assert '"msg": "became leader"' in text
    assert '"msg": "operator stopped"' in text
