"""The CLI's one Kubernetes loader (``controller/cli/kube_config.py``), over real HTTP to the
API harness: ``KUBECONFIG`` (a list too), then ``~/.kube/config``, the current context's
namespace; and ``status``/``export`` reading it as ``operator run`` does."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness import RunningServer
from reporter_helpers import CRD_PATH
from test_operator_process import kubeconfig
from typer.testing import CliRunner

from pacekeeper.controller.cli.app import app
from pacekeeper.controller.cli.kube_config import KubeConfigError, connect


def _with_namespace(path: Path, namespace: str) -> Path:
    doc = yaml.safe_load(path.read_text())
    doc["contexts"][0]["context"]["namespace"] = namespace
    path.write_text(yaml.safe_dump(doc))
    return path


def _namespaces(api_client: Any) -> list[str]:
    from kubernetes import client

    return [n.metadata.name for n in client.CoreV1Api(api_client).list_namespace().items]


def test_kubeconfig_env_is_read_and_its_context_namespace_is_the_default(
    k8s_server: RunningServer, tmp_path: Path
) -> None:
    kc = _with_namespace(kubeconfig(k8s_server.url, tmp_path / "kc"), "ml")
    found = connect(None, {"KUBECONFIG": str(kc)})
    assert found.namespace == "ml"
    assert isinstance(_namespaces(found.api_client), list)  # it really talks to the harness


def test_a_kubeconfig_list_is_merged_and_missing_entries_skipped(
    k8s_server: RunningServer, tmp_path: Path
) -> None:
    kc = kubeconfig(k8s_server.url, tmp_path / "kc")
    value = os.pathsep.join([str(tmp_path / "absent"), str(kc)])
    found = connect(None, {"KUBECONFIG": value})
    assert found.namespace is None
    _namespaces(found.api_client)


def test_home_kube_config_comes_after_kubeconfig_env(
    k8s_server: RunningServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    kubeconfig("http://127.0.0.1:9", home / ".kube" / "config")
    _with_namespace(home / ".kube" / "config", "from-home")
    monkeypatch.setenv("HOME", str(home))
    assert connect(None, {}).namespace == "from-home"
    env_kc = _with_namespace(kubeconfig(k8s_server.url, tmp_path / "kc"), "from-env")
    assert connect(None, {"KUBECONFIG": str(env_kc)}).namespace == "from-env"


def test_nothing_found_is_one_line_naming_every_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(KubeConfigError, match="set KUBECONFIG, pass --kubeconfig"):
        connect(None, {})


def _no_kube_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    env.update(HOME=str(tmp_path), COLUMNS="200", **extra)
    return env


def test_status_kubernetes_reads_kubeconfig_env(
    k8s_server: RunningServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    k8s_server.apply_yaml(CRD_PATH)
    kc = kubeconfig(k8s_server.url, tmp_path / "kc")
    for k, v in _no_kube_env(tmp_path, KUBECONFIG=str(kc)).items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    result = CliRunner().invoke(app, ["status", "kubernetes", "-A", "-o", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == []


def test_export_kubernetes_reads_kubeconfig_env_and_context_namespace(
    k8s_server: RunningServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kc = _with_namespace(kubeconfig(k8s_server.url, tmp_path / "kc"), "ml")
    for k, v in _no_kube_env(tmp_path, KUBECONFIG=str(kc)).items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(app, ["export", "kubernetes", "--name", "llm", "-o", str(out)])
    # No such report in the harness: the point is that it got that far, in namespace ml.
    assert result.exit_code == 2, result.output
    assert "no StragglerReport ml/llm" in result.output, result.output
    assert "no Kubernetes configuration" not in result.output
