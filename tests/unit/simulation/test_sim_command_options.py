"""``simulate``'s new scenarios and model options, through the CLI and the command body."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from pacekeeper.controller.cli.app import app
from pacekeeper.controller.simulation.commands import simulate_command
from pacekeeper.controller.simulation.scenarios import ISSUE_18_SCENARIOS


def _said(res_output: str) -> str:
    return " ".join(res_output.split())


def test_a_host_fault_from_the_job_start_runs_from_the_cli() -> None:
    res = CliRunner().invoke(
        app,
        ["simulate", "--ranks", "16", "--duration", "600", "--fault", "host",
         "--slowdown", "0.1", "--start", "0"],
    )  # fmt: skip
    out = _said(res.output)
    assert res.exit_code == 0, res.output
    assert "custom-host (1 node 10% slower (slow_host) from 0 s)" in out
    assert "from 0s" in out


def test_named_restart_scenario_prints_its_restart_and_incarnations() -> None:
    res = CliRunner().invoke(
        app,
        ["simulate", "--scenario", "slow-gpu-10-restart", "--ranks", "16", "--duration", "1800"],
    )
    out = _said(res.output)
    assert res.exit_code == 0, res.output
    assert "restarts at 900s: incarnations" in out and ".r0 -> " in out and ".r1" in out
    assert "found only if named again after the restart at 900s" in out


def test_options_on_top_of_a_scenario_reach_the_run(capsys: pytest.CaptureFixture[str]) -> None:
    code = simulate_command(
        "slow-gpu-20", 16, 900.0, 0, ramp_s=300.0, jitter_scale=2.0, restart_at_s=(600.0,)
    )
    out = _said(capsys.readouterr().out)
    assert code == 0, out
    assert "ramping in over 300 s" in out and "jitter x2" in out
    assert "restarts at 600s" in out
    assert "the fault counts from" in out


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"restart_at_s": (900.0,)}, "--restart-at 900 is not before the end"),
        ({"ramp_s": -1.0}, "--ramp -1"),
        ({"drift_scale": 1000.0}, "--drift-scale 1000"),
    ],
)
def test_bad_options_exit_2_naming_the_option(
    kwargs: dict[str, object], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = simulate_command("slow-gpu-20", 16, 900.0, 0, **kwargs)  # type: ignore[arg-type]
    assert code == 2
    assert message in _said(capsys.readouterr().out)


def test_every_new_scenario_is_in_the_simulator_docs_scenario_table() -> None:
    doc = (Path(__file__).resolve().parents[3] / "docs" / "simulator.md").read_text()
    rows = [line for line in doc.splitlines() if line.startswith("| `")]
    missing = [n for n in ISSUE_18_SCENARIOS if not any(f"`{n}`" in r for r in rows)]
    assert missing == []
