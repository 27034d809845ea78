"""Malformed AdmissionReviews get a 400 that names what is wrong, never a 500 (issue 40).

Anyone who can reach the webhook's Service can post to it, so every body below is one a
client could send; the apiserver's failurePolicy decides what a 400 means for the pod."""

from __future__ import annotations

import copy
import io
import json
from typing import Any
from wsgiref.util import setup_testing_defaults

import pytest

from pacekeeper.controller.runtime.webhook import (
    MAX_REVIEW_BYTES,
    MAX_REVIEW_DEPTH,
    nesting_depth_exceeds,
    webhook_app,
)


def good_review() -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "namespace": "team-a",
            "operation": "CREATE",
            "object": {
                "metadata": {"generateName": "llama-",
                             "labels": {"batch.kubernetes.io/job-name": "llama"},
                             "annotations": {"pacekeeper.dev/detect": "true"}},
                "spec": {"containers": [{"name": "trainer", "image": "t",
                                         "env": [{"name": "A", "value": "1"}]}]},
            },
        },
    }  # fmt: skip


def post(body: bytes) -> tuple[int, bytes]:
    environ: dict[str, Any] = {"PATH_INFO": "/mutate-pods", "REQUEST_METHOD": "POST"}
    setup_testing_defaults(environ)
    environ["wsgi.input"] = io.BytesIO(body)
    environ["CONTENT_LENGTH"] = str(len(body))
    statuses: list[int] = []
    data = b"".join(webhook_app()(environ, lambda s, h: statuses.append(int(s.split()[0]))))
    return statuses[0], data


def with_field(path: str, value: Any) -> bytes:
    """The good review with the field at dotted ``path`` (``[i]`` indexes) set to ``value``."""
    review = good_review()
    node: Any = review
    steps = path.replace("[", ".[").split(".")
    for step in steps[:-1]:
        node = node[int(step[1:-1])] if step.startswith("[") else node[step]
    last = steps[-1]
    if last.startswith("["):
        node[int(last[1:-1])] = value
    else:
        node[last] = value
    return json.dumps(review).encode()


def deep(levels: int, inside: str = "") -> bytes:
    """A review whose pod annotations nest ``levels`` arrays deep."""
    review = good_review()
    review["request"]["object"]["metadata"]["annotations"] = "@"
    text = json.dumps(review)
    return text.replace('"@"', "[" * levels + inside + "]" * levels).encode()


