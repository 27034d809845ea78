"""Run an `ApiServer` on a loopback port in its own thread and event loop.

The synchronous kubernetes client blocks its caller, and kopf brings its own loop, so
the server cannot share the test's loop. Everything that touches the store goes
through `call`, which runs it on the server's loop and waits for the result.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

import aiohttp.test_utils
import yaml

from .emulator import PODS, ApiServer, Body
from .faults import Fault, FaultBook
from .history import History

T = TypeVar("T")

_START_TIMEOUT_S = 10.0


class RunningServer:
    def __init__(self, **options: Any) -> None:
        self._options = options
        self._thread = threading.Thread(target=self._main, name="k8s-harness", daemon=True)
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._server: ApiServer | None = None
        self._url: str | None = None
        self._failure: BaseException | None = None

    # ---- lifecycle ----------------------------------------------------------------

    def start(self) -> Self:
        if self._ready.is_set():
            return self
        self._thread.start()
        if not self._ready.wait(_START_TIMEOUT_S):
            raise RuntimeError("the Kubernetes API harness did not start in time")
        if self._failure is not None:
            raise RuntimeError("the Kubernetes API harness failed to start") from self._failure
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(_START_TIMEOUT_S)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _main(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # surfaced by start(); the thread must not die silently
            self._failure = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        server = ApiServer(**self._options)
        async with server:
            web = aiohttp.test_utils.RawTestServer(server, host="127.0.0.1", port=0)
            await web.start_server()
            self._server = server
            self._url = str(web.make_url("")).rstrip("/")
            self._ready.set()
            try:
                await self._stop.wait()
            finally:
                server.close_watches()
                await web.close()

    # ---- access -------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self._url is None:
            raise RuntimeError("the harness is not running")
        return self._url

    @property
    def server(self) -> ApiServer:
        """The emulator itself; read it through `call` while the server runs."""
        if self._server is None:
            raise RuntimeError("the harness is not running")
        return self._server

    @property
    def history(self) -> History:
        return self.server.history

    @property
    def faults(self) -> FaultBook:
        return self.server.faults

    def inject(self, fault: Fault) -> Fault:
        return self.server.faults.add(fault)

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run `fn(*args)` on the server's loop, so it never races a request."""
        if self._loop is None:
            raise RuntimeError("the harness is not running")
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                future.set_result(fn(*args))
            except BaseException as exc:
                future.set_exception(exc)

        self._loop.call_soon_threadsafe(run)
        return future.result(_START_TIMEOUT_S)

    # ---- test setup and inspection ------------------------------------------------

    def apply(self, obj: Mapping[str, Any]) -> Body:
        """Create or wholly replace an object (status included), as a cluster admin would."""
        return self.call(self.server.apply, obj)

    def apply_yaml(self, source: str | Path) -> list[Body]:
        """Apply every document of a YAML file or string, CRDs first."""
        text = source.read_text() if isinstance(source, Path) else source
        docs = [doc for doc in yaml.safe_load_all(text) if doc]
        docs.sort(key=lambda doc: doc.get("kind") != "CustomResourceDefinition")
        return [self.apply(doc) for doc in docs]

    def read(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Body | None:
        return self.call(self.server.read, api_version, kind, name, namespace)

    def finish_termination(self, name: str, namespace: str) -> Body:
        """What a kubelet does once a bound pod's containers stopped: delete with grace 0."""
        return self.call(self.server._delete, (PODS, namespace, name), {"gracePeriodSeconds": 0})

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Body:
        """Delete as another actor would (a Job controller, a human), outside any client."""
        return self.call(self.server.delete_object, api_version, kind, name, namespace)

    def list(self, api_version: str, kind: str, namespace: str | None = None) -> list[Body]:
        return self.call(self.server.list_objects, api_version, kind, namespace)


def start_server(**options: Any) -> RunningServer:
    return RunningServer(**options).start()
