"""Which outermost section entries get their kernels traced: a pure rule per window.

Tracing costs per traced entry a fixed part (switching records on and off, two
markers) and a part per kernel (CUPTI's record and ours), both measured on the H200
(docs/performance.md). A fixed "one entry in N" cannot suit every job: one N that keeps
a 10 ms launch-bound step under budget leaves a 2 s step with under one traced step per
60 s window, so its GPU score would come and go. So N is chosen each window from what
the last one cost: the largest share of entries that keeps tracing under ``budget`` of
wall time, given the kernels per traced entry and the entry rate just seen. Slow steps
end up traced every time, fast launch-bound steps one in ~40.

Nothing here touches CUPTI or a clock; the backend feeds it counts, and the simulator
applies the same rule to its jobs (controller/simulation), so the detection-quality
benchmark runs at the sampling a real job would get.
"""

from __future__ import annotations

import math

BUDGET = 0.002
"""Target share of wall time spent on kernel tracing (0.2%). The cost model below reads
low: at 0.3% the rule chose N = 41 on the H200's launch-bound step and the step took
0.39% longer (95% interval 0.26-0.51%, per-step interleaving, docs/performance.md);
0.2% keeps the goal of 0.5% clear of that interval."""
ENTRY_COST_S = 220e-6
"""Fixed cost of a traced entry among untraced ones on the training thread (start +
stop, memset markers): records switched on after being off for a while cost more than
when switched every entry: start 123-176 us and stop 62-98 us (means, H200 runs H-J;
21 + 38 us when every entry is traced)."""
KERNEL_COST_S = 1.7e-6
"""Cost of tracing one kernel: CUPTI's record and ours (1.5-1.7 us per kernel at
interval 1 on the H200's launch-bound step)."""
SWITCH_COST_S = 20e-6
"""Switching kernel and memset records on and off once, in a busy launch stream (four
CUPTI calls, 4-7 us each on the H200)."""
START_SAMPLE_EVERY = 32
"""N for the first window, before anything was measured."""
MAX_SAMPLE_EVERY = 1024


def next_sample_every(
    *,
    current: int,
    entries: int,
    traced_entries: int,
    traced_kernels: int,
    elapsed_s: float,
    budget: float = BUDGET,
) -> int:
    """N for the next window, from this window's outermost entries (all, and traced),
    the kernels traced in them, and the window's wall time."""
    if entries <= 0 or elapsed_s <= 0:
        return current  # nothing to learn from
    if traced_entries <= 0:
        # Fewer entries than N: none traced, so no cost measured. Trace about two per
        # window next time; their cost then sets N.
        return max(1, min(current, entries // 2))
    per_entry_s = ENTRY_COST_S + KERNEL_COST_S * traced_kernels / traced_entries
    cost_if_all = per_entry_s * entries / elapsed_s
    return int(min(MAX_SAMPLE_EVERY, max(1, math.ceil(cost_if_all / budget))))


def keep_records_on(*, outside_kernels: int, traced_entries: int) -> bool:
    """Whether records may stay on between traced entries when every entry is traced.

    Left on, the kernels launched between entries are traced too (and then not counted,
    being in no section); switched per entry, every entry pays the switch. Keep them on
    while tracing what ran outside cost less than the switches it saved."""
    return outside_kernels * KERNEL_COST_S <= traced_entries * SWITCH_COST_S


def fixed_sample_every(*, interval_given: bool, env_value: int | None) -> int | None:
    """N fixed at start, or None for the per-window rule.

    ``PACEKEEPER_KERNEL_SAMPLE_EVERY=N`` fixes N. Otherwise a ``profiling_interval``
    the user gave (a drop-in NVRx user's choice of cadence) is honoured exactly, as
    NVRx does: every entry the detector profiles is traced (N = 1). Left at its
    default, the rule picks N per window (issue 19: ``profiling_interval=1`` alone had
    traced one entry in 32)."""
    if env_value is not None:
        return env_value
    return 1 if interval_given else None


def sample_every_for(
    *, kernels_per_entry: float, entry_interval_s: float, budget: float = BUDGET
) -> int:
    """The N the rule settles on for a steady job (one entry every ``entry_interval_s``
    with ``kernels_per_entry`` kernels each)."""
    per_entry_s = ENTRY_COST_S + KERNEL_COST_S * kernels_per_entry
    return int(min(MAX_SAMPLE_EVERY, max(1, math.ceil(per_entry_s / entry_interval_s / budget))))


__all__ = [
    "BUDGET",
    "ENTRY_COST_S",
    "KERNEL_COST_S",
    "MAX_SAMPLE_EVERY",
    "START_SAMPLE_EVERY",
    "SWITCH_COST_S",
    "fixed_sample_every",
    "keep_records_on",
    "next_sample_every",
    "sample_every_for",
]
