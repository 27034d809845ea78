"""docs/opt-in.md: every example is complete, valid YAML that opts its pods in."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import kubernetes_validate
import pytest
import yaml
from chart_render import KUBE_VERSION, REPO

DOC = REPO / "docs" / "opt-in.md"
REPORTING_ENV = {"PACEKEEPER_JOB_NAME", "POD_NAMESPACE", "POD_NAME", "NODE_NAME"}
DOWNWARD_API = {
    "POD_NAMESPACE": "metadata.namespace",
    "POD_NAME": "metadata.name",
    "NODE_NAME": "spec.nodeName",
}
BUILTIN_API_GROUPS = ("v1", "batch/v1", "rbac.authorization.k8s.io/v1")


def yaml_blocks() -> list[list[dict[str, Any]]]:
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), flags=re.S)
    return [[d for d in yaml.safe_load_all(block) if d] for block in blocks]


def objects() -> list[dict[str, Any]]:
    return [d for block in yaml_blocks() for d in block if "kind" in d]


def pod_templates(obj: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, template) for each pod template a framework object holds. TrainJob's
    override carries only part of a template (metadata and a partial spec)."""
    spec = obj["spec"]
    match (obj["apiVersion"], obj["kind"]):
        case ("batch/v1", "Job"):
            yield "template", spec["template"]
        case ("kubeflow.org/v1", "PyTorchJob"):
            for role, replica in spec["pytorchReplicaSpecs"].items():
                yield role, replica["template"]
        case ("trainer.kubeflow.org/v1alpha1", "TrainJob"):
            for i, override in enumerate(spec["podTemplateOverrides"]):
                yield f"podTemplateOverrides[{i}]", {"metadata": override["metadata"]}
        case ("jobset.x-k8s.io/v1alpha2", "JobSet"):
            for rjob in spec["replicatedJobs"]:
                yield rjob["name"], rjob["template"]["spec"]["template"]
        case ("batch.volcano.sh/v1alpha1", "Job"):
            for task in spec["tasks"]:
                yield task["name"], task["template"]
        case ("ray.io/v1", "RayJob"):
            cluster = spec["rayClusterSpec"]
            yield "head", cluster["headGroupSpec"]["template"]
            for group in cluster["workerGroupSpecs"]:
                yield group["groupName"], group["template"]
        case other:
            raise AssertionError(f"no pod template locator for {other}")


def containers_env(obj: dict[str, Any]) -> Iterator[list[dict[str, Any]]]:
    if obj["kind"] == "TrainJob":
        yield obj["spec"]["trainer"]["env"]
        return
    for _, template in pod_templates(obj):
        for container in template["spec"]["containers"]:
            yield container.get("env", [])


FRAMEWORKS = [o for o in objects() if o["kind"] not in ("Service", "Role", "RoleBinding")]


def test_every_framework_architecture_names_has_an_example() -> None:
    assert sorted((o["apiVersion"], o["kind"]) for o in FRAMEWORKS) == [
        ("batch.volcano.sh/v1alpha1", "Job"),
        ("batch/v1", "Job"),
        ("jobset.x-k8s.io/v1alpha2", "JobSet"),
        ("kubeflow.org/v1", "PyTorchJob"),
        ("ray.io/v1", "RayJob"),
        ("trainer.kubeflow.org/v1alpha1", "TrainJob"),
    ]


def test_builtin_objects_validate_against_kubernetes_schemas() -> None:
    builtin = [o for o in objects() if o["apiVersion"] in BUILTIN_API_GROUPS]
    assert {o["kind"] for o in builtin} >= {"Job", "Service", "Role", "RoleBinding"}
    for obj in builtin:
        kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)


@pytest.mark.parametrize("obj", FRAMEWORKS, ids=lambda o: f"{o['apiVersion']}-{o['kind']}")
def test_pod_templates_are_valid_and_opted_in(obj: dict[str, Any]) -> None:
    templates = list(pod_templates(obj))
    assert templates
    for where, template in templates:
        annotations = template["metadata"]["annotations"]
        assert annotations["pacekeeper.dev/detect"] == "true", where
        assert annotations.get("pacekeeper.dev/mode", "observe") in (
            "observe",
            "dry-run",
            "enforce",
        )
        if "spec" in template:  # full templates: strict Kubernetes schema
            wrapped = {
                "apiVersion": "v1",
                "kind": "PodTemplate",
                "metadata": {"name": f"{obj['metadata']['name']}-{where}".lower()},
                "template": template,
            }
            kubernetes_validate.validate(wrapped, KUBE_VERSION, strict=True)


@pytest.mark.parametrize("obj", FRAMEWORKS, ids=lambda o: f"{o['apiVersion']}-{o['kind']}")
def test_every_training_container_gets_the_reporting_environment(obj: dict[str, Any]) -> None:
    envs = list(containers_env(obj))
    assert envs
    for env in envs:
        by_name = {e["name"]: e for e in env}
        assert set(by_name) >= REPORTING_ENV
        assert by_name["PACEKEEPER_JOB_NAME"]["value"] == obj["metadata"]["name"]
        for name, field in DOWNWARD_API.items():
            assert by_name[name]["valueFrom"]["fieldRef"]["fieldPath"] == field


def test_the_webhook_adds_exactly_the_documented_environment() -> None:
    from pacekeeper.controller.runtime.injection import inject

    (job,) = [o for o in FRAMEWORKS if (o["apiVersion"], o["kind"]) == ("batch/v1", "Job")]
    template = job["spec"]["template"]
    (documented,) = [c["env"] for c in template["spec"]["containers"]]
    bare = {
        "metadata": {**template["metadata"],
                     # What the Job controller labels each pod with.
                     "labels": {"batch.kubernetes.io/job-name": job["metadata"]["name"]}},
        "spec": {**template["spec"], "containers": [
            {k: v for k, v in c.items() if k != "env"} for c in template["spec"]["containers"]
        ]},
    }  # fmt: skip
    (op,) = inject(bare).patch
    assert op["path"] == "/spec/containers/0/env"
    added = {e["name"]: e for e in op["value"]}
    for entry in documented:
        want = dict(entry)
        got = added.pop(entry["name"])
        if "valueFrom" in want:
            got = {**got, "valueFrom": {"fieldRef": {
                "fieldPath": got["valueFrom"]["fieldRef"]["fieldPath"]}}}  # fmt: skip
        assert got == want
    assert added == {}
