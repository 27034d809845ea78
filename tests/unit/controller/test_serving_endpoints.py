"""The /metrics and /mutate-pods WSGI apps as a client sees them, and the access modes.

TLS, certificate reloading and real reviews are the real-server tier's
(tests/realserver/test_metrics_auth_e2e.py, test_env_injection_e2e.py)."""

from __future__ import annotations

import io
import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from wsgiref.util import setup_testing_defaults

import pytest
from prometheus_client import CollectorRegistry, Gauge

from pacekeeper.controller.runtime.metrics_auth import MetricsAuthorizer, User
from pacekeeper.controller.runtime.metrics_serving import (
    MetricsAccess,
    MetricsServing,
    metrics_app,
    serve_metrics,
)
from pacekeeper.controller.runtime.webhook import MAX_REVIEW_BYTES, webhook_app

SCRAPER = User("system:serviceaccount:monitoring:prometheus")


class Reviewer:
    def authenticate(self, token: str) -> User | None:
        return {"good": SCRAPER, "other": User("someone")}.get(token)

    def authorize(self, user: User, path: str, verb: str) -> bool:
        return user == SCRAPER and (path, verb) == ("/metrics", "get")


def registry() -> CollectorRegistry:
    reg = CollectorRegistry()
    Gauge("pacekeeper_leader", "1 while this replica leads.", registry=reg).set(1)
    return reg


def call(
    app: Callable[..., Iterable[bytes]],
    path: str,
    *,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    body: bytes = b"",
) -> tuple[int, dict[str, str], bytes]:
    environ: dict[str, Any] = {"PATH_INFO": path, "REQUEST_METHOD": method}
    setup_testing_defaults(environ)
    environ["wsgi.input"] = io.BytesIO(body)
    if body:
        environ["CONTENT_LENGTH"] = str(len(body))
        environ["CONTENT_TYPE"] = "application/json"
    for name, value in (headers or {}).items():
        environ["HTTP_" + name.upper().replace("-", "_")] = value
    answer: dict[str, Any] = {}

    def start_response(status: str, response_headers: list[tuple[str, str]]) -> None:
        answer["status"] = int(status.split(maxsplit=1)[0])
        answer["headers"] = dict(response_headers)

    data = b"".join(app(environ, start_response))
    return answer["status"], answer["headers"], data


def authorized_app() -> Callable[..., Iterable[bytes]]:
    return metrics_app(registry(), MetricsAuthorizer(Reviewer()), clock=lambda: 0.0)


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"Authorization": "Bearer garbage"}, 401),
        ({"Authorization": "Basic Zm9vOmJhcg=="}, 401),
        ({"Authorization": "Bearer other"}, 403),
        ({"Authorization": "Bearer good"}, 200),
    ],
)
def test_metrics_answer_401_403_or_the_metrics(headers: dict[str, str], status: int) -> None:
    code, response_headers, body = call(authorized_app(), "/metrics", headers=headers)
    assert code == status
    assert (b"pacekeeper_leader 1.0" in body) is (status == 200)
    assert ("WWW-Authenticate" in response_headers) is (status == 401)


def test_an_api_outage_is_503_not_a_refusal() -> None:
    class Down(Reviewer):
        def authenticate(self, token: str) -> User | None:
            from pacekeeper.controller.runtime.metrics_auth import ReviewUnavailable

            raise ReviewUnavailable("no answer")

    app = metrics_app(registry(), MetricsAuthorizer(Down()), clock=lambda: 0.0)
    assert call(app, "/metrics", headers={"Authorization": "Bearer good"})[0] == 503


def test_health_needs_no_token_and_says_nothing_else() -> None:
    code, _, body = call(authorized_app(), "/healthz")
    assert (code, body) == (200, b"ok\n")


@pytest.mark.parametrize(("path", "method", "status"), [("/", "GET", 404),
                                                        ("/metrics/x", "GET", 404),
                                                        ("/metrics", "POST", 405)])  # fmt: skip
def test_nothing_else_is_served(path: str, method: str, status: int) -> None:
    headers = {"Authorization": "Bearer good"}
    assert call(authorized_app(), path, method=method, headers=headers)[0] == status


def test_without_an_authorizer_metrics_are_open() -> None:
    code, _, body = call(metrics_app(registry()), "/metrics")
    assert code == 200 and b"pacekeeper_leader 1.0" in body


def test_kubernetes_access_needs_a_certificate_directory() -> None:
    with pytest.raises(ValueError, match="--metrics-tls-dir"):
        MetricsServing(port=8443, access=MetricsAccess.KUBERNETES)
    # Port 0 serves nothing, so there is nothing to secure.
    assert MetricsServing(port=0, access=MetricsAccess.KUBERNETES).port == 0


@pytest.mark.parametrize(
    ("access", "host"),
    [(MetricsAccess.LOCALHOST, "127.0.0.1"), (MetricsAccess.OPEN, "0.0.0.0"),
     (MetricsAccess.KUBERNETES, "0.0.0.0")],
)  # fmt: skip
def test_each_access_mode_binds_where_it_says(access: MetricsAccess, host: str) -> None:
    assert MetricsServing(port=1, access=access, tls_dir=Path("/x")).host == host


def test_localhost_serves_plain_http_on_loopback_only() -> None:
    import socket

    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    serving = serve_metrics(registry(), MetricsServing(port=port, access=MetricsAccess.LOCALHOST))
    assert serving is not None
    try:
        assert serving.address == ("127.0.0.1", port)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            assert b"pacekeeper_leader 1.0" in r.read()
    finally:
        serving.close()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2)


def admission_review() -> dict[str, Any]:
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
                "spec": {"containers": [{"name": "trainer", "image": "t"}]},
            },
        },
    }  # fmt: skip


def test_the_webhook_answers_a_review_with_a_patch() -> None:
    body = json.dumps(admission_review()).encode()
    code, headers, data = call(webhook_app(), "/mutate-pods", method="POST", body=body)
    assert (code, headers["Content-Type"]) == (200, "application/json")
    answer = json.loads(data)
    assert answer["response"]["uid"] == "u-1" and answer["response"]["patchType"] == "JSONPatch"


@pytest.mark.parametrize(
    ("path", "method", "body", "status"),
    [
        ("/mutate-pods", "GET", b"", 405),
        ("/mutate-pods", "POST", b"", 400),
        ("/mutate-pods", "POST", b"{not json", 400),
        ("/mutate-pods", "POST", b"[1, 2]", 400),
        ("/mutate-pods", "POST", json.dumps({"kind": "AdmissionReview"}).encode(), 400),
        ("/other", "POST", b"{}", 404),
        ("/healthz", "GET", b"", 200),
    ],
)
def test_the_webhook_refuses_what_is_not_a_review(
    path: str, method: str, body: bytes, status: int
) -> None:
    assert call(webhook_app(), path, method=method, body=body)[0] == status


def test_an_oversized_review_is_refused_unread() -> None:
    environ: dict[str, Any] = {"PATH_INFO": "/mutate-pods", "REQUEST_METHOD": "POST"}
    setup_testing_defaults(environ)
    environ["CONTENT_LENGTH"] = str(MAX_REVIEW_BYTES + 1)
    environ["wsgi.input"] = io.BytesIO(b"")  # reading it would return nothing
    statuses: list[str] = []
    list(webhook_app()(environ, lambda status, headers: statuses.append(status)))
    assert statuses == ["413 Content Too Large"]
