"""How the controller serves /metrics: the access mode, TLS, and the endpoint itself.

Three modes (``operator run --metrics-access``; the chart's ``metrics.access``):

- ``kubernetes``: HTTPS on every address; each scrape's bearer token is checked with a
  TokenReview and a SubjectAccessReview (``get`` on ``/metrics``), cached briefly
  (``metrics_auth.py``). The certificate comes from a mounted Secret (``tls.py``).
- ``localhost``: plain HTTP on 127.0.0.1 only: reachable from the pod's own containers (a
  scraping sidecar) and ``kubectl port-forward`` (which RBAC already guards with
  ``pods/portforward``), from nowhere else.
- ``open``: plain HTTP on every address without authentication, as before; pair it with
  the chart's NetworkPolicy.

``/healthz`` answers ``ok`` without authentication in every mode: the kubelet's probes
carry no token, and it says nothing but that the process serves.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from pacekeeper.controller.runtime.metrics_auth import (
    CacheSettings,
    Decision,
    MetricsAuthorizer,
    Reviewer,
    Verdict,
)
from pacekeeper.controller.runtime.wsgi_server import TEXT, Serving, WsgiApp, respond, serve

logger = logging.getLogger(__name__)

METRICS_PATH = "/metrics"
HEALTH_PATH = "/healthz"


class MetricsAccess(StrEnum):
    KUBERNETES = "kubernetes"
    LOCALHOST = "localhost"
    OPEN = "open"


@dataclass(frozen=True, slots=True)
class MetricsServing:
    port: int = 0
    """0: no metrics endpoint."""
    access: MetricsAccess = MetricsAccess.LOCALHOST
    tls_dir: Path | None = None
    """``tls.crt`` and ``tls.key``; required by ``kubernetes``, which never sends tokens
    in the clear."""
    cache: CacheSettings = field(default_factory=CacheSettings)

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ValueError(f"metrics port {self.port} is not a port")
        if self.port and self.access is MetricsAccess.KUBERNETES and self.tls_dir is None:
            raise ValueError(
                "metrics access kubernetes needs a TLS directory (--metrics-tls-dir): bearer "
                "tokens are never accepted over plain HTTP"
            )

    @property
    def host(self) -> str:
        return "127.0.0.1" if self.access is MetricsAccess.LOCALHOST else "0.0.0.0"


_STATUS = {
    Verdict.UNAUTHENTICATED: "401 Unauthorized",
    Verdict.FORBIDDEN: "403 Forbidden",
    Verdict.UNAVAILABLE: "503 Service Unavailable",
}


def _refused(start_response: Callable[..., Any], decision: Decision) -> list[bytes]:
    if decision.verdict is Verdict.UNAVAILABLE:
        logger.warning("metrics scrape not reviewed", extra={"reason": decision.reason})
    else:
        logger.debug(
            "metrics scrape refused",
            extra={"verdict": decision.verdict.value, "user": decision.user,
                   "reason": decision.reason},
        )  # fmt: skip
    challenge = [("WWW-Authenticate", 'Bearer realm="pacekeeper"')]
    extra = challenge if decision.verdict is Verdict.UNAUTHENTICATED else []
    return respond(start_response, _STATUS[decision.verdict], decision.verdict.value, TEXT, *extra)


def metrics_app(
    registry: Any,
    authorizer: MetricsAuthorizer | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> WsgiApp:
    """/healthz, and /metrics from ``registry`` behind ``authorizer`` (None: no checks)."""
    from prometheus_client import make_wsgi_app

    prometheus = make_wsgi_app(registry)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO") or "/"
        if path == HEALTH_PATH:
            return respond(start_response, "200 OK", "ok")
        if path != METRICS_PATH:
            return respond(start_response, "404 Not Found", "not found")
        if environ.get("REQUEST_METHOD", "GET") not in ("GET", "HEAD"):
            return respond(
                start_response, "405 Method Not Allowed", "GET only", TEXT, ("Allow", "GET")
            )
        if authorizer is not None:
            decision = authorizer.check(environ.get("HTTP_AUTHORIZATION"), path, "get", clock())
            if decision.verdict is not Verdict.ALLOWED:
                return _refused(start_response, decision)
        return prometheus(environ, start_response)  # type: ignore[no-any-return]

    return app


def serve_metrics(
    registry: Any,
    serving: MetricsServing,
    api_client: Any = None,
    *,
    reviewer: Reviewer | None = None,
) -> Serving | None:
    """Start the endpoint ``serving`` describes (None when its port is 0). ``kubernetes``
    reviews with ``reviewer``, else with ``api_client``'s credentials."""
    if not serving.port:
        return None
    certificate = None
    authorizer = None
    if serving.access is MetricsAccess.KUBERNETES:
        from pacekeeper.controller.runtime.tls import ServingCertificate

        assert serving.tls_dir is not None  # __post_init__ refuses otherwise
        certificate = ServingCertificate.from_directory(serving.tls_dir)
        if reviewer is None:
            from pacekeeper.controller.runtime.access_review import KubernetesReviewer

            reviewer = KubernetesReviewer(api_client)
        authorizer = MetricsAuthorizer(reviewer, serving.cache)
    started = serve(
        metrics_app(registry, authorizer),
        serving.host,
        serving.port,
        certificate=certificate,
        name="metrics",
    )
    logger.info(
        "serving metrics",
        extra={"address": f"{serving.host}:{started.port}", "access": serving.access.value,
               "tls": certificate is not None},
    )  # fmt: skip
    return started
