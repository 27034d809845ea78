"""``pacekeeper status`` finds what it shows over real HTTP to the API harness: the
controller's namespace (no constant: the chart installs anywhere), the thresholds of the
policy in force for each job and whose they are, the annotations that chose the job's
policy and mode, the age of the newest report; plain ``status`` and ``status --watch``;
and help that shows every flag whole at 80 columns."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from harness import RunningServer
from operator_world import (
    JOB,
    JOB_OWNER,
    NAMESPACE,
    NODES,
    POLICY_YAML,
    Clock,
    policy,
    report,
    setup_world,
    sink,
)
from test_operator_process import kubeconfig
from typer.testing import CliRunner

from pacekeeper.controller.actuators.kubernetes_actuators import KubernetesActuators
from pacekeeper.controller.actuators.retries import RetrySettings
from pacekeeper.controller.cli import status as status_module
from pacekeeper.controller.cli.app import app
from pacekeeper.controller.core.ids import JobKey
from pacekeeper.controller.core.policy import Thresholds
from pacekeeper.controller.runtime.reconcile import Reconciler
from pacekeeper.controller.runtime.report_birth import born_object
from pacekeeper.controller.sources.workloads import OwnerRef
from pacekeeper.detector.reporters.kubernetes import KubernetesStatusSink

KEY = JobKey(f"{NAMESPACE}/{JOB}")
INSTALLED_NS = "pacekeeper-system"
"""Where docs/install.md installs the chart."""
POLICY_MAP = "pacekeeper-policy"  # a release named pacekeeper (docs/status.md)
WIDE = {"COLUMNS": "250"}


def _annotate_pods(server: RunningServer, annotations: dict[str, str]) -> None:
    for i in range(len(NODES)):
        pod = server.read("v1", "Pod", f"{JOB}-{i}", NAMESPACE)
        assert pod is not None
        pod["metadata"]["annotations"] = {**pod["metadata"]["annotations"], **annotations}
        server.apply(pod)


def _installed_controller(server: RunningServer) -> None:
    """What the chart leaves in its namespace: the Lease and the policy ConfigMap."""
    server.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": INSTALLED_NS}})
    server.apply({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "pacekeeper-leader", "namespace": INSTALLED_NS},
        "spec": {"holderIdentity": "pk-0", "leaseDurationSeconds": 15},
    })  # fmt: skip
    server.apply({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": POLICY_MAP, "namespace": INSTALLED_NS, "labels": {
            "app.kubernetes.io/part-of": "pacekeeper",
            "app.kubernetes.io/component": "policy",
            "app.kubernetes.io/managed-by": "Helm",
        }},
        "data": {"policy.yaml": POLICY_YAML.format(mode="enforce")},
    })  # fmt: skip


def _decided_world(server: RunningServer, api_client: Any) -> None:
    """The real reconciler, its state in ``pacekeeper-system``, decided about a job whose
    pods chose policy ``gpu`` and lowered the mode to observe."""
    setup_world(server, mode_annotation="observe")  # also makes an empty `pacekeeper` ns
    _annotate_pods(server, {"pacekeeper.dev/policy": "gpu"})
    _installed_controller(server)
    clock = Clock()
    acts = KubernetesActuators(
        api_client, instance="test", settings=RetrySettings(request_timeout_s=1.0),
        sleep=lambda _s: None,
    )  # fmt: skip
    rec = Reconciler(
        api_client, policy("enforce"), namespace=INSTALLED_NS, clock=clock, actuators=acts
    )
    out = sink(api_client)
    for seq in range(4):
        out.send(report(seq, clock(), {5: 0.5}))
        rec.reconcile_job(KEY)
        clock.advance(30.0)


@pytest.fixture
def kc(k8s_server: RunningServer, tmp_path: Path) -> Path:
    return kubeconfig(k8s_server.url, tmp_path / "kubeconfig")


def _json(args: list[str]) -> list[dict[str, Any]]:
    result = CliRunner().invoke(app, [*args, "-o", "json"], env=WIDE)
    assert result.exit_code == 0, result.output
    rows: list[dict[str, Any]] = json.loads(result.stdout)
    return rows


def test_status_finds_the_controller_in_the_namespace_the_chart_was_installed_in(
    k8s_server: RunningServer, k8s_api_client: Any, kc: Path
) -> None:
    _decided_world(k8s_server, k8s_api_client)
    (row,) = _json(["status", "kubernetes", "--kubeconfig", str(kc)])
    assert row["job"] == KEY
    assert row["controller_found"] is True
    assert row["verdict"] in {"act", "hold"}, row  # a decided job, not "no decision yet"
    table = CliRunner().invoke(app, ["status", "kubernetes", "--kubeconfig", str(kc)], env=WIDE)
    assert table.exit_code == 0, table.output
    assert f"controller in {INSTALLED_NS}, found by Lease {INSTALLED_NS}/" in table.output
    assert "no decision yet" not in table.output


def test_status_shows_the_thresholds_of_the_jobs_policy_and_the_annotations_that_chose(
    k8s_server: RunningServer, k8s_api_client: Any, kc: Path
) -> None:
    _decided_world(k8s_server, k8s_api_client)
    (row,) = _json(["status", "kubernetes", "--kubeconfig", str(kc)])
    assert row["policy"] == "gpu"
    assert (row["thresholds"]["act"], row["thresholds"]["recover"]) == (0.75, 0.9)
    assert row["thresholds"]["source"] == f"policy gpu (ConfigMap {INSTALLED_NS}/{POLICY_MAP})"
    assert row["policy_chosen_by"] == "annotation pacekeeper.dev/policy=gpu"
    assert row["mode_chosen_by"] == "annotation pacekeeper.dev/mode=observe"
    assert row["mode"] == "observe"
    assert isinstance(row["report_age_s"], float)  # the test clock runs ahead of now


def test_status_watch_legend_names_the_policy_whose_thresholds_colour_the_heatmap(
    k8s_server: RunningServer, k8s_api_client: Any, kc: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _decided_world(k8s_server, k8s_api_client)

    def interrupt(_s: float) -> None:
        raise KeyboardInterrupt  # Ctrl-C after the first screen

    monkeypatch.setattr(status_module.time, "sleep", interrupt)
    # Typed as docs/status.md types it: no platform, --watch on `status` itself.
    result = CliRunner().invoke(app, ["status", "--watch", "--kubeconfig", str(kc)], env=WIDE)
    assert result.exit_code == 0, result.output
    assert "▓ below 0.9  █ below 0.75" in result.output
    assert f"thresholds of policy gpu (ConfigMap {INSTALLED_NS}/{POLICY_MAP})" in result.output
    assert "by annotation pacekeeper.dev/policy=gpu" in result.output
    assert "by annotation pacekeeper.dev/mode=observe" in result.output


def test_status_without_any_controller_says_so_instead_of_no_decision_yet(
    k8s_server: RunningServer, k8s_api_client: Any, kc: Path
) -> None:
    setup_world(k8s_server, mode_annotation="observe")
    # Made as a controller makes it, by one no longer installed: it left nothing behind.
    k8s_server.apply(born_object(NAMESPACE, JOB, OwnerRef("batch/v1", "Job", JOB, NAMESPACE,
                                                          uid=JOB_OWNER["uid"])))  # fmt: skip
    out = KubernetesStatusSink(namespace=NAMESPACE, name=JOB, incarnation="i",
                               api_client=k8s_api_client)  # fmt: skip
    out.send(report(0, Clock()(), {5: 0.5}))
    (row,) = _json(["status", "kubernetes", "--kubeconfig", str(kc)])
    assert row["controller_found"] is False and row["verdict"] is None
    # No controller's word on it: the pods' own annotation says what holds the mode.
    assert row["mode_chosen_by"] == "annotation pacekeeper.dev/mode=observe"
    defaults = Thresholds()
    assert (row["thresholds"]["act"], row["thresholds"]["recover"]) == (
        defaults.act,
        defaults.recover,
    )
    assert row["thresholds"]["source"].startswith("the policy model's defaults")
    table = CliRunner().invoke(app, ["status", "--kubeconfig", str(kc)], env=WIDE)
    assert table.exit_code == 0, table.output
    text = " ".join(table.output.split())
    assert "no controller state found" in text
    assert "no pacekeeper controller state found (looked for a leader Lease" in text
    assert "pass --controller-namespace" in text
    assert "no decision yet" not in text


def test_options_before_the_platform_apply_to_it(
    k8s_server: RunningServer, k8s_api_client: Any, kc: Path
) -> None:
    _decided_world(k8s_server, k8s_api_client)
    args = ["status", "--controller-namespace", "pacekeeper", "kubernetes", "--kubeconfig"]
    (row,) = _json([*args, str(kc)])
    assert row["controller_found"] is True and row["verdict"] is None  # the empty namespace


def test_job_listing_defaults_to_the_kubeconfig_contexts_namespace(
    k8s_server: RunningServer, k8s_api_client: Any, kc: Path
) -> None:
    _decided_world(k8s_server, k8s_api_client)
    import yaml

    doc = yaml.safe_load(kc.read_text())
    doc["contexts"][0]["context"]["namespace"] = "elsewhere"
    kc.write_text(yaml.safe_dump(doc))
    assert _json(["status", "--kubeconfig", str(kc)]) == []
    assert [r["job"] for r in _json(["status", "--kubeconfig", str(kc), "-A"])] == [KEY]
    assert [r["job"] for r in _json(["status", "--kubeconfig", str(kc), "-n", NAMESPACE])] == [KEY]


def _commands(cmd: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    # Duck-typed: typer builds its commands on its own copy of click.
    if hasattr(cmd, "commands"):
        for name, sub in cmd.commands.items():
            yield from _commands(sub, (*path, name))


def test_help_shows_every_flag_whole_at_80_columns() -> None:
    root = typer.main.get_command(app)
    checked = 0
    for path in _commands(root):
        cmd: Any = root
        for name in path:
            cmd = cmd.commands[name]
        result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80"})
        assert result.exit_code == 0, (path, result.output)
        assert "…" not in result.output, (path, result.output)
        assert max(len(line) for line in result.output.splitlines()) <= 80, path
        for param in cmd.params:
            for flag in [*param.opts, *param.secondary_opts]:
                if flag.startswith("-"):
                    assert flag in result.output, (path, flag)
                    checked += 1
    assert checked > 50


def test_piped_table_keeps_each_cell_on_one_line_for_grep(
    k8s_server: RunningServer, k8s_api_client: Any, kc: Path
) -> None:
    _decided_world(k8s_server, k8s_api_client)
    args = ["status", "kubernetes", "--kubeconfig", str(kc)]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert "by annotation pacekeeper.dev/mode=observe" in result.output, result.output
