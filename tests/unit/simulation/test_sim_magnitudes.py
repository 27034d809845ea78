"""``pacekeeper simulate --fault ... --slowdown ... --count ... --start ...``: a scenario
from magnitudes instead of a name, with errors that name the option."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from pacekeeper.controller.cli.app import app
from pacekeeper.controller.simulation.models import FaultKind, Layout, ModelParams
from pacekeeper.controller.simulation.scenarios import custom_scenario, get_scenario


def test_count_ranks_or_nodes_from_the_given_start() -> None:
    params = ModelParams()
    _, truth = custom_scenario("gpu", 0.15, 3, 300.0).build(64, 900.0, seed=0, params=params)
    (fault,) = truth.faults
    assert fault.kind is FaultKind.SLOW_GPU
    assert len(set(fault.ranks)) == 3 and fault.slowdown == 0.15
    assert fault.start_s == pytest.approx(300.0, abs=params.window_s / 2)
    _, truth = custom_scenario("node", 0.3, 2, None).build(64, 900.0, seed=1, params=params)
    layout = Layout(64, params.gpus_per_node)
    assert len(truth.faulty_nodes(layout)) == 2
    assert len(truth.faulty_ranks) == 2 * params.gpus_per_node


def test_one_rank_draws_as_the_named_scenarios_do() -> None:
    params = ModelParams()
    named = get_scenario("slow-gpu-20").build(64, 900.0, seed=3, params=params)[1]
    custom = custom_scenario("gpu", 0.2, 1, None).build(64, 900.0, seed=3, params=params)[1]
    assert named.faults == custom.faults


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--fault", "disk"], "--fault 'disk'"),
        (["--fault", "gpu", "--slowdown", "0"], "--slowdown 0"),
        (["--fault", "gpu", "--count", "0"], "--count 0"),
        (["--fault", "gpu", "--count", "65"], "--count 65: the job has 64 ranks"),
        (["--fault", "gpu", "--start", "-5"], "--start -5"),
        (["--fault", "gpu", "--start", "900"], "--start 900 is not before the end"),
    ],
)
def test_bad_magnitudes_exit_2_naming_the_option(args: list[str], message: str) -> None:
    res = CliRunner().invoke(app, ["simulate", "--ranks", "64", "--duration", "900", *args])
    assert res.exit_code == 2, res.output
    assert message in " ".join(res.output.split())


def test_the_command_prints_what_it_simulated() -> None:
    res = CliRunner().invoke(
        app,
        ["simulate", "--ranks", "64", "--duration", "900", "--fault", "gpu",
         "--slowdown", "0.5", "--count", "2", "--start", "300"],
    )  # fmt: skip
    out = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert "custom-gpu (2 GPUs 50% slower (slow_gpu) from 300 s)" in out
    assert "from 300s" in out
