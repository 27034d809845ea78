"""A kubelet stand-in for the real-server tier: it runs pods' containers as local processes.

There is no container runtime here, and the journey test needs what a node gives a
chart: the pre-install hook Job's pod must run (Helm waits for it), and the controller's
Deployment must run under the chart's ServiceAccount. `ProcessKubelet` does for one node
what a kubelet does, through the API as a kubelet would:

- binds each unscheduled pod of the namespaces it serves to its node (there is no
  scheduler either) with the `pods/binding` subresource;
- for the namespaces it *runs*, starts every container as a local process in a mount
  namespace of its own (`unshare -m`), with the pod's volumes (ConfigMaps, Secrets, the
  ServiceAccount token volume the admission plugin added, emptyDirs) bind-mounted at
  their mount paths, the container's env with the downward API resolved, and
  `KUBERNETES_SERVICE_HOST/PORT` pointing at the API server, so the code under test
  configures itself in-cluster exactly as in a pod;
- reports status through `/status` (Running, then Succeeded or Failed with the exit code;
  `FallbackToLogsOnError` copies the log's tail into the termination message); restarts a
  container whose pod's restartPolicy says so; stops the process when the pod is deleted
  and then confirms the deletion (grace 0), as the kubelet does;
- for the namespaces it only *holds* (training pods whose work the test plays itself),
  marks the pod Running and Ready.

What it does not do: images (the command runs from this checkout's virtualenv, whose
`bin/` leads PATH), network namespaces (every pod shares loopback; ports must not
clash), users (processes run as the test's user), probes, `kubectl logs`/`exec`.
The processes run as root only because bind mounts need it; CI runs as root.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cluster import RealCluster

_POLL_S = 0.25
_TERMINATION_MESSAGE_BYTES = 2048
_RESTART_DELAY_S = 1.0
_STOP_GRACE_S = 10.0


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _field_path(pod: Mapping[str, Any], path: str) -> str:
    """A downward-API fieldRef, as the kubelet resolves it."""
    metadata = pod["metadata"]
    simple = {
        "metadata.name": metadata.get("name"),
        "metadata.namespace": metadata.get("namespace"),
        "metadata.uid": metadata.get("uid"),
        "spec.nodeName": pod["spec"].get("nodeName"),
        "spec.serviceAccountName": pod["spec"].get("serviceAccountName"),
        "status.podIP": "127.0.0.1",
        "status.hostIP": "127.0.0.1",
    }
    if path in simple:
        return str(simple[path] or "")
    for prefix, source in (("metadata.labels", "labels"), ("metadata.annotations", "annotations")):
        if path.startswith(prefix + "['") and path.endswith("']"):
            return str((metadata.get(source) or {}).get(path[len(prefix) + 2 : -2], ""))
    raise ValueError(f"fieldRef {path!r} is not supported by the kubelet stand-in")


@dataclass
class _Container:
    name: str
    argv: list[str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    exit_code: int | None = None
    restart_at: float | None = None
    started_at: str = ""
    finished_at: str = ""


@dataclass
class _Pod:
    namespace: str
    name: str
    uid: str
    restart_policy: str
    directory: Path
    containers: list[_Container] = field(default_factory=list)
    deleting: bool = False
    done: bool = False


class ProcessKubelet:
    """The kubelets of `nodes`; `start()` runs them on a thread, `close()` stops every process.

    Pods of the namespaces it runs go to the first node; pods it holds are spread over the
    nodes in turn (the scheduler's place here), so a job's pods land on distinct nodes.
    """

    def __init__(
        self,
        cluster: RealCluster,
        nodes: Sequence[str],
        directory: Path,
        *,
        run: Sequence[str],
        hold: Sequence[str] = (),
    ) -> None:
        self.cluster = cluster
        self.nodes = tuple(nodes)
        self._next_node = 0
        self.directory = directory
        self.run_namespaces = tuple(run)
        self.hold_namespaces = tuple(hold)
        self.errors: list[str] = []
        self._pods: dict[str, _Pod] = {}
        self._held: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="kubelet", daemon=True)
        self._port = cluster.base_url.rsplit(":", 1)[1]
        directory.mkdir(parents=True, exist_ok=True)

    # --- lifetime -----------------------------------------------------------------------

    def start(self) -> ProcessKubelet:
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(15)
        for pod in self._pods.values():
            for container in pod.containers:
                self._terminate(container)

    def logs(self, namespace: str, pod_prefix: str) -> str:
        """Every log of the pods whose name starts with `pod_prefix` (kubectl logs' stand-in)."""
        texts = []
        for pod in self._pods.values():
            if pod.namespace == namespace and pod.name.startswith(pod_prefix):
                for container in pod.containers:
                    with contextlib.suppress(OSError):
                        texts.append(container.log_path.read_text(errors="replace"))
        return "\n".join(texts)

    def exec(
        self, namespace: str, name: str, command: Sequence[str], timeout_s: float = 120.0
    ) -> subprocess.CompletedProcess[str]:
        """`kubectl exec` in the pod's first container: its volumes, env and ServiceAccount."""
        pod = json.loads(
            self._core().read_namespaced_pod(name, namespace, _preload_content=False).data
        )
        spec = pod["spec"]["containers"][0]
        directory = self.directory / f"{namespace}_{name}_exec"
        volumes = self._volumes(pod, directory)
        argv = self._argv(pod, {**spec, "command": list(command), "args": []}, volumes)
        return subprocess.run(
            argv, env=self._environment(pod, spec), capture_output=True, text=True,
            timeout=timeout_s, check=False, cwd=directory,
        )  # fmt: skip

    # --- the loop -----------------------------------------------------------------------

    def _core(self) -> Any:
        import kubernetes

        return kubernetes.client.CoreV1Api(self.cluster.admin)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._sync()
            except Exception as error:  # kept for the test's failure message
                self.errors.append(repr(error)[:500])
            self._stop.wait(_POLL_S)

    def _sync(self) -> None:
        core = self._core()
        seen: set[str] = set()
        for namespace in self.run_namespaces + self.hold_namespaces:
            pods = core.list_namespaced_pod(namespace, _preload_content=False)
            for pod in json.loads(pods.data)["items"]:
                uid = pod["metadata"]["uid"]
                seen.add(uid)
                node = pod["spec"].get("nodeName")
                if not node:
                    self._bind(pod, namespace in self.run_namespaces)
                    continue
                if node not in self.nodes:
                    continue
                if namespace in self.run_namespaces:
                    self._run(pod)
                elif pod["metadata"].get("deletionTimestamp"):
                    # Nothing of a held pod runs here: its deletion is confirmed at once.
                    self._confirm_deleted(pod)
                elif uid not in self._held:
                    self._hold(pod)
        for uid, pod in list(self._pods.items()):
            if uid not in seen and not pod.done:
                # Deleted outright (grace 0 or gone): stop what still runs.
                for container in pod.containers:
                    self._terminate(container)
                pod.done = True

    def _bind(self, pod: Mapping[str, Any], system: bool) -> None:
        if system:
            node = self.nodes[0]
        else:
            node = self.nodes[self._next_node % len(self.nodes)]
            self._next_node += 1
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod["metadata"]["name"]},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        with contextlib.suppress(Exception):  # a second binding answers 409: already bound
            self._core().create_namespaced_pod_binding(
                pod["metadata"]["name"], pod["metadata"]["namespace"], body,
                _preload_content=False,
            )  # fmt: skip

    def _hold(self, pod: Mapping[str, Any]) -> None:
        metadata = pod["metadata"]
        self._patch_status(metadata["namespace"], metadata["name"], {
            "phase": "Running", "startTime": _now(), "podIP": "127.0.0.1", "hostIP": "127.0.0.1",
            "conditions": [{"type": kind, "status": "True", "lastTransitionTime": _now()}
                           for kind in ("Initialized", "Ready", "ContainersReady", "PodScheduled")],
        })  # fmt: skip
        self._held.add(metadata["uid"])

    def _confirm_deleted(self, pod: Mapping[str, Any]) -> None:
        metadata = pod["metadata"]
        with contextlib.suppress(Exception):  # gone already
            self._core().delete_namespaced_pod(
                metadata["name"], metadata["namespace"], grace_period_seconds=0
            )

    def _patch_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        with contextlib.suppress(Exception):  # a pod deleted meanwhile: nothing to report
            self._core().patch_namespaced_pod_status(name, namespace, {"status": dict(status)})

    # --- running a pod ------------------------------------------------------------------

    def _run(self, pod: Mapping[str, Any]) -> None:
        metadata = pod["metadata"]
        uid = metadata["uid"]
        state = self._pods.get(uid)
        if state is None:
            state = self._start_pod(pod)
            self._pods[uid] = state
        if state.done:
            return
        if metadata.get("deletionTimestamp") and not state.deleting:
            state.deleting = True
            for container in state.containers:
                self._terminate(container)
        for container in state.containers:
            process = container.process
            if process is not None and process.poll() is not None:
                container.exit_code = process.returncode
                container.finished_at = _now()
                container.process = None
                if not state.deleting and self._restarts(state, container.exit_code):
                    # CrashLoopBackOff: 1 s, 2 s, 4 s ... at most a minute.
                    delay = min(_RESTART_DELAY_S * 2**container.restarts, 60.0)
                    container.restart_at = time.monotonic() + delay
            if container.restart_at is not None and time.monotonic() >= container.restart_at:
                container.restart_at = None
                container.restarts += 1
                self._launch(pod, state, container)
        running = any(c.process is not None or c.restart_at is not None for c in state.containers)
        if running:
            return
        if state.deleting:
            self._confirm_deleted(pod)
            state.done = True
            return
        self._report_finished(pod, state)
        state.done = True

    @staticmethod
    def _restarts(pod: _Pod, exit_code: int) -> bool:
        return pod.restart_policy == "Always" or (
            pod.restart_policy == "OnFailure" and exit_code != 0
        )

    def _start_pod(self, pod: Mapping[str, Any]) -> _Pod:
        metadata = pod["metadata"]
        directory = self.directory / f"{metadata['namespace']}_{metadata['name']}"
        directory.mkdir(parents=True, exist_ok=True)
        state = _Pod(
            metadata["namespace"], metadata["name"], metadata["uid"],
            pod["spec"].get("restartPolicy", "Always"), directory,
        )  # fmt: skip
        volumes = self._volumes(pod, directory)
        for spec in pod["spec"]["containers"]:
            argv = self._argv(pod, spec, volumes)
            container = _Container(spec["name"], argv, directory / f"{spec['name']}.log")
            state.containers.append(container)
            self._launch(pod, state, container)
        self._report_running(pod, state)
        return state

    def _volumes(self, pod: Mapping[str, Any], directory: Path) -> dict[str, Path]:
        """Each volume's content on disk, by volume name."""
        core = self._core()
        namespace = pod["metadata"]["namespace"]
        paths: dict[str, Path] = {}
        for volume in pod["spec"].get("volumes") or []:
            path = directory / "volumes" / volume["name"]
            path.mkdir(parents=True, exist_ok=True)
            if "configMap" in volume:
                source = volume["configMap"]
                data = core.read_namespaced_config_map(source["name"], namespace).data or {}
                self._write_items(path, data, source.get("items"))
            elif "secret" in volume:
                source = volume["secret"]
                stored = core.read_namespaced_secret(source["secretName"], namespace).data or {}
                data = {k: base64.b64decode(v).decode() for k, v in stored.items()}
                self._write_items(path, data, source.get("items"))
            elif "emptyDir" not in volume:
                raise ValueError(f"volume {volume['name']}: only configMap, secret, emptyDir")
            paths[volume["name"]] = path
        return paths

    @staticmethod
    def _write_items(path: Path, data: Mapping[str, str], items: Sequence[Any] | None) -> None:
        chosen = [(i["key"], i["path"]) for i in items] if items else [(k, k) for k in data]
        for key, relative in chosen:
            target = path / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(data[key])

    def _argv(
        self, pod: Mapping[str, Any], spec: Mapping[str, Any], volumes: Mapping[str, Path]
    ) -> list[str]:
        """`unshare -m` + bind mounts of the volumes at their mount paths + the command."""
        command = list(spec.get("command") or []) + list(spec.get("args") or [])
        if not command:
            raise ValueError(f"container {spec['name']}: the stand-in needs a command (no images)")
        mounts = []
        # There is no image: the command runs from this checkout and its virtualenv, and
        # reads the volumes' sources under self.directory. A volume over a folder holding
        # any of those (an emptyDir at /tmp, with the checkout in /tmp) would hide them, so
        # it is left out: the process then writes to the host's folder there.
        needed = [
            Path(p).resolve() for p in (sys.prefix, self.directory, Path(__file__).parents[2])
        ]
        for mount in spec.get("volumeMounts") or []:
            target = mount["mountPath"]
            if any(path.is_relative_to(Path(target).resolve()) for path in needed):
                continue
            # The mount point must exist to bind over it; a runtime makes it in the image.
            Path(target).mkdir(parents=True, exist_ok=True)
            source = shlex.quote(str(volumes[mount["name"]]))
            mounts.append(f"mount --bind {source} {shlex.quote(target)}")
        script = " && ".join([*mounts, 'exec "$@"'])
        return ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "pod", *command]

    def _environment(self, pod: Mapping[str, Any], spec: Mapping[str, Any]) -> dict[str, str]:
        env = {
            "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOSTNAME": pod["metadata"]["name"],
            "HOME": "/tmp",
            "KUBERNETES_SERVICE_HOST": "127.0.0.1",
            "KUBERNETES_SERVICE_PORT": self._port,
        }
        for entry in spec.get("env") or []:
            if "value" in entry:
                env[entry["name"]] = entry["value"]
            elif "fieldRef" in (entry.get("valueFrom") or {}):
                env[entry["name"]] = _field_path(pod, entry["valueFrom"]["fieldRef"]["fieldPath"])
            else:
                raise ValueError(f"env {entry['name']}: only value and fieldRef are supported")
        return env

    def _launch(self, pod: Mapping[str, Any], state: _Pod, container: _Container) -> None:
        spec = next(c for c in pod["spec"]["containers"] if c["name"] == container.name)
        log = container.log_path.open("ab")
        container.started_at = _now()
        container.process = subprocess.Popen(
            container.argv, env=self._environment(pod, spec), stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, cwd=state.directory, start_new_session=True,
        )  # fmt: skip
        log.close()

    def _terminate(self, container: _Container) -> None:
        process = container.process
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(_STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    # --- status -------------------------------------------------------------------------

    def _container_status(self, container: _Container, spec: Mapping[str, Any]) -> dict[str, Any]:
        base = {"name": container.name, "image": spec.get("image", ""), "imageID": "",
                "containerID": f"process://{container.name}",
                "restartCount": container.restarts}  # fmt: skip
        if container.exit_code is None:
            return {**base, "ready": True, "started": True,
                    "state": {"running": {"startedAt": container.started_at}}}  # fmt: skip
        terminated: dict[str, Any] = {
            "exitCode": container.exit_code,
            "reason": "Completed" if container.exit_code == 0 else "Error",
            "startedAt": container.started_at,
            "finishedAt": container.finished_at,
        }
        if (
            container.exit_code != 0
            and spec.get("terminationMessagePolicy") == "FallbackToLogsOnError"
        ):
            with contextlib.suppress(OSError):
                tail = container.log_path.read_bytes()[-_TERMINATION_MESSAGE_BYTES:]
                terminated["message"] = tail.decode(errors="replace")
        return {**base, "ready": False, "started": False, "state": {"terminated": terminated}}

    def _report_running(self, pod: Mapping[str, Any], state: _Pod) -> None:
        specs = {c["name"]: c for c in pod["spec"]["containers"]}
        self._patch_status(state.namespace, state.name, {
            "phase": "Running", "startTime": _now(), "podIP": "127.0.0.1", "hostIP": "127.0.0.1",
            "conditions": [{"type": kind, "status": "True", "lastTransitionTime": _now()}
                           for kind in ("Initialized", "Ready", "ContainersReady", "PodScheduled")],
            "containerStatuses": [self._container_status(c, specs[c.name])
                                  for c in state.containers],
        })  # fmt: skip

    def _report_finished(self, pod: Mapping[str, Any], state: _Pod) -> None:
        specs = {c["name"]: c for c in pod["spec"]["containers"]}
        failed = any(c.exit_code not in (0, None) for c in state.containers)
        self._patch_status(state.namespace, state.name, {
            "phase": "Failed" if failed else "Succeeded",
            "conditions": [{"type": kind, "status": "False", "lastTransitionTime": _now(),
                            "reason": "PodCompleted"} for kind in ("Ready", "ContainersReady")],
            "containerStatuses": [self._container_status(c, specs[c.name])
                                  for c in state.containers],
        })  # fmt: skip


def unshare_available() -> str | None:
    """None when bind mounts in a private mount namespace work here, else why not."""
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is not installed"
    probe = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", "mount -t tmpfs none /mnt"],
        capture_output=True, text=True, timeout=10, check=False,
    )  # fmt: skip
    if probe.returncode != 0:
        return f"no private mount namespace here: {probe.stderr.strip()[:200]}"
    return None
