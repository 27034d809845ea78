"""The env-injection webhook called by a real kube-apiserver (MutatingAdmissionWebhook,
on by default in 1.20).

`pacekeeper webhook serve` runs as the chart's webhook Deployment runs it (its rendered
command, the TLS Secret's files where it mounts them: a certificate for 127.0.0.1 from a
throwaway CA), on loopback. The chart's rendered MutatingWebhookConfiguration is registered
as it is (rules, failurePolicy, timeout, namespace and object selectors) but for its
clientConfig, which points at that URL with that CA as caBundle: there is no Service to
route through here. Pods are then created through the API, by the admin and by the real
Job controller, and the stored pods are read back.
"""

from __future__ import annotations

import base64
import copy
import shutil
import ssl
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from binaries import KUBE_VERSION
from cluster import RealCluster
from e2e_chart import chart_render
from e2e_jobs import ensure_service_account, job_manifest, pod_manifest
from pki import make_pki
from processes import ServerProcess, free_loopback_ports, wait_until

pytestmark = pytest.mark.slow

ACCOUNT = "trainer"
FIELD = {
    "POD_NAMESPACE": "metadata.namespace",
    "POD_NAME": "metadata.name",
    "NODE_NAME": "spec.nodeName",
}


@dataclass
class Webhook:
    process: ServerProcess
    url: str
    configuration: str

    def injected_into(self) -> str:
        return self.process.log_path.read_text(errors="replace")


def rendered() -> tuple[dict[str, Any], dict[str, Any]]:
    """The chart's webhook container and MutatingWebhookConfiguration (webhook.enabled)."""
    objects = chart_render().render({"webhook": {"enabled": True}}, kube_version=KUBE_VERSION)
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"
                     and o["metadata"]["name"].endswith("-webhook")]  # fmt: skip
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    (config,) = [o for o in objects if o["kind"] == "MutatingWebhookConfiguration"]
    return container, config


def start_webhook(directory: Path) -> tuple[ServerProcess, str, bytes]:
    """The rendered webhook command on a loopback port; (process, URL, CA PEM)."""
    container, _ = rendered()
    pki = make_pki(directory / "pki")
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "tls"]
    tls_dir = directory / "tls"
    tls_dir.mkdir()
    shutil.copy(pki.serving_cert, tls_dir / "tls.crt")
    shutil.copy(pki.serving_key, tls_dir / "tls.key")
    argv = [str(a).replace(mount["mountPath"], str(tls_dir)) for a in container["command"]]
    assert argv[:3] == ["pacekeeper", "webhook", "serve"], argv
    argv[0] = str(Path(sys.executable).with_name("pacekeeper"))
    (port,) = free_loopback_ports(1)
    argv[argv.index("--port") + 1] = str(port)
    argv += ["--host", "127.0.0.1"]  # the pod's 0.0.0.0 is this machine's here
    env = {"PATH": "/usr/bin:/bin", "HOME": str(directory), "PYTHONUNBUFFERED": "1",
           **{e["name"]: e["value"] for e in container["env"]}}  # fmt: skip
    process = ServerProcess("webhook", argv, directory / "webhook.log", env)
    trust = ssl.create_default_context(cafile=str(pki.ca_cert))
    base = f"https://127.0.0.1:{port}"
    wait_until(
        lambda: urllib.request.urlopen(f"{base}/healthz", context=trust, timeout=2).status == 200,
        timeout_s=30,
        what="the webhook serves /healthz",
        watched=[process],
    )
    return process, f"{base}/mutate-pods", pki.ca_cert.read_bytes()


def register(cluster: RealCluster, url: str, ca_pem: bytes, name: str) -> dict[str, Any]:
    _, config = rendered()
    config = copy.deepcopy(config)
    config["metadata"]["name"] = name
    (entry,) = config["webhooks"]
    entry["clientConfig"] = {"url": url, "caBundle": base64.b64encode(ca_pem).decode()}
    (stored,) = cluster.apply(config)
    return stored


def opted_in_pod(namespace: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {"batch.kubernetes.io/job-name": "probe"},
                     "annotations": {"pacekeeper.dev/detect": "true"}},
        "spec": {"serviceAccountName": ACCOUNT, "automountServiceAccountToken": False,
                 "containers": [{"name": "trainer", "image": "trainer:1"}]},
    }  # fmt: skip


def env_of(pod: Any) -> dict[str, Any]:
    out = {}
    for e in pod.spec.containers[0].env or []:
        if e.value_from is not None:
            out[e.name] = ("fieldRef", e.value_from.field_ref.field_path)
        else:
            out[e.name] = e.value
    return out


