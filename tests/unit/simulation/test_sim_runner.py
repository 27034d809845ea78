"""The runner drives the real scoring and the real decision core; traces replay the same."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from pacekeeper.controller.cli.app import app
from pacekeeper.controller.core.decisions import Reason, Verdict
from pacekeeper.controller.core.policy import ActionKind, load_policy_file
from pacekeeper.controller.simulation.models import Layout
from pacekeeper.controller.simulation.presets import simulation_policy
from pacekeeper.controller.simulation.runner import read_trace, replay, simulate
from pacekeeper.controller.simulation.scenarios import get_scenario


def test_a_fifty_percent_slow_gpu_is_found_and_its_node_would_be_acted_on(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    out = simulate("slow-gpu-50", 32, 900.0, seed=0, trace_path=trace)
    q = out.quality["pacekeeper"]
    assert (q.precision, q.recall) == (1.0, 1.0)
    assert q.time_to_detect_s is not None and q.time_to_detect_s <= 120.0
    (faulty,) = out.truth.faulty_ranks
    node = f"node/node-{faulty // 8:05d}"
    would = [
        d
        for d in out.record.decisions
        if d.reason is Reason.OBSERVE_MODE and d.action is ActionKind.RESTART_RANK
    ]
    assert would and all(d.subject == node for d in would)
    # Dry-run: recorded, never acted.
    assert not [d for d in out.record.decisions if d.verdict is Verdict.ACT]

    # The trace holds one valid ScoreReport per window; replaying it decides the same.
    reports = list(read_trace(trace))
    assert len(reports) == 15
    replayed = [d for _, d in replay(reports, simulation_policy())]
    assert [(d.subject, d.verdict, d.action, d.reason) for d in replayed] == [
        (d.subject, d.verdict, d.action, d.reason) for d in out.record.decisions
    ]


def test_last_pipeline_stage_imbalance_gets_no_hardware_action() -> None:
    out = simulate("imbalance-last-stage", 64, 900.0, seed=1)
    assert out.quality["pacekeeper"].hardware_actions_on_imbalance == 0
    assert out.quality["pacekeeper"].false_actions == 0
    assert out.truth.imbalance


def test_a_bad_trace_line_is_refused_naming_file_and_line(tmp_path: Path) -> None:
    p = tmp_path / "bad.jsonl"
    p.write_text('{"schemaVersion": 1}\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl:1: invalid score report"):
        list(read_trace(p))


def test_cli_simulate_prints_the_table_and_writes_heatmap_and_trace(tmp_path: Path) -> None:
    png, trace = tmp_path / "h.png", tmp_path / "t.jsonl"
    # Three nodes: one slow node of two would be half the job, which the default
    # policy's jobWideFraction (0.5) calls job-wide.
    args = ["simulate", "--scenario", "slow-node-15", "--ranks", "24", "--duration", "600"]
    res = CliRunner().invoke(app, [*args, "--plot", str(png), "--trace", str(trace)])
    assert res.exit_code == 0, res.output
    assert "pacekeeper" in res.output and "nvrx-0.7-gpu" in res.output
    assert png.read_bytes()[:4] == b"\x89PNG"
    policy = tmp_path / "p.yaml"
    policy.write_text(
        "mode: dry-run\npolicies:\n  default:\n    thresholds: {act: 0.9, recover: 0.95}\n"
    )
    res = CliRunner().invoke(app, ["replay", "--policy", str(policy), "--trace", str(trace)])
    assert res.exit_code == 0, res.output
    decided = replay(list(read_trace(trace)), load_policy_file(policy))
    assert f"{len(decided)} decisions under mode dry-run" in " ".join(res.output.split())
    # The default policy judges every score; with the collective wait out of the
    # sections the slow node is the one it would act on, not "job-wide".
    _, truth = get_scenario("slow-node-15").build(24, 600.0, seed=0)
    (node,) = truth.faulty_nodes(Layout(24, 8))
    acted = {d.subject for _, d in decided if d.reason is Reason.OBSERVE_MODE}
    assert acted == {f"node/node-{node:05d}"}


def test_cli_simulate_refuses_an_unknown_scenario_naming_it() -> None:
    res = CliRunner().invoke(app, ["simulate", "--scenario", "nope", "--ranks", "8"])
    assert res.exit_code == 2
    assert "unknown scenario 'nope'" in res.output


def test_cli_replay_refuses_a_dangerous_policy_naming_the_field(tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text("policies:\n  default:\n    thresholds: {act: 0.9}\n")
    trace = tmp_path / "t.jsonl"
    trace.write_text("")
    res = CliRunner().invoke(app, ["replay", "--policy", str(policy), "--trace", str(trace)])
    assert res.exit_code == 2
    assert "thresholds.recover" in res.output
