"""The scenario sampler: seeds derived from the index (never chosen), the same scenario
every time, every draw inside its range, every family x fault cell in each round."""

from __future__ import annotations

import hashlib
from dataclasses import fields

import pytest

from pacekeeper.controller.simulation import sampler
from pacekeeper.controller.simulation.models import FaultKind


def test_seed_is_the_hash_of_space_and_index() -> None:
    want = int.from_bytes(hashlib.sha256(b"issue38/17").digest()[:8], "big") & ((1 << 63) - 1)
    assert sampler.derive_seed("issue38", 17) == want
    assert sampler.sample("issue38", 17).seed == want
    seeds = {sampler.derive_seed("issue38", i) for i in range(500)}
    assert len(seeds) == 500
    assert sampler.derive_seed("other", 17) != want


def test_the_same_index_gives_the_same_scenario() -> None:
    a, b = sampler.sample("s", 41), sampler.sample("s", 41)
    assert a == b
    assert a.draws == b.draws
    assert a.scenario != sampler.sample("s", 41 + 24).scenario  # same cell, new draws


def test_every_round_covers_every_cell_once() -> None:
    cells = len(sampler.FAMILIES) * len(sampler.FAULTS)
    got = [(s.family, s.fault) for s in (sampler.sample("s", i) for i in range(cells))]
    assert sorted(got) == sorted((f, x) for f in sampler.FAMILIES for x in sampler.FAULTS)


def test_draws_stay_in_their_ranges_and_span_them() -> None:
    seen: dict[str, list[float]] = {}
    for i in range(24 * 40):
        for k, v in sampler.sample("r", i).draws.items():
            lo, hi = sampler.RANGES[k]
            assert lo <= v <= hi, (i, k, v)
            seen.setdefault(k, []).append(v)
    assert set(seen) == set(sampler.RANGES)
    for k, vs in seen.items():
        lo, hi = sampler.RANGES[k]
        # Drawn across the range, not stuck in one corner.
        assert min(vs) < lo + 0.25 * (hi - lo) and max(vs) > hi - 0.4 * (hi - lo), k


def test_ranges_reach_past_the_trace_fit_on_both_sides() -> None:
    fit = sampler.TRACE_FIT
    lo, hi = sampler.RANGES["jitter_cv"]
    assert lo < fit["step_cv"] < hi
    lo, hi = sampler.RANGES["tail_df"]
    assert lo < fit["se_tail_df"] < fit["tail_df"] < hi
    lo, hi = sampler.RANGES["jitter_ar"]
    assert lo < fit["step_lag1"] < hi


def test_faults_are_what_the_issue_asks() -> None:
    for i in range(24 * 10):
        s = sampler.sample("f", i)
        sc = s.scenario
        if s.fault == "healthy":
            assert sc.kind is None
            continue
        assert sc.start_s is not None and sc.start_s % 60 == 0 and sc.start_s >= 300
        if s.fault == "slow-gpu":
            assert sc.kind is FaultKind.SLOW_GPU and sc.slowdown >= 0.10
        elif s.fault == "bursts":
            assert sc.kind is FaultKind.THROTTLING and sc.slowdown == 0.30
            assert (sc.throttle_on_s, sc.throttle_period_s) == (120.0, 360.0)
        else:
            assert sc.kind is FaultKind.SLOW_HOST and not sc.whole_node and sc.count == 1
            assert sc.slowdown * 2.0 >= 0.2  # +0.2 s or more on a 2 s step
        if s.family == "fast-drift":
            assert sc.family is not None and sc.family.drift_amp is not None
            assert sc.family.drift_amp[0] >= 0.01


def test_a_sampled_scenario_builds_and_its_truth_is_one_rank() -> None:
    s = sampler.sample("b", 24 + 7)  # bursty stalls x slow GPU
    sim, truth = s.scenario.build(64, 1200.0, s.seed)
    assert len(truth.faulty_ranks) == 1
    assert sim.next_window().kernel_median_ns.shape[0] == 64
    assert {f.name for f in fields(s.scenario)} >= {"family", "throttle_period_s"}


def test_negative_index_is_refused() -> None:
    with pytest.raises(ValueError, match="index"):
        sampler.sample("s", -1)