@pytest.fixture
def webhook(real_cluster: RealCluster, real_namespace: str, tmp_path: Path) -> Iterator[Webhook]:
    import kubernetes

    ensure_service_account(real_cluster, real_namespace, ACCOUNT)
    process, url, ca_pem = start_webhook(tmp_path)
    name = f"{real_namespace}-env-injection"
    core: Any = kubernetes.client.CoreV1Api(real_cluster.admin)
    admission: Any = kubernetes.client.AdmissionregistrationV1Api(real_cluster.admin)
    try:
        register(real_cluster, url, ca_pem, name)

        def active() -> bool:  # the apiserver picks a new configuration up shortly
            probe = opted_in_pod(real_namespace, "probe")
            made = core.create_namespaced_pod(real_namespace, probe, dry_run="All")
            return "PACEKEEPER_JOB_NAME" in env_of(made)

        wait_until(active, timeout_s=30, what="the apiserver calls the webhook")
        yield Webhook(process, url, name)
    finally:
        admission.delete_mutating_webhook_configuration(name)
        process.stop()


def test_a_pod_the_job_controller_makes_for_an_opted_in_job_gets_the_env(
    real_cluster: RealCluster, real_namespace: str, webhook: Webhook
) -> None:
    import kubernetes

    manifest = job_manifest("llama", 1)
    manifest["metadata"]["namespace"] = real_namespace
    template = manifest["spec"]["template"]["spec"]
    template["serviceAccountName"] = ACCOUNT  # exists: the Job controller makes the pod
    real_cluster.apply(manifest)
    core: Any = kubernetes.client.CoreV1Api(real_cluster.admin)
    pods: list[Any] = []

    def made() -> bool:
        pods[:] = core.list_namespaced_pod(real_namespace, label_selector="job-name=llama").items
        return bool(pods)

    wait_until(made, timeout_s=30, what="the Job controller creates the job's pod")
    (pod,) = pods
    assert env_of(pod) == {
        "PACEKEEPER_JOB_NAME": "llama",
        **{name: ("fieldRef", path) for name, path in FIELD.items()},
        "PACEKEEPER_REPORTER": "kubernetes",
    }
    # The pod has no name yet when the webhook sees it: its generateName is logged as such.
    assert f'"generateName": "{pod.metadata.generate_name}"' in webhook.injected_into()


def test_a_pod_created_through_the_api_gets_it_and_a_users_own_values_are_kept(
    real_cluster: RealCluster, real_namespace: str, webhook: Webhook
) -> None:
    import kubernetes

    manifest = job_manifest("gpt", 2)  # its own template's account never exists
    manifest["metadata"]["namespace"] = real_namespace
    (job,) = real_cluster.apply(manifest)
    core: Any = kubernetes.client.CoreV1Api(real_cluster.admin)
    pod = pod_manifest(job, "gpt-0-abcde", 0, "n1", ACCOUNT)
    pod["spec"]["containers"][0]["env"] = [
        {"name": "POD_NAME", "value": "mine"},
        {"name": "PACEKEEPER_REPORTER", "value": "ray"},
    ]
    core.create_namespaced_pod(real_namespace, pod)
    stored = core.read_namespaced_pod("gpt-0-abcde", real_namespace)  # what etcd holds
    assert env_of(stored) == {
        "POD_NAME": "mine",
        "PACEKEEPER_REPORTER": "ray",
        "PACEKEEPER_JOB_NAME": "gpt",
        "POD_NAMESPACE": ("fieldRef", "metadata.namespace"),
        "NODE_NAME": ("fieldRef", "spec.nodeName"),
    }


def test_pods_not_opted_in_or_opted_out_are_left_alone(
    real_cluster: RealCluster, real_namespace: str, webhook: Webhook
) -> None:
    import kubernetes

    core: Any = kubernetes.client.CoreV1Api(real_cluster.admin)
    plain = opted_in_pod(real_namespace, "plain")
    del plain["metadata"]["annotations"]
    opted_out = opted_in_pod(real_namespace, "opted-out")
    opted_out["metadata"]["labels"]["pacekeeper.dev/inject"] = "false"
    for pod in (plain, opted_out):
        core.create_namespaced_pod(real_namespace, pod)
        stored = core.read_namespaced_pod(pod["metadata"]["name"], real_namespace)
        assert env_of(stored) == {}, pod["metadata"]["name"]
    # The objectSelector kept the opted-out pod from reaching the webhook at all.
    assert '"pod": "opted-out"' not in webhook.injected_into()


def test_a_webhook_that_is_down_does_not_block_training_pods(
    real_cluster: RealCluster, real_namespace: str, webhook: Webhook
) -> None:
    import kubernetes

    webhook.process.stop()
    core: Any = kubernetes.client.CoreV1Api(real_cluster.admin)
    started = time.monotonic()
    core.create_namespaced_pod(real_namespace, opted_in_pod(real_namespace, "while-down"))
    took_s = time.monotonic() - started
    stored = core.read_namespaced_pod("while-down", real_namespace)
    assert env_of(stored) == {}  # failurePolicy Ignore: created, unchanged
    _, config = rendered()
    assert took_s < config["webhooks"][0]["timeoutSeconds"]
