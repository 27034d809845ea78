"""The few Kubernetes calls the actuators make, with JSON in and out.

Objects are handled as the API's own JSON (camelCase dicts), the same shape kopf hands
to handlers and `marks.py` reads, rather than the client's generated models.
"""

from __future__ import annotations

import json
import logging
from typing import Any

logger = logging.getLogger(__name__)

Body = dict[str, Any]

EVICTION_V1 = "policy/v1"
EVICTION_V1BETA1 = "policy/v1beta1"

MERGE_PATCH = "application/merge-patch+json"
"""JSON merge patch replaces lists whole, so a taint list we send is exactly the
result, whatever patch strategy the server would pick for strategic merge."""


class KubeApi:
    def __init__(self, api_client: Any, *, request_timeout_s: float) -> None:
        import kubernetes

        self._core = kubernetes.client.CoreV1Api(api_client)
        self._custom = kubernetes.client.CustomObjectsApi(api_client)
        self._timeout = request_timeout_s
        self._eviction_version: str | None = None

    def _json(self, response: Any) -> Body:
        data: Body = json.loads(response.data or b"{}")
        return data

    def read_node(self, name: str) -> Body:
        return self._json(
            self._core.read_node(name, _preload_content=False, _request_timeout=self._timeout)
        )

    def patch_node(self, name: str, patch: Body) -> Body:
        return self._json(
            self._core.patch_node(
                name,
                patch,
                _content_type=MERGE_PATCH,
                _preload_content=False,
                _request_timeout=self._timeout,
            )
        )

    def patch_report(self, namespace: str, name: str, patch: Body) -> None:
        """Merge-patch a StragglerReport's spec (``spec.control``: what the job applies)."""
        from pacekeeper.detector.reporters.k8s_status import GROUP, PLURAL, VERSION

        resp: Any = self._custom.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name, patch,
            _content_type=MERGE_PATCH, _preload_content=False, _request_timeout=self._timeout,
        )  # fmt: skip
        resp.data  # noqa: B018 (read: the connection goes back to the pool)

    def read_pod(self, namespace: str, name: str) -> Body:
        return self._json(
            self._core.read_namespaced_pod(
                name, namespace, _preload_content=False, _request_timeout=self._timeout
            )
        )

    def list_pods(
        self,
        namespace: str,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[Body]:
        listed = self._json(
            self._core.list_namespaced_pod(
                namespace,
                label_selector=label_selector,
                field_selector=field_selector,
                _preload_content=False,
                _request_timeout=self._timeout,
            )
        )
        items: list[Body] = listed.get("items") or []
        return items

    def _delete_options(self, uid: str | None) -> Any:
        from kubernetes import client

        # The uid precondition pins the incarnation we read: a replacement pod with
        # the same name is never evicted or deleted by a repeated call.
        return client.V1DeleteOptions(
            preconditions=client.V1Preconditions(uid=uid) if uid else None
        )

    def eviction_version(self) -> str:
        """The Eviction version the server serves: ``policy/v1`` (Kubernetes 1.22+), else
        ``policy/v1beta1``. Asked once through discovery; a failed look-up assumes v1
        and ``evict_pod`` falls back when the server refuses that kind."""
        if self._eviction_version is None:
            from kubernetes import client
            from kubernetes.client.exceptions import ApiException

            try:
                group = client.PolicyApi(self._core.api_client).get_api_group(
                    _request_timeout=self._timeout
                )
                served = {v.group_version for v in group.versions or ()}
            except (ApiException, OSError) as exc:
                logger.warning("eviction version not discovered", extra={"error": str(exc)})
                served = set()
            self._eviction_version = (
                EVICTION_V1BETA1 if served and EVICTION_V1 not in served else EVICTION_V1
            )
        return self._eviction_version

    def evict_pod(self, namespace: str, name: str, uid: str | None) -> None:
        from kubernetes.client.exceptions import ApiException

        version = self.eviction_version()
        try:
            self._post_eviction(namespace, name, uid, version)
        except ApiException as exc:
            # A server that does not serve the version we assumed says so with 400/404
            # ("no kind Eviction is registered for version policy/v1"): ask once more in
            # the version it does serve, and remember it.
            if (
                version != EVICTION_V1
                or exc.status not in (400, 404)
                or "Eviction" not in str(exc.body)
            ):
                raise
            self._eviction_version = EVICTION_V1BETA1
            self._post_eviction(namespace, name, uid, EVICTION_V1BETA1)

    def _post_eviction(self, namespace: str, name: str, uid: str | None, version: str) -> None:
        body: Any = {
            "apiVersion": version,
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
            "deleteOptions": self._core.api_client.sanitize_for_serialization(
                self._delete_options(uid)
            ),
        }
        self._core.create_namespaced_pod_eviction(
            name, namespace, body, _preload_content=False, _request_timeout=self._timeout
        )

    def delete_pod(self, namespace: str, name: str, uid: str | None) -> None:
        self._core.delete_namespaced_pod(
            name,
            namespace,
            body=self._delete_options(uid),
            _preload_content=False,
            _request_timeout=self._timeout,
        )

    def patch_event(self, namespace: str, name: str, patch: Body) -> Body:
        """Merge-patch an Event; the Event as it now is."""
        return self._json(
            self._core.patch_namespaced_event(
                name, namespace, patch, _content_type=MERGE_PATCH,
                _preload_content=False, _request_timeout=self._timeout,
            )
        )  # fmt: skip

    def create_event(self, namespace: str, event: Body) -> None:
        # The generated model would coerce the dict anyway; JSON in keeps one shape.
        body: Any = event
        self._core.create_namespaced_event(
            namespace, body, _preload_content=False, _request_timeout=self._timeout
        )