MALFORMED: list[tuple[str, bytes, str]] = [
    ("body is a string", b'"review"', "the body is a string, not an object"),
    ("body is null", b"null", "the body is null, not an object"),
    ("request is a list", with_field("request", []), "request is an array, not an object"),
    ("request is a string", with_field("request", "x"), "request is a string, not an object"),
    ("request is null", with_field("request", None), "request is null, not an object"),
    ("uid is a number", with_field("request.uid", 7), "request.uid is a number"),
    ("name is an object", with_field("request.name", {}), "request.name is an object"),
    ("operation is a list", with_field("request.operation", ["CREATE"]), "request.operation"),
    ("kind is a string", with_field("request.kind", "Pod"), "request.kind is a string"),
    ("object is a list", with_field("request.object", []), "request.object is an array"),
    ("object is a string", with_field("request.object", "pod"), "request.object is a string"),
    ("object is a number", with_field("request.object", 3), "request.object is a number"),
    ("object missing", with_field("request.object", None), "request.object is missing"),
    ("metadata is a list", with_field("request.object.metadata", [1]),
     "request.object.metadata is an array, not an object"),
    ("metadata is a string", with_field("request.object.metadata", "m"),
     "request.object.metadata is a string"),
    ("generateName is a number", with_field("request.object.metadata.generateName", 1),
     "request.object.metadata.generateName is a number"),
    ("annotations is a list", with_field("request.object.metadata.annotations", ["x"]),
     "request.object.metadata.annotations is an array, not an object"),
    ("annotations is a string", with_field("request.object.metadata.annotations", "a=b"),
     "request.object.metadata.annotations is a string"),
    ("annotation value is a bool",
     with_field("request.object.metadata.annotations", {"pacekeeper.dev/detect": True}),
     "request.object.metadata.annotations['pacekeeper.dev/detect'] is a boolean"),
    ("labels is a list", with_field("request.object.metadata.labels", []),
     "request.object.metadata.labels is an array"),
    ("label value is an object",
     with_field("request.object.metadata.labels", {"batch.kubernetes.io/job-name": {}}),
     "request.object.metadata.labels['batch.kubernetes.io/job-name'] is an object"),
    ("spec is a list", with_field("request.object.spec", []), "request.object.spec is an array"),
    ("containers is a string", with_field("request.object.spec.containers", "abc"),
     "request.object.spec.containers is a string, not an array"),
    ("containers is an object", with_field("request.object.spec.containers", {"a": {}}),
     "request.object.spec.containers is an object, not an array"),
    ("a container is a string", with_field("request.object.spec.containers[0]", "trainer"),
     "request.object.spec.containers[0] is a string, not an object"),
    ("container name is a number", with_field("request.object.spec.containers[0].name", 1),
     "request.object.spec.containers[0].name is a number"),
    ("env is an object", with_field("request.object.spec.containers[0].env", {"A": "1"}),
     "request.object.spec.containers[0].env is an object, not an array"),
    ("env is a string", with_field("request.object.spec.containers[0].env", "A=1"),
     "request.object.spec.containers[0].env is a string"),
    ("env entry is a string", with_field("request.object.spec.containers[0].env[0]", "A"),
     "request.object.spec.containers[0].env[0] is a string, not an object"),
    ("env name is a list",
     with_field("request.object.spec.containers[0].env[0]", {"name": ["A"]}),
     "request.object.spec.containers[0].env[0].name is an array, not a string"),
    ("envFrom is a string", with_field("request.object.spec.containers[0].envFrom", "cm"),
     "request.object.spec.containers[0].envFrom is a string"),
    ("200,000-deep arrays", deep(200_000), f"deeper than {MAX_REVIEW_DEPTH}"),
    ("200,000-deep objects", b'{"a":' * 200_000 + b"1" + b"}" * 200_000,
     f"deeper than {MAX_REVIEW_DEPTH}"),
    ("unbalanced deep", b"[" * 200_000, f"deeper than {MAX_REVIEW_DEPTH}"),
    ("bad UTF-8", b'{"request": "\xff"}', "not an AdmissionReview"),
    ("a 5,000-digit integer", b'{"a": ' + b"9" * 5000 + b"}", "not an AdmissionReview"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("body", "message"), [(b, m) for _, b, m in MALFORMED], ids=[i for i, _, _ in MALFORMED]
)
def test_every_malformed_review_is_a_400_naming_what_is_wrong(body: bytes, message: str) -> None:
    status, data = post(body)
    assert status == 400
    assert message in data.decode()


def test_a_well_formed_review_still_gets_its_patch() -> None:
    status, data = post(json.dumps(good_review()).encode())
    assert status == 200
    response = json.loads(data)["response"]
    assert response["allowed"] is True and response["patchType"] == "JSONPatch"


def test_null_optional_fields_are_not_malformed() -> None:
    review = good_review()
    review["request"]["object"]["metadata"]["labels"] = None
    review["request"]["object"]["spec"]["containers"][0]["env"] = None
    status, _ = post(json.dumps(review).encode())
    assert status == 200


def test_a_review_of_something_else_than_a_pod_is_not_read_as_one() -> None:
    review = good_review()
    review["request"]["kind"] = {"group": "apps", "version": "v1", "kind": "Deployment"}
    review["request"]["object"]["spec"] = {"containers": "not a pod's"}
    status, data = post(json.dumps(review).encode())
    assert status == 200 and "patch" not in json.loads(data)["response"]


def test_brackets_inside_strings_are_text_not_nesting() -> None:
    # An annotation value may hold JSON of its own (kubectl's last-applied does).
    inner = '"' + "[{" * 10_000 + '\\"]' + "}]" * 10_000 + '"'
    status, _ = post(deep(3, "").replace(b"[[[]]]", b'{"x": ' + inner.encode() + b"}"))
    assert status == 200


def test_nesting_at_the_cap_is_read_and_one_more_is_not() -> None:
    at_cap = b"[" * MAX_REVIEW_DEPTH + b"]" * MAX_REVIEW_DEPTH
    assert not nesting_depth_exceeds(at_cap, MAX_REVIEW_DEPTH)
    assert nesting_depth_exceeds(b"[" + at_cap + b"]", MAX_REVIEW_DEPTH)
    assert not nesting_depth_exceeds(b'["\\"[[[[", {"a": "]]]"}]', 2)


def test_a_realistic_pod_is_far_from_the_depth_cap() -> None:
    review = good_review()
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "gpu", "operator": "In", "values": ["h100"]}]}]}}}  # fmt: skip
    review["request"]["object"]["spec"]["affinity"] = copy.deepcopy(affinity)
    review["request"]["object"]["metadata"]["managedFields"] = [
        {"fieldsV1": {"f:spec": {"f:containers": {'k:{"name":"trainer"}': {"f:env": {
            'k:{"name":"A"}': {".": {}, "f:name": {}}}}}}}}]  # fmt: skip
    assert not nesting_depth_exceeds(json.dumps(review).encode(), MAX_REVIEW_DEPTH // 4)
    assert post(json.dumps(review).encode())[0] == 200


def test_a_body_past_the_size_cap_is_refused_before_reading() -> None:
    environ: dict[str, Any] = {"PATH_INFO": "/mutate-pods", "REQUEST_METHOD": "POST"}
    setup_testing_defaults(environ)
    environ["CONTENT_LENGTH"] = str(MAX_REVIEW_BYTES + 1)
    environ["wsgi.input"] = io.BytesIO(b"[" * 16)
    answer: list[str] = []
    data = b"".join(webhook_app()(environ, lambda s, h: answer.append(s)))
    assert answer == ["413 Content Too Large"] and str(MAX_REVIEW_BYTES).encode() in data
