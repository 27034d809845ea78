"""The GPU bench's steady-state estimate from parts timed in place (pure arithmetic,
so it is checked here; the parts themselves are timed on the H200)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench" / "_gpu_overhead" / "steady.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("gpu_overhead_steady", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_first_traced_entry_after_a_flush_counts_as_a_regular_one(bench):
    step = bench.StepSample
    steps = []
    for block in range(3):
        steps.append(step(block, 1_000_000, 500_000, True))  # once per flush: 1.5 ms
        steps += [step(block, 20_000, 30_000, True) for _ in range(9)]  # 50 us each
    out = bench.steady_parts(steps, [])
    assert out["hooks_us"] == pytest.approx(50.0)
    assert out["first_after_flush_us"] == pytest.approx(1500.0)
    assert out["traced_entry_us"] == pytest.approx(50.0)
    assert out["callback_us"] == 0.0 and out["traced_share"] == 1.0


def test_records_are_charged_at_what_they_cost_between_flushes(bench):
    step, cb = bench.StepSample, bench.CallbackSample
    steps = [step(0, 1_000, 1_000, i % 4 == 0) for i in range(40)]
    callbacks = [
        cb(0, 2_000_000, 20_000, False),  # a full buffer: 100 ns per record
        cb(0, 900_000, 3_000, True),  # the flush's partial buffers: fixed cost on top
        cb(0, 300_000, 10, True),
    ]
    out = bench.steady_parts(steps, callbacks)
    assert out["callback_ns_per_record"] == pytest.approx(100.0)
    assert out["callback_us"] == pytest.approx(100.0 * 23_010 / 40 / 1e3)
    assert out["per_record_from"] == 1.0
    # Without a buffer handed over between flushes, the flush's ones set the price.
    only_flush = bench.steady_parts(steps, callbacks[1:])
    assert only_flush["callback_ns_per_record"] == pytest.approx(1_200_000 / 3_010)
    assert only_flush["per_record_from"] == 0.0


def test_untraced_steps_keep_their_own_cost_and_nothing_traced_gives_nan(bench):
    step = bench.StepSample
    steps = [step(0, 3_000, 2_000, False) for _ in range(10)]
    out = bench.steady_parts(steps, [])
    assert out["hooks_us"] == pytest.approx(5.0)
    assert math.isnan(out["traced_entry_us"]) and out["first_after_flush_us"] == 0.0
    assert bench.steady_parts([], []) == {}
