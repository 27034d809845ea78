"""The serving certificate Helm generates (tls.source=helm): what it names, what trusts it,
when an upgrade renews it, and that the servers pick a renewed one up without a restart.

`helm template` cannot look up the installed Secret, so the renewal decision
(`pacekeeper.tls.generate` in templates/tls/_helpers.tpl) is rendered by real Helm in a
probe chart made of the chart's own helper files, handed the Secret an upgrade would find.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import socket
import ssl
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml
from chart_cases import FEATURES
from chart_render import CHART_DIR, NAMESPACE, RELEASE, one, render

from pacekeeper.controller.runtime.tls import ServingCertificate
from pacekeeper.controller.runtime.wsgi_server import Serving, serve

LAYOUT = "%Y-%m-%dT%H:%M:%SZ"
PEM = re.compile(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", re.S)
SERVICES = (f"{RELEASE}-pacekeeper-metrics", f"{RELEASE}-pacekeeper-webhook")


def b64(text: str) -> str:
    return base64.b64decode(text).decode()


def generated_secret(values: dict[str, Any] | None = None) -> dict[str, Any]:
    return one(render(values), "Secret", "-tls")


def write_pair(directory: Path, secret_data: dict[str, str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tls.crt").write_text(b64(secret_data["tls.crt"]))
    (directory / "tls.key").write_text(b64(secret_data["tls.key"]))
    return directory


def ok_app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    start_response("200 OK", [("Content-Length", "2")])
    return [b"ok"]


def served_certificate(serving: Serving, ca_pem: str, name: str) -> bytes:
    """The certificate the server presents to a client that trusts ``ca_pem`` and asks
    for ``name`` (raises when it does not verify)."""
    client = ssl.create_default_context(cadata=ca_pem)
    with (
        socket.create_connection(("127.0.0.1", serving.port), timeout=5) as raw,
        client.wrap_socket(raw, server_hostname=name) as conn,
    ):
        der = conn.getpeercert(binary_form=True)
        assert der is not None
        return der


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[Serving, dict[str, str]]]:
    data = generated_secret()["data"]
    certificate = ServingCertificate.from_directory(write_pair(tmp_path / "tls", data))
    serving = serve(ok_app, "127.0.0.1", 0, certificate=certificate)
    try:
        yield serving, data
    finally:
        serving.close()


def test_the_certificate_names_every_service_and_verifies_under_the_secrets_ca(
    tls_server: tuple[Serving, dict[str, str]],
) -> None:
    serving, data = tls_server
    ca = b64(data["ca.crt"])
    for service in SERVICES:
        for name in (service, f"{service}.{NAMESPACE}", f"{service}.{NAMESPACE}.svc",
                     f"{service}.{NAMESPACE}.svc.cluster.local"):  # fmt: skip
            assert served_certificate(serving, ca, name)
    with pytest.raises(ssl.SSLCertVerificationError):
        served_certificate(serving, ca, "kubernetes.default.svc")
    other_ca = b64(generated_secret()["data"]["ca.crt"])  # another render, another CA
    with pytest.raises(ssl.SSLCertVerificationError):
        served_certificate(serving, other_ca, f"{SERVICES[0]}.{NAMESPACE}.svc")


def test_the_secret_and_the_webhooks_ca_bundle_are_one_render() -> None:
    objects = render(FEATURES["webhook"])
    secret = one(objects, "Secret", "-tls")
    webhook = one(objects, "MutatingWebhookConfiguration")
    assert secret["type"] == "kubernetes.io/tls"
    assert webhook["webhooks"][0]["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
    not_after = datetime.strptime(
        secret["metadata"]["annotations"]["pacekeeper.dev/not-after"], LAYOUT
    ).replace(tzinfo=UTC)
    assert abs(not_after - datetime.now(UTC) - timedelta(days=365)) < timedelta(hours=1)


def test_no_secret_without_a_server_that_needs_it() -> None:
    for feature in ("metrics-open", "metrics-localhost", "metrics-off"):
        assert not [o for o in render(FEATURES[feature]) if o["kind"] == "Secret"], feature
    for feature in ("webhook-cert-manager", "tls-existing-secret"):
        assert not [o for o in render(FEATURES[feature]) if o["kind"] == "Secret"], feature


# --- renewal on upgrade ---------------------------------------------------------------------

PROBE = """\
{{- include "pacekeeper.tls.generate" (dict "root" . "existing" (.Values.probe | default dict)) -}}
generated: {{ .Values._pacekeeperGeneratedTls | toJson }}
"""


@pytest.fixture(scope="module")
def probe_chart(tmp_path_factory: pytest.TempPathFactory) -> helm.Chart:
    """The chart's own helper files and one template calling the renewal decision."""
    root = tmp_path_factory.mktemp("probe") / "pacekeeper"
    for rel in ("Chart.yaml", "templates/_helpers.tpl", "templates/metrics/_helpers.tpl",
                "templates/tls/_helpers.tpl"):  # fmt: skip
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(CHART_DIR / rel, root / rel)
    (root / "templates" / "probe.yaml").write_text(PROBE)
    return helm.Chart.load(root)


