"""Client settings that point the official clients and kopf at a running harness."""

from __future__ import annotations

from typing import Any

DEFAULT_NAMESPACE = "default"


def client_configuration(url: str) -> Any:
    """A sync `kubernetes.client.Configuration` for plain HTTP to the harness."""
    import kubernetes

    configuration = kubernetes.client.Configuration()
    configuration.host = url
    # urllib3 would otherwise retry some failed requests itself and hide duplicates
    # from the request log; retrying is the caller's job.
    configuration.retries = False
    return configuration


def aio_client_configuration(url: str) -> Any:
    """The same for `kubernetes.aio`."""
    from kubernetes import aio

    configuration = aio.client.Configuration()
    configuration.host = url
    return configuration


def kopf_login(url: str) -> Any:
    """Return this from a `@kopf.on.login` handler to run kopf against the harness."""
    import kopf

    return kopf.ConnectionInfo(server=url, insecure=True, default_namespace=DEFAULT_NAMESPACE)
