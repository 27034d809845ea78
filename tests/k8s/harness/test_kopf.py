"""kopf runs against the harness as against a real API server."""

from __future__ import annotations

import threading
from typing import Any

import kopf

from .kopf_runner import running_operator
from .objects import crd
from .running import RunningServer
from .waiting import eventually


def test_kopf_handles_a_custom_resource_and_patches_its_status(k8s_server: RunningServer) -> None:
    k8s_server.apply(crd("example.pacekeeper.dev", "Widget", "widgets"))
    registry = kopf.OperatorRegistry()
    seen = threading.Event()

    @kopf.on.create("example.pacekeeper.dev", "v1alpha1", "widgets", registry=registry)  # type: ignore[misc]
    def created(name: str, namespace: str, patch: Any, **_: Any) -> None:
        patch.status["seenBy"] = "kopf"
        seen.set()

    with running_operator(registry, k8s_server.url):
        k8s_server.apply(
            {
                "apiVersion": "example.pacekeeper.dev/v1alpha1",
                "kind": "Widget",
                "metadata": {"name": "w1", "namespace": "default"},
                "spec": {"size": 1},
            }
        )
        assert seen.wait(10)

        def status_written() -> dict[str, Any] | None:
            widget = k8s_server.read("example.pacekeeper.dev/v1alpha1", "Widget", "w1", "default")
            seen_by = ((widget or {}).get("status") or {}).get("seenBy")
            return widget if seen_by == "kopf" else None

        widget = eventually(status_written)
    assert widget["status"]["seenBy"] == "kopf"
    # kopf stored its progress in annotations/finalizers through real patches.
    assert k8s_server.history.find(verb="patch", plural="widgets")
