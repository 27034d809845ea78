"""The command-line flags of the metrics endpoint and the webhook refuse what cannot work,
naming the flag, before anything is served or any API is asked."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from pacekeeper.controller.cli.app import app

POLICY = "apiVersion: pacekeeper.dev/v1alpha1\nkind: RemediationPolicies\nmode: observe\n"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200", "KUBECONFIG": "/nope"})
    return result.exit_code, result.output


def operator(tmp_path: Path, *extra: str) -> tuple[int, str]:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    return run("operator", "run", "--policy", str(policy), "--no-leader-election",
               "--metrics-port", "8443", *extra)  # fmt: skip


def test_kubernetes_access_without_a_certificate_is_refused(tmp_path: Path) -> None:
    code, out = operator(tmp_path, "--metrics-access", "kubernetes")
    assert code == 2 and "--metrics-tls-dir" in out and "plain HTTP" in out


def test_a_certificate_directory_without_the_pair_is_refused(tmp_path: Path) -> None:
    (tmp_path / "tls").mkdir()
    code, out = operator(tmp_path, "--metrics-access", "kubernetes",
                         "--metrics-tls-dir", str(tmp_path / "tls"))  # fmt: skip
    assert code == 2 and "--metrics-tls-dir" in out and "tls.crt" in out


def test_an_unknown_access_mode_is_refused_naming_the_choices(tmp_path: Path) -> None:
    code, out = operator(tmp_path, "--metrics-access", "anyone")
    assert code == 2 and "--metrics-access" in out and "kubernetes, localhost, open" in out


def test_the_webhook_refuses_a_missing_certificate(tmp_path: Path) -> None:
    code, out = run("webhook", "serve", "--tls-dir", str(tmp_path), "--port", "19444")
    assert code == 2 and "--tls-dir" in out and "tls.crt" in out


def test_the_webhook_command_says_what_it_does() -> None:
    code, out = run("webhook", "serve", "--help")
    assert code == 0 and "AdmissionReviews" in out and "--tls-dir" in out
