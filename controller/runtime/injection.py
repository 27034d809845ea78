"""The reporting environment of an opted-in pod, added at admission: pure, no I/O.

docs/opt-in.md lists what a training container needs to report: the job's name, the
pod's namespace, name and node (downward API), and the reporter kind. The webhook
(``webhook.py``) calls ``review_response`` with the apiserver's AdmissionReview and sends
back a JSON patch that adds, to every container of a pod whose template carries
``pacekeeper.dev/detect: "true"``, each of these variables the container does not set
itself. It never changes a value: a name the container already has in ``env`` is left as
it is, and the job name is skipped when any variable the detector reads the job name
from is set. It never refuses a pod (``allowed`` is always true): it adds, nothing else.

The job's name is the value of the pod's job-name label, the outermost workload first (a
JobSet's pods carry both the JobSet's and their child Job's name; the report is the
JobSet's). Every label the controller matches a job's pods by is in the list, so the
report the pod writes is one the controller can bind to the pod's job. A pod without any
of them gets the downward-API fields only, and a warning: setting
``PACEKEEPER_REPORTER=kubernetes`` without a job name would fail the training script
at ``Detector.initialize``.

What the webhook cannot see: values a container takes from ``envFrom`` (a ConfigMap or
Secret it has no access to, on purpose). A variable in ``env`` wins over one from
``envFrom``, so a pod with ``envFrom`` gets a warning naming what was added; label the
pod template ``pacekeeper.dev/inject: "false"`` to keep the webhook off it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pacekeeper.controller.core.marks import DOMAIN
from pacekeeper.controller.sources.kubernetes import DETECT_ANNOTATION, JOB_LABEL
from pacekeeper.detector import env as detector_env

INJECT_LABEL = f"{DOMAIN}/inject"
"""``"false"`` on a pod (template) keeps the webhook off it. A label, not an annotation,
so the chart's objectSelector keeps such pods from reaching the webhook at all."""

JOB_NAME_PRECEDENCE: tuple[str, ...] = (
    JOB_LABEL,
    "trainer.kubeflow.org/trainjob-name",  # a TrainJob runs as a JobSet of Jobs
    "jobset.sigs.k8s.io/jobset-name",  # a JobSet's pods also carry their child Job's name
    "training.kubeflow.org/job-name",
    "volcano.sh/job-name",
    "ray.io/cluster",
    "batch.kubernetes.io/job-name",
    "job-name",  # the Job controller's label before 1.27
)
"""Where the job's name comes from, outermost workload first."""

REPORTER = "PACEKEEPER_REPORTER"
JOB_NAME_VARIABLES: tuple[str, ...] = (detector_env.JOB_NAME, "JOB_NAME", "PET_JOB_NAME",
                                       "JOBSET_NAME")  # fmt: skip
"""Every variable ``detector.env.job_name`` reads; any of them set means the user named
the job."""
DOWNWARD_API: tuple[tuple[str, str], ...] = (
    (detector_env.POD_NAMESPACE, "metadata.namespace"),
    (detector_env.POD_NAME, "metadata.name"),
    (detector_env.NODE_NAME, "spec.nodeName"),
)


@dataclass(frozen=True, slots=True)
class Injection:
    patch: tuple[dict[str, Any], ...]
    """RFC 6902 operations, empty when nothing is added."""
    added: tuple[tuple[str, tuple[str, ...]], ...]
    """(container, names added) for each container that got something."""
    job_name: str | None
    warnings: tuple[str, ...]


def _opted_in(pod: Mapping[str, Any]) -> bool:
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    return annotations.get(DETECT_ANNOTATION) == "true" and labels.get(INJECT_LABEL) != "false"


def job_name_of(labels: Mapping[str, str]) -> tuple[str, str] | None:
    """(label, job name) by ``JOB_NAME_PRECEDENCE``; None when the pod has none."""
    for label in JOB_NAME_PRECEDENCE:
        value = labels.get(label)
        if value:
            return label, value
    return None


