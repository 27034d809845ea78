"""The throwaway keys and certificates one test cluster needs, made with the openssl CLI.

Separate from the process handling because it is pure file making: a CA, a serving
certificate for the loopback address (kube-apiserver and kube-controller-manager share
it), and the service-account key pair. openssl is used because Python's `cryptography`
is not a dependency of the project; ECDSA P-256 keys are generated in milliseconds.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

_OPENSSL_TIMEOUT_S = 30
_VALID_DAYS = "2"
# Names a client may use for the API server: loopback, and the in-cluster service names
# and first service IP (10.0.0.1 for servers.SERVICE_CLUSTER_IP_RANGE).
_SERVING_SANS = (
    "IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
    "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:10.0.0.1"
)


@dataclass(frozen=True, slots=True)
class ClusterPki:
    """Paths of the files `make_pki` wrote."""

    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    service_account_key: Path
    service_account_public_key: Path


def _openssl(*args: str, cwd: Path) -> None:
    result = subprocess.run(
        ["openssl", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=_OPENSSL_TIMEOUT_S,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed ({result.returncode}): {result.stderr}")


def _ec_key(path: Path) -> None:
    _openssl(
        "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
        "-out", str(path), cwd=path.parent,
    )  # fmt: skip


def make_pki(directory: Path) -> ClusterPki:
    """Write a fresh CA, a serving certificate signed by it and a service-account key pair."""
    directory.mkdir(parents=True, exist_ok=True)
    pki = ClusterPki(
        ca_cert=directory / "ca.crt",
        ca_key=directory / "ca.key",
        serving_cert=directory / "serving.crt",
        serving_key=directory / "serving.key",
        service_account_key=directory / "sa.key",
        service_account_public_key=directory / "sa.pub",
    )
    _ec_key(pki.ca_key)
    _openssl(
        "req", "-x509", "-new", "-key", str(pki.ca_key), "-out", str(pki.ca_cert),
        "-days", _VALID_DAYS, "-subj", "/CN=pacekeeper-test-ca",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=directory,
    )  # fmt: skip

    _ec_key(pki.serving_key)
    csr = directory / "serving.csr"
    _openssl(
        "req", "-new", "-key", str(pki.serving_key), "-out", str(csr),
        "-subj", "/CN=kube-apiserver", cwd=directory,
    )  # fmt: skip
    extensions = directory / "serving.ext"
    extensions.write_text(
        f"subjectAltName={_SERVING_SANS}\n"
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\n"
    )
    _openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(pki.ca_cert), "-CAkey", str(pki.ca_key),
        "-CAcreateserial", "-out", str(pki.serving_cert), "-days", _VALID_DAYS,
        "-extfile", str(extensions), cwd=directory,
    )  # fmt: skip

    _ec_key(pki.service_account_key)
    _openssl(
        "pkey", "-in", str(pki.service_account_key), "-pubout",
        "-out", str(pki.service_account_public_key), cwd=directory,
    )  # fmt: skip
    return pki
