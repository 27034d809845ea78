"""A small threaded WSGI server, plain HTTP or TLS, for /metrics and the admission webhook.

prometheus-client's own server wraps the listening socket in TLS, so one client that
connects and never finishes its handshake stalls every other client (the handshake then
runs in the accepting thread). Here each connection's handshake runs in that connection's
thread, bounded by a timeout, with the context ``ServingCertificate`` holds at that moment
(a renewed certificate takes effect on the next connection). Requests are not logged:
Prometheus scrapes every 30 s and the apiserver calls the webhook on every pod create.
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
from collections.abc import Callable, Iterable
from socketserver import TCPServer, ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from pacekeeper.controller.runtime.tls import ServingCertificate

logger = logging.getLogger(__name__)

HANDSHAKE_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_S = 10.0
"""A client that sends nothing for this long is dropped (slow clients hold a thread)."""

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

TEXT = "text/plain; charset=utf-8"


def respond(
    start_response: Callable[..., Any],
    status: str,
    body: bytes | str,
    content_type: str = TEXT,
    *headers: tuple[str, str],
) -> list[bytes]:
    """A whole response: ``body`` (text gets a newline), its type and length, and any
    further ``headers``."""
    data = (body + "\n").encode() if isinstance(body, str) else body
    start_response(
        status, [("Content-Type", content_type), ("Content-Length", str(len(data))), *headers]
    )
    return [data]


class _Handler(WSGIRequestHandler):
    timeout = REQUEST_TIMEOUT_S

    def log_message(self, format: str, *args: Any) -> None:
        return


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True
    certificate: ServingCertificate | None = None

    def server_bind(self) -> None:
        # HTTPServer.server_bind looks the host up with getfqdn (a DNS query per start);
        # the name only feeds SERVER_NAME, which nothing here reads.
        TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)
        self.setup_environ()

    def finish_request(self, request: Any, client_address: Any) -> None:
        if self.certificate is None:
            super().finish_request(request, client_address)
            return
        request.settimeout(HANDSHAKE_TIMEOUT_S)
        try:
            conn = self.certificate.context().wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError) as e:
            # A scanner, a client that distrusts our CA, a plain-HTTP probe: its problem.
            logger.debug("TLS handshake failed", extra={"client": client_address[0], "error": e})
            return
        try:
            handler: Any = self.RequestHandlerClass  # typeshed types its server as Self
            handler(conn, client_address, self)
        finally:
            conn.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        logger.debug("connection error", extra={"client": client_address[0]}, exc_info=True)


class Serving:
    """A started server; ``close()`` stops it and frees the port."""

    def __init__(self, server: _Server, thread: threading.Thread) -> None:
        self._server = server
        self._thread = thread

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    @property
    def port(self) -> int:
        return self.address[1]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


def serve(
    app: WsgiApp,
    host: str,
    port: int,
    *,
    certificate: ServingCertificate | None = None,
    name: str = "http",
) -> Serving:
    """Serve ``app`` on ``host:port`` (``port`` 0: any free port) from a daemon thread."""

    class Server(_Server):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    server = Server((host, port), _Handler)
    server.certificate = certificate
    server.set_app(app)
    thread = threading.Thread(target=server.serve_forever, name=name, daemon=True)
    thread.start()
    return Serving(server, thread)
