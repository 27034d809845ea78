"""Run a kopf operator against the harness in a background thread, for tests."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .clients import kopf_login

_READY_TIMEOUT_S = 15.0


@contextmanager
def running_operator(
    registry: Any, url: str, *, settings: Any = None, **operator_options: Any
) -> Iterator[None]:
    """Start `kopf.operator` on `registry`, logged in to `url`; stop it on exit.

    `operator_options` go to `kopf.operator` (`clusterwide=True` unless namespaces
    are given); the operator is standalone (no peering objects).
    """
    import kopf

    @kopf.on.login(registry=registry)  # type: ignore[misc]
    def _login(**_: Any) -> Any:
        return kopf_login(url)

    if settings is None:
        settings = kopf.OperatorSettings()
        # Short timeouts keep shutdown fast; the harness answers at once anyway.
        settings.watching.server_timeout = 10
        settings.networking.request_timeout = 10
        settings.posting.level = 0
    operator_options.setdefault("standalone", True)
    if not operator_options.get("namespaces") and not operator_options.get("namespace"):
        operator_options.setdefault("clusterwide", True)
    stop_flag = threading.Event()
    ready_flag = threading.Event()
    failure: list[BaseException] = []

    def main() -> None:
        try:
            asyncio.run(
                kopf.operator(
                    registry=registry,
                    settings=settings,
                    stop_flag=stop_flag,
                    ready_flag=ready_flag,
                    **operator_options,
                )
            )
        except BaseException as exc:  # surfaced to the test below
            failure.append(exc)
            ready_flag.set()

    thread = threading.Thread(target=main, name="kopf-under-test", daemon=True)
    thread.start()
    if not ready_flag.wait(_READY_TIMEOUT_S) or failure:
        stop_flag.set()
        raise RuntimeError("kopf did not start against the harness") from (
            failure[0] if failure else None
        )
    try:
        yield
    finally:
        stop_flag.set()
        thread.join(_READY_TIMEOUT_S)
        if failure:
            raise RuntimeError("kopf failed while running against the harness") from failure[0]
