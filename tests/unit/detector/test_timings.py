"""Section timing buffers and their window summary match torch, as NVRx computes it."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pacekeeper.detector.timings import RingBuffer, summarize_list, summarize_ns


@pytest.mark.parametrize("summarize", ["numpy", "list"])
@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(1, 10**12), max_size=50))
def test_summary_matches_torch(summarize, samples):
    # Both summaries: of an array (large windows) and of a list in plain Python.
    x = np.array(samples, np.int64)
    if summarize == "numpy":
        lo, hi, median, mean, std, n = summarize_ns(x)
    else:
        lo, hi, median, mean, std, n = summarize_list(list(samples))
    assert n == len(samples)
    if not samples:
        assert all(math.isnan(v) for v in (lo, hi, median, mean, std))
        return
    f = x.astype(np.float64)
    t = torch.tensor(samples, dtype=torch.float64)
    # NVRx's CPU section statistics: torch.median (the lower middle of an even count).
    assert (lo, hi, median) == (f.min(), f.max(), torch.median(t).item())
    assert math.isclose(mean, f.mean(), rel_tol=1e-12)
    if len(samples) == 1:
        assert math.isnan(std)
    else:
        assert math.isclose(std, torch.std(t).item(), rel_tol=1e-9, abs_tol=1e-6 * f.max())


def test_ring_keeps_the_latest_samples_and_drains_empty():
    ring = RingBuffer(4)
    for v in range(1, 7):
        ring._buf[ring.count & ring._mask] = v
        ring.count += 1
    assert ring.dropped == 2
    assert sorted(ring.drain().tolist()) == [3, 4, 5, 6]
    assert len(ring) == 0 and ring.drain().size == 0
