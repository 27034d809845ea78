"""`pacekeeper trace import` of PyTorch profiler (Kineto) Chrome traces, one per rank."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pacekeeper.controller.cli.app import app
from pacekeeper.controller.simulation.runner import read_trace
from pacekeeper.controller.traces.kineto import read_kineto
from pacekeeper.controller.traces.parquet import TraceError
from pacekeeper.controller.traces.windows import Role, cut


def _x(name: str, cat: str, ts: float, dur: float, **kw: Any) -> dict[str, Any]:
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": 1, "tid": 1} | kw


def kineto_doc(rank: int, *, slow: float = 1.0, steps: int = 4, nccl: bool = True) -> dict:
    """Steps of 100 ms: a ``forward`` annotation over a GEMM, then an all-reduce that
    waits for the slowest rank (rank 1 computes ``slow`` times longer)."""
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "args": {"name": "python"}},
        _x("aten::empty", "cpu_op", 0.0, 5.0),  # before the first step: set-up
    ]
    gemm_us = 60_000.0
    for s in range(steps):
        t0 = 1_000.0 + s * 100_000.0
        mine = gemm_us * (slow if rank == 1 else 1.0)
        slowest = gemm_us * slow
        events.append(_x(f"ProfilerStep#{10 + s}", "user_annotation", t0, 99_000.0))
        events.append(_x("forward", "user_annotation", t0 + 10.0, mine + 20.0))
        events.append(_x("sm90_xmma_gemm_bf16", "kernel", t0 + 20.0, mine, stream=7))
        comm = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL" if nccl else "c10d::allreduce_"
        cat = "kernel" if nccl else "cpu_op"
        events.append(_x(comm, cat, t0 + 20.0 + mine, slowest - mine + 5_000.0))
    return {
        "schemaVersion": 1,
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 4},
        "traceEvents": events,
    }


def _write(tmp: Path, docs: list[dict[str, Any]], *, gz: bool = False) -> list[Path]:
    paths = []
    for i, doc in enumerate(docs):
        p = tmp / f"worker{i}.pt.trace.json{'.gz' if gz else ''}"
        data = json.dumps(doc).encode()
        p.write_bytes(gzip.compress(data) if gz else data)
        paths.append(p)
    return paths


def test_steps_sections_kernels_and_communication_waits(tmp_path: Path) -> None:
    paths = _write(tmp_path, [kineto_doc(r, slow=1.5) for r in range(4)], gz=True)
    ops, world = read_kineto(paths)
    assert world == 4 and sorted(set(ops.step.tolist())) == [10, 11, 12, 13]
    roles = dict(zip(ops.names, ops.roles, strict=True))
    assert roles["forward"] is Role.SECTION
    assert roles["sm90_xmma_gemm_bf16"] is Role.KERNEL
    assert roles["ncclDevKernel_AllReduce_Sum_bf16_RING_LL"] is Role.WAIT
    assert "aten::empty" not in roles  # before the first step, and not a collective
    trace = cut(ops, steps_per_window=2, world_size=world)
    assert len(trace.windows) == 2
    w = trace.windows[0]
    assert w.summary.section_names == ("forward",) and w.summary.kernel_names == (
        "sm90_xmma_gemm_bf16",
    )
    shares = [p.wait_share for p in w.placements]
    assert shares[1] == min(shares)  # the slow rank waits least: 5 ms of ~100
    assert shares[0] == pytest.approx(35_000 / 99_000, abs=0.01)


def test_gloo_ranks_wait_in_their_cpu_collectives(tmp_path: Path) -> None:
    paths = _write(tmp_path, [kineto_doc(r, slow=1.2, nccl=False) for r in range(2)])
    ops, _ = read_kineto(paths)
    roles = dict(zip(ops.names, ops.roles, strict=True))
    assert roles["c10d::allreduce_"] is Role.WAIT


def test_cli_import_writes_reports_with_coordinates(tmp_path: Path) -> None:
    paths = _write(tmp_path, [kineto_doc(r, slow=1.5, steps=8) for r in range(4)])
    out = tmp_path / "r.jsonl"
    args = ["trace", "import", *map(str, paths), "-o", str(out), "--steps-per-window", "4"]
    res = CliRunner().invoke(app, [*args, "--parallel", "tp=1,dp=2,pp=2", "--job", "k"])
    assert res.exit_code == 0, res.output
    reports = list(read_trace(out))
    assert len(reports) == 2 and reports[0].job.name == "k"
    ranks = reports[-1].ranks
    assert [r.coords for r in ranks][:2] == [
        {"tp": 0, "dp": 0, "pp": 0},
        {"tp": 0, "dp": 1, "pp": 0},
    ]
    worst = min(ranks, key=lambda r: r.gpu_relative or 1.0)
    assert worst.rank == 1 and worst.gpu_relative == pytest.approx(1 / 1.5, rel=0.01)


def test_the_rank_comes_from_the_file_name_without_distributed_info(tmp_path: Path) -> None:
    doc = kineto_doc(0)
    del doc["distributedInfo"]
    p = tmp_path / "trace_rank_3.json"
    p.write_text(json.dumps(doc))
    ops, world = read_kineto([p])
    assert set(ops.rank.tolist()) == {3} and world == 4


def test_bad_files_fail_naming_the_file(tmp_path: Path) -> None:
    p = tmp_path / "x.json"
    p.write_text("{not json")
    with pytest.raises(TraceError, match=r"x\.json: not a Chrome-trace JSON file"):
        read_kineto([p])
    p.write_text(json.dumps({"traceEvents": []}))
    with pytest.raises(TraceError, match="no kernels, annotations or collectives"):
        read_kineto([p])
    twice = _write(tmp_path, [kineto_doc(0), kineto_doc(0)])
    with pytest.raises(TraceError, match="rank 0 again"):
        read_kineto(twice)
