"""The admission webhook that adds the reporting environment to opted-in pods.

``pacekeeper webhook serve`` runs this in a Deployment of its own (the chart's
``webhook.enabled``): it answers the apiserver's AdmissionReviews for pod creates on
``/mutate-pods`` over HTTPS and nothing else (``/healthz`` for the kubelet). It needs no
Kubernetes API access at all: the pod in the request is all it reads, ``injection.py``
decides, and its certificate is a Secret the kubelet mounts (``tls.py``). Its pods run
without a ServiceAccount token.

A request it cannot parse gets 400: the apiserver then applies the webhook's
failurePolicy (the chart's default, Ignore, lets the pod through unchanged). Anyone who can
reach the Service can post here, so the body is bounded before it is parsed (its size, and
its nesting depth by a scan of the bytes: ``json`` recurses once per level) and its shape
is checked before ``injection.py`` reads it, naming the first field of a wrong type. No
review, however malformed, gets anything but a 400 with a message.
"""

from __future__ import annotations

import json
import logging
import re
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
MAX_REVIEW_DEPTH = 100
"""Nesting of JSON objects and arrays. A Pod's deepest fields (affinity terms,
managedFields) sit some 20 levels below the review; Python's parser recurses once per
level and fails with RecursionError near 1,000."""

_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
"""A JSON string with its escapes: brackets inside one are text, not nesting."""
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def nesting_depth_exceeds(body: bytes, limit: int) -> bool:
    """Whether ``body`` nests objects/arrays deeper than ``limit``, without parsing it.

    Strings are cut out and everything but brackets dropped (both in C), so only the
    brackets are walked, and the walk stops at the first level past the limit. Unbalanced
    or otherwise broken JSON gets whatever answer and is refused by the parser after."""
    brackets = _JSON_STRING.sub(b"", body).translate(None, _NOT_BRACKETS)
    depth = 0
    for byte in brackets:
        if byte in b"[{":
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


_JSON_TYPES: tuple[tuple[type, str], ...] = (
    (bool, "a boolean"),  # before int: a bool is an int to isinstance
    (dict, "an object"),
    (list, "an array"),
    (str, "a string"),
    (int, "a number"),
    (float, "a number"),
)


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    return next((name for kind, name in _JSON_TYPES if isinstance(value, kind)), "a value")


def _wrong_type(path: str, value: object, wanted: type, name: str) -> str | None:
    """``path``'s complaint when ``value`` is neither null/absent nor ``wanted``."""
    if value is None or (isinstance(value, wanted) and not isinstance(value, bool)):
        return None
    return f"{path} is {_json_type(value)}, not {name}"


def _string_map_problem(path: str, value: object) -> str | None:
    if not isinstance(value, dict):
        return _wrong_type(path, value, dict, "an object")
    for key, item in value.items():
        if not isinstance(item, str):
            return f"{path}[{key!r}] is {_json_type(item)}, not a string"
    return None


def _container_problem(path: str, container: object) -> str | None:
    if not isinstance(container, dict):
        return f"{path} is {_json_type(container)}, not an object"
    if problem := _wrong_type(f"{path}.name", container.get("name"), str, "a string"):
        return problem
    if problem := _wrong_type(f"{path}.envFrom", container.get("envFrom"), list, "an array"):
        return problem
    env = container.get("env")
    if problem := _wrong_type(f"{path}.env", env, list, "an array"):
        return problem
    for i, entry in enumerate(env or []):
        if not isinstance(entry, dict):
            return f"{path}.env[{i}] is {_json_type(entry)}, not an object"
        if not isinstance(entry.get("name"), str):
            return f"{path}.env[{i}].name is {_json_type(entry.get('name'))}, not a string"
    return None


