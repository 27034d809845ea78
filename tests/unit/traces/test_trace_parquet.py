"""`pacekeeper trace import` of the artifact's per-operation parquet: windows, topology,
waits, and a backtest that acts on the slowed worker only."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from trace_builders import artifact_columns, write_artifact
from typer.testing import CliRunner

from pacekeeper.controller.cli.app import app
from pacekeeper.controller.core.decisions import Verdict
from pacekeeper.controller.core.policy import ActionKind, parse_policy_document
from pacekeeper.controller.simulation.runner import read_trace, replay
from pacekeeper.controller.traces.parquet import (
    PYARROW_MISSING,
    JobMeta,
    TraceError,
    operations_from_columns,
    read_meta,
    read_parquet,
)
from pacekeeper.controller.traces.reports import trace_reports
from pacekeeper.controller.traces.windows import cut

META = JobMeta(dp=2, pp=2, tp=2, world_size=8)
POLICY = {
    "mode": "enforce",
    "policies": {
        "default": {
            "score": {"kind": "gpuRelative"},
            "persistence": {"consecutiveReports": 2},
            "warmup": {"afterJobStartS": 0, "afterActionS": 0},
            "ladder": {
                "notify": {"enabled": True, "timeoutS": 1},
                "restartRank": {"enabled": True, "timeoutS": 1},
            },
            "budgets": {"nodes": {"maxNodes": 1}, "actionsPerHour": 10},
        }
    },
    "cluster": {"nodes": {"maxNodes": 2}, "actionsPerHour": 10},
}


def test_windows_carry_sections_kernels_coordinates_and_waits_counted_once() -> None:
    ops, coords = operations_from_columns(artifact_columns(steps=8), META)
    assert coords == {
        0: {"dp": 0, "pp": 0, "tp": 0, "cp": 0},
        2: {"dp": 1, "pp": 0, "tp": 0, "cp": 0},
        4: {"dp": 0, "pp": 1, "tp": 0, "cp": 0},
        6: {"dp": 1, "pp": 1, "tp": 0, "cp": 0},
    }
    trace = cut(ops, steps_per_window=4, world_size=8, coords=coords)
    assert trace.rank_ids == (0, 2, 4, 6) and len(trace.windows) == 2
    w = trace.windows[0].summary
    assert w.section_names == ("backward", "forward") == w.kernel_names
    assert np.allclose(w.section_median_s[:, 1], 0.5, rtol=0.02)
    assert (w.section_samples == 4 * 8).all() and (w.kernel_count == 4 * 4).all()
    # Every rank computes 6 s of a 6.2 s step and waits 0.2 s in the reduce-scatter;
    # the batched send and receive span the same interval (zero here): counted once.
    shares = [p.wait_share for p in trace.windows[0].placements]
    assert shares == pytest.approx([0.2 / trace.step_s] * 4, abs=0.01)
    # Windows keep their place in the job: steps 100-103 end at 104 step times.
    assert w.end_s == pytest.approx(104 * trace.step_s)
    assert w.end_s - w.start_s == pytest.approx(4 * trace.step_s, rel=0.01)


def test_a_slow_rank_makes_its_peers_wait_and_waits_least() -> None:
    ops, coords = operations_from_columns(artifact_columns(steps=4, slow={2: 1.5}), META)
    trace = cut(ops, steps_per_window=4, world_size=8, coords=coords)
    placements = trace.windows[0].placements
    shares = dict(zip(trace.rank_ids, (p.wait_share for p in placements), strict=True))
    assert shares[2] == min(shares.values())
    assert all(shares[r] > 0.3 for r in (0, 4, 6))


def test_reports_name_global_ranks_on_their_nodes_with_their_coordinates() -> None:
    ops, coords = operations_from_columns(artifact_columns(steps=8), META)
    trace = cut(ops, steps_per_window=4, world_size=8, coords=coords)
    reports = list(trace_reports(trace, source="parquet", job_name="t", gpus_per_node=4))
    assert [r.sequence for r in reports] == [0, 1]
    first = reports[0]
    assert first.summary.world_size == 8 and [r.rank for r in first.ranks] == [0, 2, 4, 6]
    assert [r.node for r in first.ranks] == ["node-00000"] * 2 + ["node-00001"] * 2
    assert first.ranks[3].coords == {"dp": 1, "pp": 1, "tp": 0, "cp": 0}
    assert first.kernel_timing.backend == "trace"
    assert all(r.gpu_relative is not None and r.wait_share is not None for r in first.ranks)


def test_import_then_replay_acts_on_the_slowed_worker_only(tmp_path: Path) -> None:
    trace, meta = write_artifact(tmp_path, steps=24, slow={2: 2.0})
    out = tmp_path / "reports.jsonl"
    args = ["trace", "import", str(trace), "--meta", str(meta), "-o", str(out)]
    res = CliRunner().invoke(app, [*args, "--steps-per-window", "4", "--gpus-per-node", "2"])
    assert res.exit_code == 0, res.output
    assert "wrote 6 reports (4 ranks of 8" in res.output
    reports = list(read_trace(out))
    assert len(reports) == 6
    decisions = [d for _, d in replay(reports, parse_policy_document(POLICY))]
    acted = [d for d in decisions if d.verdict is Verdict.ACT]
    assert acted and {d.subject for d in acted} == {"node/node-00001"}
    restart = [d for d in acted if d.action is ActionKind.RESTART_RANK]
    assert restart and restart[0].evidence["ranks"] == [2]
    # The CLI's replay reads the same file.
    policy = tmp_path / "p.yaml"
    policy.write_text(__import__("json").dumps(POLICY))
    res = CliRunner().invoke(app, ["replay", "--policy", str(policy), "--trace", str(out)])
    assert res.exit_code == 0 and "restartRank" in res.output


def test_meta_that_does_not_multiply_out_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "meta.yaml"
    bad.write_text("dp_size: 2\npp_size: 2\ntp_size: 2\nworld_size: 16\n")
    with pytest.raises(TraceError, match=r"world_size=16 is not dp x pp x tp x dsp = 8"):
        read_meta(bad)
    bad.write_text("dp_size: two\n")
    with pytest.raises(TraceError, match="dp_size='two' must be a positive integer"):
        read_meta(bad)


def test_without_pyarrow_the_import_fails_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace, meta = write_artifact(tmp_path, steps=2)
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(TraceError) as err:
        read_parquet(trace, read_meta(meta))
    assert str(err.value) == PYARROW_MISSING
    res = CliRunner().invoke(app, ["trace", "import", str(trace), "--meta", str(meta), "-o", "x"])
    assert res.exit_code == 2
    assert res.output.strip().splitlines() == [f"error: {PYARROW_MISSING}"]


def test_a_file_that_is_not_parquet_names_itself(tmp_path: Path) -> None:
    bogus = tmp_path / "trace.parquet"
    bogus.write_text("not parquet")
    meta = tmp_path / "meta.yaml"
    meta.write_text("dp_size: 1\n")
    with pytest.raises(TraceError, match=r"trace\.parquet: cannot read parquet"):
        read_parquet(bogus, read_meta(meta))
