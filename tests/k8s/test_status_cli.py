"""``pacekeeper status kubernetes`` against the API harness: after the real reconciler
acted on a slow rank, the command shows the job, its worst rank, the verdict and reason,
the marks held and the budget used; ``--watch`` is checked in a real terminal (tmux)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from harness import RunningServer
from operator_world import CONTROLLER_NS, JOB, NAMESPACE, Clock, policy, report, setup_world, sink
from test_operator_process import kubeconfig
from typer.testing import CliRunner

from pacekeeper.controller.actuators.kubernetes_actuators import KubernetesActuators
from pacekeeper.controller.actuators.retries import RetrySettings
from pacekeeper.controller.cli.app import app
from pacekeeper.controller.core.ids import JobKey
from pacekeeper.controller.runtime.reconcile import Reconciler

KEY = JobKey(f"{NAMESPACE}/{JOB}")
SLOW = {5: 0.5}  # rank 5 lives on n1


def _acted_world(server: RunningServer, api_client: Any) -> None:
    setup_world(server)
    clock = Clock()
    acts = KubernetesActuators(
        api_client, instance="test", settings=RetrySettings(request_timeout_s=1.0),
        sleep=lambda _s: None,
    )  # fmt: skip
    rec = Reconciler(
        api_client, policy("enforce"), namespace=CONTROLLER_NS, clock=clock, actuators=acts
    )
    out = sink(api_client)
    for seq in range(16):
        out.send(report(seq, clock(), SLOW))
        rec.reconcile_job(KEY)
        clock.advance(30.0)


def test_status_json_names_worst_rank_verdict_marks_and_budget(
    k8s_server: RunningServer, k8s_api_client: Any, tmp_path: Path
) -> None:
    _acted_world(k8s_server, k8s_api_client)
    kc = kubeconfig(k8s_server.url, tmp_path / "kubeconfig")
    args = [
        "status",
        "kubernetes",
        "--kubeconfig",
        str(kc),
        "--controller-namespace",
        CONTROLLER_NS,
    ]
    result = CliRunner().invoke(app, [*args, "-o", "json"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)  # output mixes in stderr: the harness logs there
    assert row["job"] == KEY
    assert row["ranks"] == 12
    assert row["worst"][0] == {"rank": 5, "node": "n1", "score": 0.5}
    assert row["verdict"] in {"act", "hold"}
    assert row["reason"]
    assert any(m.endswith("on n1") for m in row["marks"]), row["marks"]
    assert row["actions_last_hour"] >= 1
    assert any(lad.startswith("n1: cordonNode") for lad in row["ladders"]), row["ladders"]

    table = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    assert KEY in table.output and "5@n1 0.50" in table.output


def test_status_without_a_reachable_cluster_is_one_line_and_exit_2(tmp_path: Path) -> None:
    kc = kubeconfig("http://127.0.0.1:9", tmp_path / "kubeconfig")
    result = CliRunner().invoke(app, ["status", "kubernetes", "--kubeconfig", str(kc)])
    assert result.exit_code == 2
    assert "cannot read reports or state" in result.output


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_status_watch_draws_table_and_heatmap_in_a_terminal(
    k8s_server: RunningServer, k8s_api_client: Any, tmp_path: Path
) -> None:
    _acted_world(k8s_server, k8s_api_client)
    kc = kubeconfig(k8s_server.url, tmp_path / "kubeconfig")
    session = f"pk-status-{uuid.uuid4().hex[:8]}"
    command = (
        f"{sys.executable} -m pacekeeper.controller.cli status kubernetes --watch "
        f"--interval-s 0.5 --kubeconfig {kc} --controller-namespace {CONTROLLER_NS}"
    )
    env = {**os.environ, "TERM": "xterm-256color"}
    tmux = ["tmux", "-L", session]
    subprocess.run(
        [*tmux, "new-session", "-d", "-s", session, "-x", "160", "-y", "40", command],
        check=True, env=env,
    )  # fmt: skip
    try:
        screen = ""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            screen = subprocess.run(
                [*tmux, "capture-pane", "-p", "-t", session],
                check=True, capture_output=True, text=True,
            ).stdout  # fmt: skip
            if "not measured" in screen and re.search(r" at \d\d:\d\d:\d\d", screen):
                break  # redrawn at least once
            time.sleep(0.3)
        subprocess.run([*tmux, "send-keys", "-t", session, "C-c"], check=False)
    finally:
        subprocess.run([*tmux, "kill-server"], check=False)
    out = os.environ.get("PACEKEEPER_STATUS_SCREEN")
    if out:  # docs/status.md's screen is captured this way
        Path(out).write_text("\n".join(ln.rstrip() for ln in screen.splitlines() if ln.strip()))
    assert KEY in screen, screen
    assert "5@n1" in screen, screen
    assert "█" in screen and "■" in screen, screen  # rank 5 slow, the others at pace
    assert "not measured" in screen, screen
    assert re.search(r" at \d\d:\d\d:\d\d", screen), screen
