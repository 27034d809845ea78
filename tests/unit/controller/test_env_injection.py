"""What the admission webhook adds to a pod, applied as the apiserver applies a JSON patch."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pacekeeper.controller.runtime.injection import (
    INJECT_LABEL,
    JOB_NAME_PRECEDENCE,
    JOB_NAME_VARIABLES,
    AdmissionError,
    inject,
    review_response,
)
from pacekeeper.controller.sources.kubernetes import JOB_NAME_LABELS
from pacekeeper.detector import env as detector_env
from pacekeeper.detector.reporters.options import ReporterKind, ReporterOptions

DETECT = {"pacekeeper.dev/detect": "true"}
ALL_ADDED = ["PACEKEEPER_JOB_NAME", "POD_NAMESPACE", "POD_NAME", "NODE_NAME", "PACEKEEPER_REPORTER"]


def pod(
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    containers: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "llama-0-",
            "labels": {"batch.kubernetes.io/job-name": "llama", **(labels or {})},
            "annotations": DETECT if annotations is None else annotations,
        },
        "spec": {
            "initContainers": [{"name": "fetch", "image": "busybox"}],
            "containers": containers or [{"name": "trainer", "image": "train:1"}],
        },
    }


def apply_patch(obj: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902 ``add``, the only operation the webhook sends (anything else fails here)."""
    out = copy.deepcopy(obj)
    for op in ops:
        assert op["op"] == "add", op
        *parents, last = op["path"].lstrip("/").split("/")
        target: Any = out
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if last == "-":
            target.append(copy.deepcopy(op["value"]))
        else:
            # RFC 6902 add replaces an existing member: only ever an empty one here.
            assert not target.get(last), f"add over a non-empty {op['path']}"
            target[last] = copy.deepcopy(op["value"])
    return out


def patched(obj: dict[str, Any]) -> dict[str, Any]:
    return apply_patch(obj, list(inject(obj).patch))


def env_of(obj: dict[str, Any], container: int = 0) -> dict[str, Any]:
    entries = obj["spec"]["containers"][container].get("env") or []
    names = [e["name"] for e in entries]
    assert len(names) == len(set(names)), f"a name twice: {names}"
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in entries}


def resolved(obj: dict[str, Any], container: int = 0) -> dict[str, str]:
    """The container's env as the kubelet would resolve it on node n7 in team-a."""
    fields = {"metadata.namespace": "team-a", "metadata.name": "llama-0-x2x7q",
              "spec.nodeName": "n7"}  # fmt: skip
    out = {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}
    for name, value in env_of(obj, container).items():
        out[name] = value if isinstance(value, str) else fields[value["fieldRef"]["fieldPath"]]
    return out


def test_an_opted_in_pod_gets_everything_the_reporter_reads() -> None:
    env = env_of(patched(pod()))
    assert list(env) == ALL_ADDED
    assert env["PACEKEEPER_JOB_NAME"] == "llama"
    assert env["PACEKEEPER_REPORTER"] == "kubernetes"
    assert env["NODE_NAME"] == {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}


def test_the_detector_and_reporter_find_the_job_pod_and_node_from_what_was_added() -> None:
    env = resolved(patched(pod()))
    options = ReporterOptions.resolve(env=env)
    assert options.effective_kind(env) is ReporterKind.KUBERNETES
    assert options.stragglerreport() == ("team-a", "llama")
    assert detector_env.pod_name(env) == "llama-0-x2x7q"
    assert detector_env.node_name(env) == "n7"


def test_a_users_own_values_are_kept_and_never_duplicated() -> None:
    own = [
        {"name": "POD_NAME", "value": "mine"},
        {"name": "PACEKEEPER_REPORTER", "value": "ray"},
        {"name": "NCCL_DEBUG", "value": "WARN"},
    ]
    after = patched(pod(containers=[{"name": "trainer", "image": "t", "env": own}]))
    assert after["spec"]["containers"][0]["env"][:3] == own  # untouched, in place
    env = env_of(after)
    assert (env["POD_NAME"], env["PACEKEEPER_REPORTER"]) == ("mine", "ray")
    assert list(env)[3:] == ["PACEKEEPER_JOB_NAME", "POD_NAMESPACE", "NODE_NAME"]


@pytest.mark.parametrize("variable", JOB_NAME_VARIABLES)
def test_a_job_name_the_user_set_any_way_the_detector_reads_is_not_overridden(
    variable: str,
) -> None:
    own = [{"name": variable, "value": "their-name"}]
    after = patched(pod(containers=[{"name": "trainer", "image": "t", "env": own}]))
    env = resolved(after)
    assert detector_env.job_name(env) == "their-name"  # the detector reads this one
    assert "PACEKEEPER_JOB_NAME" not in env or variable == "PACEKEEPER_JOB_NAME"
    assert env["PACEKEEPER_REPORTER"] == "kubernetes"