def upgrade(chart: helm.Chart, installed: dict[str, Any] | None) -> dict[str, str]:
    """What an upgrade finding ``installed`` (a Secret, None: none) writes."""
    values = {"tls": yaml.safe_load((CHART_DIR / "values.yaml").read_text())["tls"],
              "probe": installed}  # fmt: skip
    (text,) = (t for p, t in chart.render(values, name=RELEASE, namespace=NAMESPACE).items()
               if p.endswith("probe.yaml"))  # fmt: skip
    generated: dict[str, str] = yaml.safe_load(text)["generated"]
    return generated


def as_secret(generated: dict[str, str], not_after: str | None = None) -> dict[str, Any]:
    annotations = {"pacekeeper.dev/not-after": not_after or generated["notAfter"]}
    data = {"ca.crt": generated["ca"], "tls.crt": generated["crt"], "tls.key": generated["key"]}
    return {"metadata": {"annotations": annotations}, "data": data}


def in_days(days: float) -> str:
    return (datetime.now(UTC) + timedelta(days=days)).strftime(LAYOUT)


def test_an_upgrade_keeps_a_certificate_far_from_expiry(probe_chart: helm.Chart) -> None:
    first = upgrade(probe_chart, None)
    assert len(PEM.findall(b64(first["ca"]))) == 1
    not_after = in_days(31)
    kept = upgrade(probe_chart, as_secret(first, not_after))
    assert kept == {**first, "notAfter": not_after}


@pytest.mark.parametrize("days_left", [29.9, 1, -3])
def test_an_upgrade_near_or_past_expiry_renews_and_still_trusts_the_old_ca(
    probe_chart: helm.Chart, days_left: float
) -> None:
    first = upgrade(probe_chart, None)
    renewed = upgrade(probe_chart, as_secret(first, in_days(days_left)))
    assert renewed["crt"] != first["crt"] and renewed["key"] != first["key"]
    new_ca, old_ca = PEM.findall(b64(renewed["ca"]))
    assert old_ca == b64(first["ca"]).strip() and new_ca not in b64(first["ca"])
    # The next renewal drops the CA before last: the bundle never grows.
    again = upgrade(probe_chart, as_secret(renewed, in_days(1)))
    assert PEM.findall(b64(again["ca"]))[1] == new_ca
    assert len(PEM.findall(b64(again["ca"]))) == 2


@pytest.mark.parametrize("broken", ["no-annotation", "no-key"])
def test_a_secret_the_chart_did_not_write_whole_is_replaced(
    probe_chart: helm.Chart, broken: str
) -> None:
    first = upgrade(probe_chart, None)
    secret = as_secret(first)
    if broken == "no-annotation":
        secret["metadata"] = {}
    else:
        del secret["data"]["tls.key"]
    assert upgrade(probe_chart, secret)["crt"] != first["crt"]


# --- the servers pick a renewed Secret up ---------------------------------------------------


def kubelet_volume(directory: Path, data: dict[str, str], generation: int) -> None:
    """Write ``data`` as the kubelet's atomic writer does: a fresh timestamped directory,
    then the ``..data`` symlink flipped to it (tls.crt -> ..data/tls.crt)."""
    directory.mkdir(exist_ok=True)
    target = write_pair(directory / f"..2026_12_01_{generation}", data)
    link = directory / "..data_tmp"
    link.symlink_to(target.name)
    os.replace(link, directory / "..data")
    for name in ("tls.crt", "tls.key"):
        if not (directory / name).is_symlink():
            (directory / name).symlink_to(f"..data/{name}")


def test_a_renewed_secret_is_served_at_the_next_connection_without_a_restart(
    probe_chart: helm.Chart, tmp_path: Path
) -> None:
    first = upgrade(probe_chart, None)
    volume = tmp_path / "tls"
    kubelet_volume(volume, as_secret(first)["data"], 1)
    serving = serve(ok_app, "127.0.0.1", 0, certificate=ServingCertificate.from_directory(volume))
    name = f"{SERVICES[1]}.{NAMESPACE}.svc"
    try:
        before = served_certificate(serving, b64(first["ca"]), name)
        renewed = upgrade(probe_chart, as_secret(first, in_days(1)))
        # The apiserver has the new bundle at once; this pod's volume is not refreshed
        # yet: the bundle's previous CA still verifies the certificate it serves.
        assert served_certificate(serving, b64(renewed["ca"]), name) == before
        kubelet_volume(volume, as_secret(renewed)["data"], 2)
        after = served_certificate(serving, b64(renewed["ca"]), name)
        assert after != before
        assert after == ssl.PEM_cert_to_DER_cert(b64(renewed["crt"]))
    finally:
        serving.close()


def test_a_pair_that_does_not_load_keeps_the_previous_certificate(
    probe_chart: helm.Chart, tmp_path: Path
) -> None:
    first, other = upgrade(probe_chart, None), upgrade(probe_chart, None)
    volume = tmp_path / "tls"
    kubelet_volume(volume, as_secret(first)["data"], 1)
    serving = serve(ok_app, "127.0.0.1", 0, certificate=ServingCertificate.from_directory(volume))
    name = f"{SERVICES[0]}.{NAMESPACE}.svc"
    try:
        before = served_certificate(serving, b64(first["ca"]), name)
        mismatched = {**as_secret(first)["data"], "tls.key": other["key"]}
        kubelet_volume(volume, mismatched, 2)
        assert served_certificate(serving, b64(first["ca"]), name) == before
    finally:
        serving.close()
