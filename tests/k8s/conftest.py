"""Fixtures for Kubernetes tests: the API harness and clients configured against it.

`k8s_server` is a `harness.RunningServer`: `.url`, `.apply(obj)`, `.apply_yaml(path)`,
`.read(...)`, `.list(...)`, `.inject(Fault(...))`, `.history.find(...)`. The clients
below talk to it over real HTTP, exactly as to a real API server. See docs/testing.md.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from harness import RunningServer
from harness.clients import DEFAULT_NAMESPACE, aio_client_configuration, client_configuration


@pytest.fixture
def k8s_server() -> Iterator[RunningServer]:
    """A fresh API server per test, with the `default` namespace in it."""
    server = RunningServer().start()
    try:
        server.apply(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": DEFAULT_NAMESPACE}}
        )
        yield server
    finally:
        server.stop()


@pytest.fixture
def k8s_url(k8s_server: RunningServer) -> str:
    return k8s_server.url


@pytest.fixture
def k8s_api_client(k8s_url: str) -> Iterator[Any]:
    """A sync `kubernetes.client.ApiClient` pointed at the harness."""
    import kubernetes

    api_client = kubernetes.client.ApiClient(client_configuration(k8s_url))
    try:
        yield api_client
    finally:
        api_client.close()


@pytest.fixture
def core_v1(k8s_api_client: Any) -> Any:
    import kubernetes

    return kubernetes.client.CoreV1Api(k8s_api_client)


@pytest.fixture
async def k8s_aio_api_client(k8s_url: str) -> AsyncIterator[Any]:
    """A `kubernetes.aio.client.ApiClient` pointed at the harness."""
    from kubernetes import aio

    api_client = aio.client.ApiClient(aio_client_configuration(k8s_url))
    try:
        yield api_client
    finally:
        await api_client.close()


@pytest.fixture
def backoff_sleeps() -> list[float]:
    """Backoff delays the actuators asked for, recorded instead of slept."""
    return []


@pytest.fixture
def actuators(k8s_api_client: Any, backoff_sleeps: list[float]) -> Any:
    """`KubernetesActuators` on the harness; backoffs are recorded, not slept."""
    from pacekeeper.controller.actuators.kubernetes_actuators import KubernetesActuators
    from pacekeeper.controller.actuators.retries import RetrySettings

    return KubernetesActuators(
        k8s_api_client,
        instance="test",
        settings=RetrySettings(request_timeout_s=1.0),
        sleep=backoff_sleeps.append,
    )
