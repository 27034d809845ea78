"""CUPTI shared with other tools, on a real GPU: two backends as two subscribers of CUPTI's
per-subscriber API each count every kernel, and torch.profiler (a single-subscriber
client) gets every kernel beside a shared backend, which takes CUPTI up again after it.

Each scenario runs in a fresh process: once a single-subscriber client (torch.profiler,
or a backend on the single API) has used CUPTI in a process, CUPTI refuses several
subscribers there. Needs a CUPTI with the per-subscriber API (13.4 and later; the lent
H200 image has 13.0): run with one carried and preloaded, ``bash bench/device_gpu.sh
cupti134``. Elsewhere the tests skip with the reason."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

STEPS = 20
_HERE = Path(__file__).parent


def _run(scenario: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, __file__, scenario],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        cwd=_HERE,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert proc.returncode == 0 and lines, (proc.stdout + proc.stderr)[-3000:]
    result: dict[str, Any] = json.loads(lines[-1])
    if "skip" in result:
        pytest.skip(result["skip"])
    return result


def test_two_subscribers_each_count_every_kernel():
    r = _run("two")
    assert r["records"] == [7 * STEPS, 7 * STEPS]
    assert r["dropped"] == [0, 0] and r["failures"] == [{}, {}]


def test_torch_profiler_gets_every_kernel_and_timing_resumes_after():
    r = _run("profiler")
    assert r["before"] == 14
    assert r["paused"] and r["profiler_kernels"] == 35  # ours had stepped aside
    assert r["during"] == 0
    assert r["after"] == 7 * STEPS and not r["paused_after"]
    assert "resume" not in r["failures"]
    print("sharing after the profiler:", r["sharing_after"])


def _scenario(name: str) -> dict[str, Any]:
    import torch
    from workloads import add_kernels, mul_kernels

    from pacekeeper.cupti_ext import CuptiBackend

    x = torch.randn(1 << 20, device="cuda")
    torch.cuda.synchronize()  # a detector starts after the model: a context exists

    def backend() -> CuptiBackend:
        return CuptiBackend(sample_every=1, attribution="gated")

    def steps(backends: list[CuptiBackend], n: int = STEPS) -> None:
        for _ in range(n):
            for b in backends:
                b.start("step")
            add_kernels(x, 4)
            mul_kernels(x, 3)
            for b in reversed(backends):
                b.stop("step")
        torch.cuda.synchronize()

    first = backend()
    if first.sharing != "shared":
        return {"skip": f"this CUPTI ({first.cupti_version}) is not shared here: needs 13.4+"}
    if name == "two":
        other = backend()
        steps([first, other])
        windows = [first.collect(), other.collect()]
        out = {
            "sharing": [first.sharing, other.sharing],
            "records": [w.records for w in windows],
            "dropped": [w.dropped_records for w in windows],
            "failures": [first.failures, other.failures],
        }
        other.shutdown()
        first.shutdown()
        return out
    from torch.profiler import ProfilerActivity, profile

    steps([first], 2)
    out = {"before": first.collect().records}
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        steps([first], 5)
        out["paused"] = first.paused
    out["profiler_kernels"] = sum(
        1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
    )
    out["during"] = first.collect().records
    steps([first])
    out["after"] = first.collect().records
    out.update(paused_after=first.paused, sharing_after=first.sharing, failures=first.failures)
    first.shutdown()
    return out


if __name__ == "__main__":
    print(json.dumps(_scenario(sys.argv[1])))
