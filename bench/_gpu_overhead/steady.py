"""The steady state of a running job from the parts modes' samples: each traced
entry's hook times and each buffer callback's time, with what the bench's blocks pay
once per flush taken out (``steady_parts``). Pure arithmetic on plain tuples, apart
from the mode that collects them so tests/unit/bench checks it on the CPU."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class StepSample(NamedTuple):
    block: int
    enter_ns: int
    exit_ns: int
    traced: bool


class CallbackSample(NamedTuple):
    block: int
    wall_ns: int
    records: int
    in_flush: bool


def steady_parts(steps: list[StepSample], callbacks: list[CallbackSample]) -> dict[str, float]:
    """Our added time per step as a running job pays it, from the parts timed in place.

    Two things the bench's blocks pay that a job pays once per report are taken out:
    the first traced entry after a forced flush (its first marker takes ~1-1.5 ms on the
    H200; it is replaced by the median of the other traced entries), and the fixed
    handling of the partial buffers each block's flush hands over (records are charged at
    what they cost in buffers handed over between flushes, where there are any).
    """
    if not steps:
        return {}
    cost = np.array([s.enter_ns + s.exit_ns for s in steps], np.float64)
    traced = np.array([s.traced for s in steps])
    first = np.zeros(len(steps), np.bool_)
    seen: set[int] = set()
    for i, s in enumerate(steps):
        if s.traced and s.block not in seen:
            seen.add(s.block)
            first[i] = True
    regular = traced & ~first
    typical = float(np.median(cost[regular])) if regular.any() else float("nan")
    steady_cost = cost.copy()
    if regular.any():
        steady_cost[first] = typical
    records = sum(c.records for c in callbacks)
    between = [c for c in callbacks if not c.in_flush and c.records]
    basis = between or [c for c in callbacks if c.records]
    per_record = sum(c.wall_ns for c in basis) / sum(c.records for c in basis) if basis else 0.0
    hooks_us = float(steady_cost.mean()) / 1e3
    callback_us = per_record * records / len(steps) / 1e3
    return {
        "hooks_us": hooks_us,
        "callback_us": callback_us,
        "added_us": hooks_us + callback_us,
        "traced_share": float(traced.mean()),
        "traced_entry_us": typical / 1e3,
        "first_after_flush_us": float(np.median(cost[first])) / 1e3 if first.any() else 0.0,
        "callback_ns_per_record": per_record,
        "per_record_from": 1.0 if between else 0.0,
    }