@pytest.mark.parametrize(
    ("labels", "annotations"),
    [
        ({}, {}),
        ({}, {"pacekeeper.dev/detect": "false"}),
        ({}, {"pacekeeper.dev/detect": "True"}),
        ({INJECT_LABEL: "false"}, {"pacekeeper.dev/detect": "true"}),
    ],
)
def test_a_pod_not_opted_in_or_opted_out_is_left_alone(
    labels: dict[str, str], annotations: dict[str, str]
) -> None:
    assert inject(pod(labels=labels, annotations=annotations)).patch == ()


def test_the_outermost_workload_names_the_job() -> None:
    jobset = {
        "jobset.sigs.k8s.io/jobset-name": "llama",
        "batch.kubernetes.io/job-name": "llama-w-0",
    }
    assert env_of(patched(pod(labels=jobset)))["PACEKEEPER_JOB_NAME"] == "llama"
    explicit = {**jobset, "pacekeeper.dev/job": "llama-report"}
    assert env_of(patched(pod(labels=explicit)))["PACEKEEPER_JOB_NAME"] == "llama-report"


def test_every_label_the_controller_binds_pods_by_can_name_the_job() -> None:
    assert set(JOB_NAME_LABELS) == set(JOB_NAME_PRECEDENCE)


def test_without_a_job_name_label_only_the_downward_api_is_added_with_a_warning() -> None:
    bare = pod()
    bare["metadata"]["labels"] = {"app": "train"}
    injection = inject(bare)
    assert list(env_of(apply_patch(bare, list(injection.patch)))) == [
        "POD_NAMESPACE", "POD_NAME", "NODE_NAME"
    ]  # fmt: skip
    (warning,) = injection.warnings
    assert "pacekeeper.dev/job" in warning and len(warning) < 256


def test_every_container_gets_it_and_init_containers_do_not() -> None:
    two = pod(containers=[{"name": "trainer", "image": "t"}, {"name": "sidecar", "image": "s"}])
    after = patched(two)
    assert list(env_of(after, 0)) == list(env_of(after, 1)) == ALL_ADDED
    assert "env" not in after["spec"]["initContainers"][0]
    assert [c for c, _ in inject(two).added] == ["trainer", "sidecar"]


def test_env_from_gets_a_warning_naming_what_was_added() -> None:
    with_from = pod(containers=[{"name": "trainer", "image": "t",
                                 "envFrom": [{"configMapRef": {"name": "settings"}}]}])  # fmt: skip
    (warning,) = inject(with_from).warnings
    assert "trainer" in warning and "PACEKEEPER_JOB_NAME" in warning and INJECT_LABEL in warning


def test_injecting_twice_adds_nothing_the_second_time() -> None:
    once = patched(pod())
    assert inject(once).patch == ()


env_entries = st.lists(
    st.fixed_dictionaries(
        {"name": st.sampled_from([*ALL_ADDED, *JOB_NAME_VARIABLES, "OTHER"]),
         "value": st.text(max_size=5)}
    ),
    max_size=6,
    unique_by=lambda e: e["name"],
)  # fmt: skip


@given(env=env_entries)
def test_no_value_a_container_sets_ever_changes(env: list[dict[str, str]]) -> None:
    before = pod(containers=[{"name": "trainer", "image": "t", "env": env}])
    after = patched(before)
    assert after["spec"]["containers"][0].get("env", [])[: len(env)] == env
    names = [e["name"] for e in after["spec"]["containers"][0].get("env", [])]
    assert len(names) == len(set(names))
    assert {*ALL_ADDED[1:4]} <= set(names)


def review(obj: Any, *, operation: str = "CREATE", kind: str = "Pod") -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "", "version": "v1", "kind": kind},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "team-a",
            "operation": operation,
            "object": obj,
        },
    }


def test_the_review_answer_carries_the_uid_and_a_base64_json_patch() -> None:
    answer, injection = review_response(review(pod()))
    response = answer["response"]
    assert (answer["apiVersion"], answer["kind"]) == ("admission.k8s.io/v1", "AdmissionReview")
    assert response["uid"] == "705ab4f5-6393-11e8-b7cc-42010a800002"
    assert response["allowed"] is True and response["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(response["patch"])) == list(injection.patch)


@pytest.mark.parametrize(
    "request_review",
    [
        review(pod(annotations={})),
        review(pod(), operation="UPDATE"),
        review(pod(), kind="Service"),
        review(None),
    ],
)
def test_anything_else_is_allowed_unchanged(request_review: dict[str, Any]) -> None:
    answer, _ = review_response(request_review)
    assert answer["response"] == {"uid": request_review["request"]["uid"], "allowed": True}


@pytest.mark.parametrize(
    ("broken", "field"),
    [
        ({"apiVersion": "admission.k8s.io/v1beta1"}, "apiVersion"),
        ({"request": None}, "request"),
        ({"request": {"kind": {"kind": "Pod"}}}, "request.uid"),
    ],
)
def test_a_malformed_review_is_refused_naming_the_field(broken: dict[str, Any], field: str) -> None:
    with pytest.raises(AdmissionError, match=field):
        review_response({**review(pod()), **broken})
