"""The per-window sampling rule: under budget, as many traced entries as it allows."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pacekeeper.cupti_ext.sampling import (
    BUDGET,
    ENTRY_COST_S,
    KERNEL_COST_S,
    MAX_SAMPLE_EVERY,
    START_SAMPLE_EVERY,
    next_sample_every,
    sample_every_for,
)


def cost_share(n: int, kernels_per_entry: float, entry_interval_s: float) -> float:
    """Share of wall time spent tracing when one entry in ``n`` is traced."""
    return (ENTRY_COST_S + KERNEL_COST_S * kernels_per_entry) / (n * entry_interval_s)


def test_a_fast_launch_bound_step_is_traced_about_one_time_in_60() -> None:
    # The H200 bench's step: 602 kernels in ~10 ms.
    n = sample_every_for(kernels_per_entry=602, entry_interval_s=0.010)
    assert 55 <= n <= 70
    assert cost_share(n, 602, 0.010) <= BUDGET


def test_a_slow_step_is_traced_every_time() -> None:
    # The simulator's job: ~470 kernels in a 2 s step; tracing them all costs 0.04%.
    assert sample_every_for(kernels_per_entry=470, entry_interval_s=2.0) == 1


def test_a_window_measures_what_a_steady_job_settles_on() -> None:
    # 6,000 entries of 10 ms, one in 32 traced, 602 kernels each.
    n = next_sample_every(
        current=START_SAMPLE_EVERY,
        entries=6000,
        traced_entries=6000 // 32,
        traced_kernels=602 * (6000 // 32),
        elapsed_s=60.0,
    )
    assert n == sample_every_for(kernels_per_entry=602, entry_interval_s=0.010)


def test_a_window_with_nothing_traced_asks_for_about_two_next_time() -> None:
    # 30 slow steps and N = 32: no entry traced, so no cost to go by.
    assert (
        next_sample_every(
            current=32, entries=30, traced_entries=0, traced_kernels=0, elapsed_s=60.0
        )
        == 15
    )
    assert (
        next_sample_every(current=32, entries=1, traced_entries=0, traced_kernels=0, elapsed_s=60.0)
        == 1
    )


def test_an_empty_window_keeps_n() -> None:
    for entries, elapsed in ((0, 60.0), (10, 0.0)):
        assert (
            next_sample_every(
                current=7, entries=entries, traced_entries=0, traced_kernels=0, elapsed_s=elapsed
            )
            == 7
        )


@given(
    kernels=st.floats(0, 1e5),
    interval=st.floats(1e-4, 100.0),
    budget=st.floats(1e-4, 0.05),
)
def test_n_is_the_smallest_that_keeps_tracing_under_budget(kernels, interval, budget) -> None:
    n = sample_every_for(kernels_per_entry=kernels, entry_interval_s=interval, budget=budget)
    assert 1 <= n <= MAX_SAMPLE_EVERY
    if n < MAX_SAMPLE_EVERY:
        assert cost_share(n, kernels, interval) <= budget * (1 + 1e-9)
    if n > 1:
        assert cost_share(n - 1, kernels, interval) > budget * (1 - 1e-9)  # rounding, as above
