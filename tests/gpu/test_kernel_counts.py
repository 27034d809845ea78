"""Every report window counts exactly the kernels torch launched in its traced sections,
over long runs, in every set-up issue 19 found or asked for: pinned to one core and not,
with and without a world-of-one NCCL group, each marker mode (``api`` with the detector
started before the CUDA context), and with gated attribution; and torch.profiler, plain
or scheduled, gets every kernel while we step aside, after which records flow again in
both marker modes.

Each set-up runs in a fresh process (kernel_count_runs.py), all of them side by side.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

_HERE = Path(__file__).parent
_COUNT_CASES = [
    (marker, pinned, nccl, body)
    for marker in ("memset", "driver", "api")
    for pinned in (True, False)
    for nccl in (False, True)
    for body in ("add", "model")
]
"""``add``: 800 adds launched on the thread that marks the section; ``model``: forward
and backward of 133 linear layers, backward's kernels launched by autograd's thread
(CUPTI buffers records per thread, so those come in other buffers than the markers)."""
_GATED_CASES = [
    (marker, pinned, nccl, body)
    for marker in ("memset", "api")
    for pinned in (True, False)
    for nccl in (False, True)
    for body in ("add", "model")
]
"""The same windows with gated attribution (records on inside entries alone, no section
markers; ``PACEKEEPER_KERNEL_ATTRIBUTION=gated``, the detector's default), the marker
mode's fences: memset, and api with the detector started before the CUDA context."""
_PROFILER_CASES = [
    (marker, attribution) for attribution in ("markers", "gated") for marker in ("memset", "api")
]
_PARALLEL = 8


def _case_id(marker: str, pinned: bool, nccl: bool, body: str) -> str:
    return f"{marker}-{'pinned' if pinned else 'free'}-{'nccl' if nccl else 'alone'}-{body}"


def _command(  # noqa: PLR0917
    scenario: str,
    marker: str,
    core: int,
    nccl: bool,
    port: int,
    body: str = "add",
    attribution: str = "markers",
) -> list[str]:
    # ``api`` markers: the detector started before any CUDA context (auto falls back).
    before = marker == "api"
    cmd = [sys.executable, str(_HERE / "kernel_count_runs.py"), "--scenario", scenario]
    cmd += ["--marker", "auto" if before else marker, "--core", str(core), "--port", str(port)]
    cmd += ["--body", body, "--attribution", attribution]
    return cmd + (["--before-context"] if before else []) + (["--nccl"] if nccl else [])


@pytest.fixture(scope="module")
def runs() -> dict[str, Any]:
    """Every set-up's result, by case id (the runs go side by side, ``_PARALLEL`` at once)."""
    jobs: dict[str, list[str]] = {}
    cores = sorted(os.sched_getaffinity(0))
    for i, (marker, pinned, nccl, body) in enumerate(_COUNT_CASES):
        core = cores[(i + 1) % len(cores)] if pinned else -1
        case = _case_id(marker, pinned, nccl, body)
        jobs[case] = _command("counts", marker, core, nccl, 29600 + i, body)
    for i, (marker, pinned, nccl, body) in enumerate(_GATED_CASES):
        core = cores[(i + 2) % len(cores)] if pinned else -1
        case = "gated-" + _case_id(marker, pinned, nccl, body)
        jobs[case] = _command("counts", marker, core, nccl, 29800 + i, body, "gated")
    for i, (marker, attribution) in enumerate(_PROFILER_CASES):
        jobs[f"profiler-{attribution}-{marker}"] = _command(
            "profiler", marker, -1, False, 29700 + i, attribution=attribution
        )
    results: dict[str, Any] = {}
    pending = list(jobs.items())
    live: dict[str, subprocess.Popen[str]] = {}
    while pending or live:
        while pending and len(live) < _PARALLEL:
            name, cmd = pending.pop(0)
            live[name] = subprocess.Popen(
                cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=_HERE
            )
        name = next(iter(live))
        proc = live.pop(name)
        out, _ = proc.communicate(timeout=300)
        lines = [ln for ln in out.splitlines() if ln.startswith("{")]
        results[name] = json.loads(lines[-1]) if proc.returncode == 0 and lines else {"out": out}
        print(name, json.dumps(results[name])[:4000])  # the log keeps every figure
    return results


def _expected(result: dict[str, Any], steps: int) -> int:
    per = result["per_step"]
    return steps * (per["kernels"] - per["comm"])


@pytest.mark.parametrize(("marker", "pinned", "nccl", "body"), _COUNT_CASES, ids=str)
def test_each_window_counts_every_kernel_torch_launched(runs, marker, pinned, nccl, body):
    result = runs[_case_id(marker, pinned, nccl, body)]
    assert "windows" in result, result.get("out", "")[-3000:]
    assert result["marker_mode"] == marker
    if body == "add":
        assert result["per_step"]["kernels"] - result["per_step"]["comm"] == 800
    for w in result["windows"]:
        counts = (w["attributed"], w["unattributed"], w["held"], w["dropped"], w["lost_markers"])
        assert counts == (_expected(result, w["steps"]), 0, 0, 0, 0), w
    assert "fence" not in result["failures"], result["failures"]


@pytest.mark.parametrize(("marker", "pinned", "nccl", "body"), _GATED_CASES, ids=str)
def test_gated_windows_count_every_kernel_torch_launched(runs, marker, pinned, nccl, body):
    result = runs["gated-" + _case_id(marker, pinned, nccl, body)]
    assert "windows" in result, result.get("out", "")[-3000:]
    assert (result["attribution"], result["marker_mode"]) == ("gated", marker)
    for w in result["windows"]:
        counts = (w["attributed"], w["unattributed"], w["held"], w["dropped"], w["lost_markers"])
        assert counts == (_expected(result, w["steps"]), 0, 0, 0, 0), w
    assert result["failures"] == {}, result["failures"]


@pytest.mark.parametrize(("marker", "attribution"), _PROFILER_CASES, ids=str)
def test_profilers_get_every_kernel_and_records_flow_again_after(runs, marker, attribution):
    result = runs[f"profiler-{attribution}-{marker}"]
    assert "windows" in result, result.get("out", "")[-3000:]
    assert (result["marker_mode"], result["attribution"]) == (marker, attribution)
    per_step = result["per_step"]["kernels"]
    assert result["plain_profiler"][0] == result["plain_profiler_steps"] * per_step
    cycles = [kernels for kernels, _ in result["scheduled_profiler"]]
    assert cycles == [result["scheduled_profiler_steps"] * per_step] * 2
    for w in result["windows"]:
        if "during" in w:
            continue
        counts = (w["attributed"], w["unattributed"], w["held"], w["dropped"], w["lost_markers"])
        assert counts == (_expected(result, w["steps"]), 0, 0, 0, 0), w
    assert result["failures"] == {}, result["failures"]
    assert max(w["report_ms"] for w in result["windows"]) < 200  # no fence timeouts