def _wanted(job_name: str | None) -> list[tuple[str, dict[str, Any]]]:
    """(name, env entry) in the order they are added."""
    out: list[tuple[str, dict[str, Any]]] = []
    if job_name is not None:
        out.append((detector_env.JOB_NAME, {"name": detector_env.JOB_NAME, "value": job_name}))
    for name, field in DOWNWARD_API:
        ref = {"fieldRef": {"apiVersion": "v1", "fieldPath": field}}
        out.append((name, {"name": name, "valueFrom": ref}))
    return out


def _container_patch(
    index: int, container: Mapping[str, Any], job_name: str | None
) -> tuple[list[dict[str, Any]], list[str]]:
    env: Sequence[Mapping[str, Any]] = container.get("env") or []
    present = {str(e.get("name")) for e in env}
    user_named = bool(present & set(JOB_NAME_VARIABLES))
    wanted = _wanted(None if user_named else job_name)
    entries = [(name, entry) for name, entry in wanted if name not in present]
    if (job_name is not None or user_named) and REPORTER not in present:
        entries.append((REPORTER, {"name": REPORTER, "value": "kubernetes"}))
    if not entries:
        return [], []
    path = f"/spec/containers/{index}/env"
    ops: list[dict[str, Any]]
    if not container.get("env"):
        ops = [{"op": "add", "path": path, "value": [entry for _, entry in entries]}]
    else:
        ops = [{"op": "add", "path": f"{path}/-", "value": entry} for _, entry in entries]
    return ops, [name for name, _ in entries]


def inject(pod: Mapping[str, Any]) -> Injection:
    """What the webhook adds to ``pod`` (a Pod as the create request carries it)."""
    if not _opted_in(pod):
        return Injection((), (), None, ())
    labels = (pod.get("metadata") or {}).get("labels") or {}
    found = job_name_of(labels)
    job_name = found[1] if found else None
    warnings: list[str] = []
    if found is None:
        warnings.append(
            f"pacekeeper: no job-name label on this pod, so {detector_env.JOB_NAME} and "
            f"{REPORTER} were not added; label the pod template {JOB_LABEL}=<job name>"
        )
    patch: list[dict[str, Any]] = []
    added: list[tuple[str, tuple[str, ...]]] = []
    for index, container in enumerate((pod.get("spec") or {}).get("containers") or []):
        ops, names = _container_patch(index, container, job_name)
        if not ops:
            continue
        patch.extend(ops)
        name = str(container.get("name"))
        added.append((name, tuple(names)))
        if container.get("envFrom"):
            warnings.append(
                f"pacekeeper: container {name} also takes envFrom; {', '.join(names)} added "
                f"to its env win over the same names there ({INJECT_LABEL}=false opts out)"
            )
    return Injection(tuple(patch), tuple(added), job_name, tuple(warnings))


class AdmissionError(ValueError):
    """Not an AdmissionReview the webhook can answer; the message names the field."""


def review_response(review: Mapping[str, Any]) -> tuple[dict[str, Any], Injection]:
    """The AdmissionReview (admission.k8s.io/v1) answering ``review``, and what it adds."""
    if review.get("apiVersion") != "admission.k8s.io/v1" or review.get("kind") != (
        "AdmissionReview"
    ):
        raise AdmissionError(
            f"apiVersion/kind is {review.get('apiVersion')}/{review.get('kind')}, not "
            "admission.k8s.io/v1/AdmissionReview (admissionReviewVersions: [v1])"
        )
    request = review.get("request")
    if not isinstance(request, Mapping):
        raise AdmissionError("request is missing")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise AdmissionError("request.uid is missing")
    kind = request.get("kind") or {}
    injection = Injection((), (), None, ())
    is_pod = (kind.get("group"), kind.get("version"), kind.get("kind")) == ("", "v1", "Pod")
    pod = request.get("object")
    if is_pod and request.get("operation") == "CREATE" and isinstance(pod, Mapping):
        injection = inject(pod)
    response: dict[str, Any] = {"uid": uid, "allowed": True}
    if injection.patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(injection.patch).encode()).decode()
    if injection.warnings:
        response["warnings"] = list(injection.warnings)
    answer = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
    return answer, injection
