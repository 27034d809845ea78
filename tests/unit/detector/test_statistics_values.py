"""The section statistics' numbers (``timings``), checked by value: the ring's capacity,
length and samples, the dtype of a drain, and the list summary on both sides of the
size where it hands over to numpy. Written against mutants the torch comparison lets
through (docs/testing.md, "Mutation testing")."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from pacekeeper.detector.timings import FEW_SAMPLES, RingBuffer, summarize_list, summarize_ns


@pytest.mark.parametrize(
    ("asked", "capacity"), [(1, 1), (2, 2), (3, 4), (4, 4), (5, 8), (8, 8), (9, 16)]
)
def test_capacity_is_the_next_power_of_two(asked: int, capacity: int) -> None:
    assert RingBuffer(asked).capacity == capacity


@pytest.mark.parametrize("capacity", [0, -3])
def test_a_capacity_under_one_is_refused_by_name(capacity: int) -> None:
    with pytest.raises(ValueError, match=f"capacity must be >= 1, got {capacity}"):
        RingBuffer(capacity)


def test_add_keeps_the_latest_samples_and_counts_the_rest() -> None:
    ring = RingBuffer(4)
    for v in (10, 20, 30):
        ring.add(v)
    assert (ring.count, len(ring), ring.dropped) == (3, 3, 0)
    assert ring.drain_list() == [10, 20, 30]
    for v in range(1, 7):
        ring.add(v)
    assert (ring.count, len(ring), ring.dropped) == (6, 4, 2)
    assert sorted(ring.drain().tolist()) == [3, 4, 5, 6]
    assert (ring.count, len(ring)) == (0, 0)


def test_a_ring_of_one_keeps_the_last_sample() -> None:
    ring = RingBuffer(1)
    for v in (5, 6, 7):
        ring.add(v)
    assert (len(ring), ring.dropped, ring.drain_list()) == (1, 2, [7])


def test_a_drain_is_int64_even_when_empty() -> None:
    ring = RingBuffer(4)
    assert ring.drain().dtype == np.int64
    ring.add(3)
    out = ring.drain()
    assert out.dtype == np.int64 and out.tolist() == [3]


def _plain_std(x: list[int]) -> float:
    mean = sum(x) / len(x)
    return math.sqrt(math.fsum((v - mean) ** 2 for v in x) / (len(x) - 1))


def test_the_list_summary_of_a_large_window_is_numpy_s() -> None:
    samples = [random.Random(1).randint(1, 10**9) for _ in range(FEW_SAMPLES + 100)]
    assert summarize_list(samples) == summarize_ns(np.array(samples, dtype=np.int64))
    lo, hi, median, mean, _std, n = summarize_list(samples)
    s = sorted(samples)
    assert (lo, hi, median, n) == (s[0], s[-1], s[(n - 1) // 2], FEW_SAMPLES + 100)
    assert mean == sum(samples) / n


def test_up_to_few_samples_the_list_summary_is_plain_python() -> None:
    # The premise needs samples whose std is an ulp apart in numpy (d @ d, whose
    # summation order is the BLAS build's and the CPU's) and in math.fsum: drawn until
    # found, so the premise holds on any machine's BLAS (a seed fixed on one CPU gave
    # equal figures on another).
    for seed in range(200):
        r = random.Random(seed)
        samples = [r.randint(1, 10**9) for _ in range(FEW_SAMPLES)]
        if _plain_std(samples) != summarize_ns(np.array(samples, dtype=np.int64))[4]:
            break
    else:
        raise AssertionError("no 512 samples whose numpy and plain std differ")
    assert summarize_list(samples)[4] == _plain_std(samples)
