"""Serving certificates from a mounted Secret, picked up again when the kubelet renews it.

The metrics endpoint (``--metrics-access kubernetes``) and the admission webhook read
``tls.crt`` and ``tls.key`` from a directory: a ``kubernetes.io/tls`` Secret mounted as a
volume, which cert-manager or Helm fills (docs/security.md). The kubelet reads the Secret,
not the controller, so no pacekeeper process needs Secret access through the API. When the
Secret changes, the kubelet swaps the files in place (an atomic symlink flip); every new
connection checks the files' identity and, when they changed, builds a fresh context, so a
renewed certificate is served without a restart. A pair that does not load (a swap caught
half way, a key that does not match) keeps the previous context and is logged once.
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"


class CertificateError(Exception):
    """The certificate files cannot be used; the message names the file."""


@dataclass(frozen=True, slots=True)
class CertificateFiles:
    cert: Path
    key: Path

    @classmethod
    def in_directory(cls, directory: Path) -> CertificateFiles:
        """The files a ``kubernetes.io/tls`` Secret holds, as a volume mounts them."""
        return cls(directory / CERT_FILE, directory / KEY_FILE)


_Stamp = tuple[tuple[int, int, int], tuple[int, int, int]]


def _stamp(files: CertificateFiles) -> _Stamp:
    """What identifies the current contents: inode, size and mtime of both (following the
    kubelet's symlinks, so a swap shows as another inode)."""
    out = []
    for path in (files.cert, files.key):
        st = os.stat(path)
        out.append((st.st_ino, st.st_size, st.st_mtime_ns))
    return out[0], out[1]


def _context(files: CertificateFiles) -> ssl.SSLContext:
    for path in (files.cert, files.key):
        if not path.is_file():
            raise CertificateError(f"{path}: no such file (is the TLS Secret mounted?)")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    # Both clients (Prometheus, kube-apiserver) speak HTTP/1.1; never offer h2.
    context.set_alpn_protocols(["http/1.1"])
    try:
        context.load_cert_chain(files.cert, files.key)
    except (ssl.SSLError, OSError) as e:
        raise CertificateError(
            f"{files.cert} and {files.key} do not load as a certificate and its key: {e}"
        ) from None
    return context


class ServingCertificate:
    """The server-side SSL context for ``files``, rebuilt when the files change."""

    def __init__(self, files: CertificateFiles) -> None:
        self.files = files
        self._lock = threading.Lock()
        self._context = _context(files)  # the first load must work: fail at start
        self._stamp = _stamp(files)
        self._refused: _Stamp | None = None

    @classmethod
    def from_directory(cls, directory: Path) -> ServingCertificate:
        return cls(CertificateFiles.in_directory(directory))

    def context(self) -> ssl.SSLContext:
        """The context for the next handshake: the files as they are now, or the last
        pair that loaded."""
        with self._lock:
            try:
                stamp = _stamp(self.files)
            except OSError:
                return self._context  # mid-swap: the old files were just unlinked
            if stamp in (self._stamp, self._refused):
                return self._context
            try:
                context = _context(self.files)
            except CertificateError as e:
                self._refused = stamp
                logger.warning(
                    "renewed certificate refused: still serving the previous one",
                    extra={"cert": str(self.files.cert), "error": str(e)},
                )
                return self._context
            self._context, self._stamp, self._refused = context, stamp, None
            logger.info("serving certificate reloaded", extra={"cert": str(self.files.cert)})
            return context
