"""What the admission webhook's log lines call the pod it mutated."""

from __future__ import annotations

import io
import json
import logging
from typing import Any
from wsgiref.util import setup_testing_defaults

import pytest

from pacekeeper.controller.runtime.webhook import webhook_app


def review(metadata: dict[str, Any], name: str | None = None) -> bytes:
    request: dict[str, Any] = {
        "uid": "u-1",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "namespace": "team-a",
        "operation": "CREATE",
        "object": {
            "metadata": {
                "labels": {"batch.kubernetes.io/job-name": "llama"},
                "annotations": {"pacekeeper.dev/detect": "true"},
                **metadata,
            },
            "spec": {"containers": [{"name": "trainer", "image": "t"}]},
        },
    }
    if name is not None:
        request["name"] = name
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "request": request}).encode()  # fmt: skip


def injected_record(body: bytes, caplog: pytest.LogCaptureFixture) -> logging.LogRecord:
    environ: dict[str, Any] = {"PATH_INFO": "/mutate-pods", "REQUEST_METHOD": "POST"}
    setup_testing_defaults(environ)
    environ["wsgi.input"] = io.BytesIO(body)
    environ["CONTENT_LENGTH"] = str(len(body))
    with caplog.at_level(logging.INFO, logger="pacekeeper.controller.runtime.webhook"):
        b"".join(webhook_app()(environ, lambda status, headers: None))
    return next(r for r in caplog.records if r.getMessage() == "env injected")


def test_a_generated_name_is_logged_as_such_not_as_the_pods_name(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rec = injected_record(review({"generateName": "llama-"}), caplog)
    assert rec.__dict__["generateName"] == "llama-"
    assert "pod" not in rec.__dict__


def test_a_named_pod_is_logged_by_its_name(caplog: pytest.LogCaptureFixture) -> None:
    rec = injected_record(review({"name": "llama-0"}, name="llama-0"), caplog)
    assert rec.__dict__["pod"] == "llama-0"
    assert "generateName" not in rec.__dict__
