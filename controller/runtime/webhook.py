"""The admission webhook that adds the reporting environment to opted-in pods.

``pacekeeper webhook serve`` runs this in a Deployment of its own (the chart's
``webhook.enabled``): it answers the apiserver's AdmissionReviews for pod creates on
``/mutate-pods`` over HTTPS and nothing else (``/healthz`` for the kubelet). It needs no
Kubernetes API access at all: the pod in the request is all it reads, ``injection.py``
decides, and its certificate is a Secret the kubelet mounts (``tls.py``). Its pods run
without a ServiceAccount token.

A request it cannot parse gets 400: the apiserver then applies the webhook's
failurePolicy (the chart's default, Ignore, lets the pod through unchanged).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pacekeeper.controller.runtime.injection import AdmissionError, review_response
from pacekeeper.controller.runtime.tls import ServingCertificate
from pacekeeper.controller.runtime.wsgi_server import Serving, WsgiApp, respond, serve

logger = logging.getLogger(__name__)

MUTATE_PATH = "/mutate-pods"
HEALTH_PATH = "/healthz"
MAX_REVIEW_BYTES = 4 * 1024 * 1024
"""An AdmissionReview carries one Pod, which etcd caps at 1.5 MiB; room to spare."""


def _pod_identity(review: dict[str, Any]) -> dict[str, str]:
    """How logs name the pod: at admission a controller-made pod has no name yet, only
    the ``generateName`` prefix the API server completes afterwards; logging that prefix
    as ``pod`` would name a pod that never exists."""
    request = review.get("request") or {}
    meta = (request.get("object") or {}).get("metadata") or {}
    out: dict[str, str] = {}
    name = request.get("name") or meta.get("name")
    if name:
        out["pod"] = str(name)
    if meta.get("generateName"):
        out["generateName"] = str(meta["generateName"])
    return out


def webhook_app() -> WsgiApp:
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO") or "/"
        if path == HEALTH_PATH:
            return respond(start_response, "200 OK", "ok")
        if path != MUTATE_PATH:
            return respond(start_response, "404 Not Found", "not found")
        if environ.get("REQUEST_METHOD") != "POST":
            return respond(start_response, "405 Method Not Allowed", "POST an AdmissionReview")
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = -1
        if length <= 0:
            return respond(start_response, "400 Bad Request", "Content-Length is missing")
        if length > MAX_REVIEW_BYTES:
            return respond(start_response, "413 Content Too Large", "AdmissionReview too large")
        try:
            review = json.loads(environ["wsgi.input"].read(length))
            if not isinstance(review, dict):
                raise AdmissionError("the body is not a JSON object")
            answer, injection = review_response(review)
        except (ValueError, AdmissionError) as e:
            logger.warning("admission review refused", extra={"error": str(e)})
            return respond(start_response, "400 Bad Request", f"not an AdmissionReview: {e}")
        if injection.added:
            logger.info(
                "env injected",
                extra={"namespace": (review.get("request") or {}).get("namespace"),
                       **_pod_identity(review), "job": injection.job_name,
                       "containers": {c: list(names) for c, names in injection.added}},
            )  # fmt: skip
        for warning in injection.warnings:
            logger.info("injection warning", extra={**_pod_identity(review), "warning": warning})
        return respond(start_response, "200 OK", json.dumps(answer).encode(), "application/json")

    return app


def serve_webhook(port: int, tls_dir: Path, host: str = "0.0.0.0") -> Serving:
    """Serve the webhook over HTTPS with the certificate in ``tls_dir`` (reloaded on
    change); raises ``tls.CertificateError`` when it does not load at start."""
    certificate = ServingCertificate.from_directory(tls_dir)
    started = serve(webhook_app(), host, port, certificate=certificate, name="webhook")
    logger.info("serving the admission webhook", extra={"address": f"{host}:{started.port}"})
    return started
