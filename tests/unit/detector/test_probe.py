"""The confirmation probe on a CPU-only rank: identical host work, timed, as a
throughput; the wire form the report carries.

Run in a child process: the probe's matrix products start the BLAS thread pool, and a
test process that later forks gloo ranks (tests/multiprocess) would hand them a pool
that cannot run in the child."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pacekeeper.detector import probe

_CHILD = """
import itertools, json, sys
from pacekeeper.detector import probe
out = {"plain": probe.run("req-1").to_wire()}
for step in (0.001, 0.002):
    ticks = itertools.count()
    probe.time.perf_counter = lambda t=ticks, s=step: next(t) * s
    out[str(step)] = probe.run("a").cpu_gflops
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def probed() -> dict:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=120, check=True
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_a_cpu_rank_probes_its_host_and_says_so(probed: dict) -> None:
    wire = probed["plain"]
    assert wire["id"] == "req-1" and wire["device"] == "cpu" and wire["cpuGflops"] > 0
    assert "gemmTflops" not in wire and "memoryGbps" not in wire
    assert 0 < wire["elapsedMs"] < probe.DEFAULT_BUDGET_MS * 5


def test_the_rate_is_the_fixed_work_over_the_time_it_took(probed: dict) -> None:
    """A host twice as slow reads half the rate: the work is fixed, only time varies
    (the GPU test shows it on a real GPU under a competing workload)."""
    work = 2.0 * probe._CPU_N**3 * probe._CPU_REPS
    assert probed["0.001"] == pytest.approx(work / 0.001 / 1e9)
    assert probed["0.002"] == pytest.approx(probed["0.001"] / 2)