def _pod_problem(pod: dict[str, Any]) -> str | None:
    """The first field ``injection.inject`` reads that has a type no Pod has."""
    path = "request.object"
    meta = pod.get("metadata")
    if problem := _wrong_type(f"{path}.metadata", meta, dict, "an object"):
        return problem
    meta = meta or {}
    for field in ("name", "generateName"):
        if problem := _wrong_type(f"{path}.metadata.{field}", meta.get(field), str, "a string"):
            return problem
    for field in ("labels", "annotations"):
        if problem := _string_map_problem(f"{path}.metadata.{field}", meta.get(field)):
            return problem
    spec = pod.get("spec")
    if problem := _wrong_type(f"{path}.spec", spec, dict, "an object"):
        return problem
    containers = (spec or {}).get("containers")
    if problem := _wrong_type(f"{path}.spec.containers", containers, list, "an array"):
        return problem
    for i, container in enumerate(containers or []):
        if problem := _container_problem(f"{path}.spec.containers[{i}]", container):
            return problem
    return None


def review_problem(review: object) -> str | None:
    """Why ``review`` (parsed JSON) is not an AdmissionReview this webhook can read, naming
    the first field of a wrong type; None when its shape is sound. ``injection.py`` trusts
    the shape the apiserver sends, so every field it reads is checked here first."""
    if not isinstance(review, dict):
        return f"the body is {_json_type(review)}, not an object"
    request = review.get("request")
    if not isinstance(request, dict):
        return f"request is {_json_type(request)}, not an object"
    for field in ("uid", "name", "namespace", "operation"):
        if problem := _wrong_type(f"request.{field}", request.get(field), str, "a string"):
            return problem
    kind = request.get("kind")
    if problem := _wrong_type("request.kind", kind, dict, "an object"):
        return problem
    pod = request.get("object")
    if problem := _wrong_type("request.object", pod, dict, "an object"):
        return problem
    is_pod = (kind or {}).get("kind") == "Pod"
    if is_pod and request.get("operation") == "CREATE" and pod is None:
        return "request.object is missing from a Pod CREATE"
    return _pod_problem(pod) if is_pod and pod is not None else None


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
            return respond(
                start_response,
                "413 Content Too Large",
                f"AdmissionReview over {MAX_REVIEW_BYTES} bytes",
            )
        try:
            return _answer(environ["wsgi.input"].read(length), start_response)
        except (AdmissionError, ValueError, RecursionError) as e:
            # ValueError: JSON the parser refuses (bad syntax, bad UTF-8, an integer over
            # Python's digit limit). RecursionError should not happen past the depth scan;
            # a 400 whatever the cause, never a 500.
            logger.warning("admission review refused", extra={"error": str(e)})
            return respond(start_response, "400 Bad Request", f"not an AdmissionReview: {e}")
        except Exception as e:
            # A shape review_problem missed, or a body the client broke off: still a 400.
            logger.warning("admission review unreadable", exc_info=True)
            return respond(
                start_response, "400 Bad Request",
                f"not an AdmissionReview this webhook can read ({type(e).__name__})",
            )  # fmt: skip

    return app


def _answer(body: bytes, start_response: Callable[..., Any]) -> Iterable[bytes]:
    """The response to a review body already within ``MAX_REVIEW_BYTES``; raises
    ``AdmissionError`` (or ``ValueError`` from the parser) for a malformed one."""
    if nesting_depth_exceeds(body, MAX_REVIEW_DEPTH):
        raise AdmissionError(f"the body nests objects/arrays deeper than {MAX_REVIEW_DEPTH}")
    review = json.loads(body)
    if problem := review_problem(review):
        raise AdmissionError(problem)
    answer, injection = review_response(review)
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


def serve_webhook(port: int, tls_dir: Path, host: str = "0.0.0.0") -> Serving:
    """Serve the webhook over HTTPS with the certificate in ``tls_dir`` (reloaded on
    change); raises ``tls.CertificateError`` when it does not load at start."""
    certificate = ServingCertificate.from_directory(tls_dir)
    started = serve(webhook_app(), host, port, certificate=certificate, name="webhook")
    logger.info("serving the admission webhook", extra={"address": f"{host}:{started.port}"})
    return started
