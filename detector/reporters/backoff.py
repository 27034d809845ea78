"""Retry delays for report delivery: exponential, capped, with full jitter.

Pure: the random source is passed in, so tests pin it and the publisher thread owns one.
Full jitter (a uniform draw in [0, cap]) spreads the retries of many jobs that lost the
same API server at the same moment, instead of having them knock again in lockstep.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Backoff:
    base_s: float = 0.2
    max_s: float = 30.0
    jitter: bool = True

    def __post_init__(self) -> None:
        if not self.base_s > 0:
            raise ValueError(f"backoff base_s must be > 0, got {self.base_s!r}")
        if not self.max_s >= self.base_s:
            raise ValueError(f"backoff max_s must be >= base_s, got {self.max_s!r}")

    def cap_s(self, attempt: int) -> float:
        """Upper bound of the delay before retry number ``attempt`` (1-based)."""
        exponent = min(max(attempt - 1, 0), 62)  # 2**62 * base overflows nothing; cap wins
        return min(self.max_s, self.base_s * float(2**exponent))

    def delay_s(self, attempt: int, rng: random.Random) -> float:
        cap = self.cap_s(attempt)
        if not self.jitter:
            return cap
        # Never zero: a tight spin against a down server helps nobody.
        return max(self.base_s / 2, rng.uniform(0.0, cap))
