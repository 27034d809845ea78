"""TokenReview and SubjectAccessReview through the official client: ``metrics_auth.Reviewer``.

The controller's ServiceAccount needs ``create`` on ``tokenreviews`` and
``subjectaccessreviews`` (the chart's ``<release>-pacekeeper-metrics-auth`` ClusterRole,
the same two rights as Kubernetes' ``system:auth-delegator``). A review the API refuses
us (403: that ClusterRole is missing), a timeout or a 5xx is ``ReviewUnavailable``: the
scrape gets 503 and the log says why, instead of every scraper seeing a 401 that blames
its token.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from pacekeeper.controller.runtime.metrics_auth import ReviewUnavailable, User

logger = logging.getLogger(__name__)

REVIEW_TIMEOUT_S = 5.0


def _field(obj: Any, name: str) -> Any:
    """A field of a client model or of a plain dict (the client answers models)."""
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _problem(e: Exception) -> str:
    status = getattr(e, "status", None)
    if status == 403:
        return (
            "the API refused the controller a token or access review (403): its "
            "ServiceAccount needs create on tokenreviews and subjectaccessreviews"
        )
    if status is not None:
        return f"the API answered {status} to a review: {getattr(e, 'reason', '')}".strip()
    return f"the API could not be reached for a review: {type(e).__name__}: {e}"


class KubernetesReviewer:
    """Reviews with ``api_client``'s own credentials (the controller's ServiceAccount)."""

    def __init__(self, api_client: Any, *, timeout_s: float = REVIEW_TIMEOUT_S) -> None:
        from kubernetes import client

        self._authentication: Any = client.AuthenticationV1Api(api_client)
        self._authorization: Any = client.AuthorizationV1Api(api_client)
        self._timeout_s = timeout_s

    def authenticate(self, token: str) -> User | None:
        # No audiences: the API server's own, which a ServiceAccount token Prometheus
        # mounts (or a projected one without an audience) carries.
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        }
        try:
            answer = self._authentication.create_token_review(
                body, _request_timeout=self._timeout_s
            )
        except Exception as e:  # ApiException, urllib3 errors: all mean "no answer"
            raise ReviewUnavailable(_problem(e)) from None
        status = _field(answer, "status")
        if not _field(status, "authenticated"):
            error = _field(status, "error")
            if error:
                logger.debug("token not accepted", extra={"error": str(error)})
            return None
        user = _field(status, "user")
        extra = _field(user, "extra") or {}
        return User(
            name=str(_field(user, "username") or ""),
            uid=str(_field(user, "uid") or ""),
            groups=tuple(str(g) for g in _field(user, "groups") or ()),
            extra=tuple(sorted((str(k), tuple(str(v) for v in vs)) for k, vs in extra.items())),
        )

    def authorize(self, user: User, path: str, verb: str) -> bool:
        spec: dict[str, Any] = {
            "user": user.name,
            "groups": list(user.groups),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": spec,
        }
        try:
            answer = self._authorization.create_subject_access_review(
                body, _request_timeout=self._timeout_s
            )
        except Exception as e:
            raise ReviewUnavailable(_problem(e)) from None
        status = _field(answer, "status")
        error = _field(status, "evaluation_error") or _field(status, "evaluationError")
        if error and not _field(status, "allowed"):
            logger.debug("access review error", extra={"user": user.name, "error": str(error)})
        return bool(_field(status, "allowed")) and not _field(status, "denied")
