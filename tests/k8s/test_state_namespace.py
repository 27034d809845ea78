"""Issue 40, least privilege: the controller's state lives in a namespace of its own (the
chart's ``state.namespace``), so it writes no ConfigMap beside its policy. Over HTTP to
the API harness: an upgraded controller moves an older release's state there once and
repeats no action; the move is not redone over state written since; ``pacekeeper
status`` finds the state from the controller's namespace."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from born_reports import born
from harness import RunningServer, eventually
from operator_world import (
    CONTROLLER_NS,
    JOB,
    NAMESPACE,
    POLICY_YAML,
    Clock,
    policy,
    report,
    setup_world,
    taints,
)
from test_operator_process import (  # noqa: F401 (publisher: a fixture)
    kubeconfig,
    operator_process,
    publisher,
    stop_all,
)
from test_status_discovery import INSTALLED_NS, WIDE, _annotate_pods, _installed_controller
from typer.testing import CliRunner

from pacekeeper.controller.actuators.kubernetes_actuators import KubernetesActuators
from pacekeeper.controller.actuators.retries import RetrySettings
from pacekeeper.controller.cli.app import app
from pacekeeper.controller.core.ids import JobKey
from pacekeeper.controller.core.marks import TAINT_KEY
from pacekeeper.controller.runtime.reconcile import Reconciler
from pacekeeper.controller.runtime.state_migration import MIGRATION_CONFIGMAP, migrate_state
from pacekeeper.controller.runtime.state_store import (
    CONTROLLER_ANNOTATION,
    DECISIONS_KEY,
    STATE_CONFIGMAP,
    job_state_name,
)
from pacekeeper.detector.reporters.kubernetes import KubernetesStatusSink

KEY = JobKey(f"{NAMESPACE}/{JOB}")
STATE_NS = f"{CONTROLLER_NS}-state"
# Notify, then the taint at once; the cordon not within the test (the taint's timeout).
LADDER_POLICY = (
    POLICY_YAML.replace("notify: {{enabled: true, timeoutS: 60}}",
                        "notify: {{enabled: true, timeoutS: 1}}")
    .replace("holdS: 60", "holdS: 1")
)  # fmt: skip


def _namespace(server: RunningServer, name: str) -> None:
    server.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


def _acts(log: Path) -> list[str]:
    """``act <action>`` of every act decision one process logged, in order."""
    out = []
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            summary = str(json.loads(line).get("summary") or "")
            acts = [p for p in summary.split(": ")[1:] if p.startswith("act ")]
            out += [" ".join(p.split()[:2]) for p in acts]
    return out


def _versions_seen(server: RunningServer, namespace: str, name: str, seen: set[str]) -> int:
    cm = server.read("v1", "ConfigMap", name, namespace)
    if cm is not None:
        seen.add(str(cm["metadata"]["resourceVersion"]))
    return len(seen)


@pytest.mark.slow
@pytest.mark.usefixtures("publisher")  # rank 5 slow in every report, one each 0.3 s
def test_an_upgrade_moves_the_state_and_repeats_no_action(
    k8s_server: RunningServer, tmp_path: Path
) -> None:
    """An older release notified and tainted with its state in its own namespace; the
    upgraded controller (state namespace, ``--migrate-state-from``) takes that state over
    before it acts: no second notify, no second taint, the ladder goes on where it was."""
    _namespace(k8s_server, STATE_NS)
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(LADDER_POLICY.format(mode="enforce"))
    kc = kubeconfig(k8s_server.url, tmp_path / "kubeconfig")
    old_log, new_log = tmp_path / "old.log", tmp_path / "new.log"
    old = operator_process(policy_file, kc, "old", old_log)
    try:
        eventually(lambda: taints(k8s_server, "n1"), timeout_s=60)
    finally:
        stop_all([old])
    assert _acts(old_log) == ["act notify", "act taintNode"]
    assert k8s_server.read("v1", "ConfigMap", STATE_CONFIGMAP, CONTROLLER_NS) is not None

    mark = len(k8s_server.history)
    new = operator_process(
        policy_file, kc, "new", new_log,
        ["--state-namespace", STATE_NS, "--migrate-state-from", CONTROLLER_NS],
    )  # fmt: skip
    job_map = job_state_name(KEY)
    seen: set[str] = set()
    try:
        # Reconciles of the new controller: its job map written again and again.
        eventually(lambda: _versions_seen(k8s_server, STATE_NS, job_map, seen) >= 4,
                   timeout_s=60)  # fmt: skip
    finally:
        stop_all([new])
    assert _acts(new_log) == [], "the upgraded controller repeated an action"
    assert '"msg": "state moved to the state namespace"' in new_log.read_text()
    assert [t["key"] for t in taints(k8s_server, "n1")] == [TAINT_KEY]
    patches = k8s_server.history.find(verb="patch", plural="nodes", name="n1", status=200)
    assert len(patches) == 1, "one taint, by the old controller"
    moved = k8s_server.read("v1", "ConfigMap", job_map, STATE_NS)
    records = json.loads(moved["data"][DECISIONS_KEY])
    assert [r["action"] for r in records if r["verdict"] == "act"] == ["notify", "taintNode"]
    assert moved["metadata"]["annotations"][CONTROLLER_ANNOTATION] == CONTROLLER_NS
    # Every write of the new controller went to the state namespace; the old maps were
    # only read.
    writes = [
        (w.verb, w.name) for w in k8s_server.history.records[mark:]
        if w.plural == "configmaps" and w.namespace != STATE_NS
        and w.verb not in (None, "get", "list", "watch")
    ]  # fmt: skip
    assert writes == []


def test_the_move_is_made_once_and_keeps_what_the_state_namespace_holds(
    k8s_server: RunningServer, k8s_api_client: Any
) -> None:
    """A move cut short is finished without overwriting what it already copied; once its
    marker is written, state deleted since (a job's report gone) never comes back from
    the old copy."""
    setup_world(k8s_server)
    _namespace(k8s_server, STATE_NS)
    born(k8s_api_client, NAMESPACE, JOB, controller_ns=CONTROLLER_NS)
    job_map = job_state_name(KEY)
    old = k8s_server.read("v1", "ConfigMap", job_map, CONTROLLER_NS)
    assert old is not None
    newer = {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": job_map, "namespace": STATE_NS, "labels": old["metadata"]["labels"]},
        "data": {**old["data"], DECISIONS_KEY: "[]", "note": "written after a first attempt"},
    }  # fmt: skip
    k8s_server.apply(newer)
    now = datetime.now(UTC)
    moved = migrate_state(k8s_api_client, source=CONTROLLER_NS, target=STATE_NS,
                          controller_namespace=CONTROLLER_NS, now=now)  # fmt: skip
    assert moved.kept == (job_map,)
    assert k8s_server.read("v1", "ConfigMap", job_map, STATE_NS)["data"]["note"]
    assert k8s_server.read("v1", "ConfigMap", MIGRATION_CONFIGMAP, STATE_NS) is not None

    k8s_server.delete("v1", "ConfigMap", job_map, namespace=STATE_NS)
    again = migrate_state(k8s_api_client, source=CONTROLLER_NS, target=STATE_NS,
                          controller_namespace=CONTROLLER_NS, now=now)  # fmt: skip
    assert again.done_before
    assert k8s_server.read("v1", "ConfigMap", job_map, STATE_NS) is None


def test_status_finds_the_state_in_the_namespace_its_controller_keeps_it(
    k8s_server: RunningServer, k8s_api_client: Any, tmp_path: Path
) -> None:
    """The chart's layout: Lease and policy in the release namespace, state in its own.
    ``status`` shows the decisions kept there, found from the controller's namespace."""
    state_ns = f"{INSTALLED_NS}-state"
    setup_world(k8s_server, mode_annotation="observe")
    _annotate_pods(k8s_server, {"pacekeeper.dev/policy": "gpu"})
    _installed_controller(k8s_server)
    _namespace(k8s_server, state_ns)
    clock = Clock()
    acts = KubernetesActuators(
        k8s_api_client, instance="test", settings=RetrySettings(request_timeout_s=1.0),
        sleep=lambda _s: None,
    )  # fmt: skip
    rec = Reconciler(k8s_api_client, policy("enforce"), namespace=INSTALLED_NS,
                     state_namespace=state_ns, clock=clock, actuators=acts)  # fmt: skip
    # The report as this controller made it: its record in the state namespace.
    born(k8s_api_client, NAMESPACE, JOB, controller_ns=state_ns)
    out = KubernetesStatusSink(namespace=NAMESPACE, name=JOB, incarnation="inc-1",
                               api_client=k8s_api_client, pod_name=f"{JOB}-0")  # fmt: skip
    for seq in range(4):
        out.send(report(seq, clock(), {5: 0.5}))
        rec.reconcile_job(KEY)
        clock.advance(30.0)
    assert k8s_server.read("v1", "ConfigMap", job_state_name(KEY), state_ns) is not None
    assert k8s_server.read("v1", "ConfigMap", job_state_name(KEY), INSTALLED_NS) is None

    kc = kubeconfig(k8s_server.url, tmp_path / "kubeconfig")
    for extra in ([], ["--controller-namespace", INSTALLED_NS]):
        args = ["status", "kubernetes", "--kubeconfig", str(kc), *extra]
        result = CliRunner().invoke(app, [*args, "-o", "json"], env=WIDE)
        assert result.exit_code == 0, result.output
        (row,) = json.loads(result.stdout)
        assert row["verdict"] in {"act", "hold"}, row  # decided, not "no decision yet"
        table = CliRunner().invoke(app, args, env=WIDE)
        assert f"controller in {INSTALLED_NS}, state in {state_ns}" in table.output
