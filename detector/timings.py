"""Bounded timing buffers for the hot path.

A section's CPU times go into a preallocated Python list used as a ring (power-of-two
capacity, index masked): one ``list.__setitem__`` per sample, no growth, no numpy call
on the hot path. Draining copies the live part into numpy once per report.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


class RingBuffer:
    """Last ``capacity`` integer samples (ns); older ones are overwritten and counted."""

    __slots__ = ("_buf", "_mask", "count")

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        size = _pow2_at_least(capacity)
        self._buf: list[int] = [0] * size
        self._mask = size - 1
        self.count = 0
        """Samples written since the last drain (may exceed capacity)."""

    @property
    def capacity(self) -> int:
        return self._mask + 1

    def add(self, value_ns: int) -> None:
        self._buf[self.count & self._mask] = value_ns
        self.count += 1

    def __len__(self) -> int:
        return min(self.count, self._mask + 1)

    @property
    def dropped(self) -> int:
        return max(0, self.count - (self._mask + 1))

    def drain(self) -> npt.NDArray[np.int64]:
        """The kept samples (order not preserved once wrapped); empties the buffer."""
        return np.array(self.drain_list(), dtype=np.int64)

    def drain_list(self) -> list[int]:
        """``drain`` as a list (what ``summarize_list`` reads)."""
        out = self._buf[: len(self)]
        self.count = 0
        return out


def summarize_ns(
    samples_ns: npt.NDArray[np.int64],
) -> tuple[float, float, float, float, float, int]:
    """(min, max, median, mean, std, num) of samples in ns, as NVRx's CPU sections
    (torch): the median is torch.median's, the lower of the two middle values of an
    even count; std is torch.std's (Bessel's correction, n - 1), NaN for one sample."""
    n = int(samples_ns.size)
    if n == 0:
        nan = float("nan")
        return nan, nan, nan, nan, nan, 0
    # One sort gives min, max and median: np.median and np.std cost ~20 us each in
    # fixed overhead, more than all of this on the few samples a section has per window.
    x = np.sort(samples_ns.astype(np.float64))
    median = float(x[(n - 1) // 2])
    mean = float(x.sum()) / n
    d = x - mean
    std = math.sqrt(float(d @ d) / (n - 1)) if n > 1 else float("nan")
    return float(x[0]), float(x[-1]), median, mean, std, n


FEW_SAMPLES = 512
"""Samples up to which ``summarize_list`` loops in Python rather than calling numpy."""


def summarize_list(samples_ns: list[int]) -> tuple[float, float, float, float, float, int]:
    """``summarize_ns`` of a list: in plain Python for the few samples a section has in a
    window (a minute of 1 s steps is 60), where numpy's fixed cost per call was most of
    the report's section work. Integer nanoseconds sum exactly either way, so min, max,
    median and mean are identical and std agrees to rounding
    (``tests/unit/detector/test_timings.py``)."""
    n = len(samples_ns)
    if n > FEW_SAMPLES:
        return summarize_ns(np.array(samples_ns, dtype=np.int64))
    if n == 0:
        nan = float("nan")
        return nan, nan, nan, nan, nan, 0
    x = sorted(samples_ns)
    median = float(x[(n - 1) // 2])
    mean = float(sum(x)) / n
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in x) / (n - 1)) if n > 1 else float("nan")
    return float(x[0]), float(x[-1]), median, mean, std, n
