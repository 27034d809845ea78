"""Each rank's recent window times per section, for its tail statistic (``sectionTail``).

``baselines.RecentBest`` keeps slow windows out on purpose (a slow rank must not become
its own normal); the tail needs exactly those windows, so it keeps its own short
memory: per key the last ``scoring.TAIL_WINDOWS`` typical times, slow or not. Bounded:
at most ``max_keys`` keys (least recently seen evicted first).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Hashable, Iterable

from . import scoring


class RecentTail:
    """Per key, the last ``windows`` valid typical times and their ``tail_score``."""

    def __init__(self, windows: int = scoring.TAIL_WINDOWS, max_keys: int = 4096) -> None:
        if windows < 2:
            raise ValueError(f"windows must be >= 2 (the tail is a second-highest), got {windows}")
        if max_keys < 1:
            raise ValueError(f"max_keys must be >= 1, got {max_keys}")
        self.windows = windows
        self.max_keys = max_keys
        self._times: OrderedDict[Hashable, deque[float]] = OrderedDict()

    def update(self, keys: Iterable[Hashable], typical: Iterable[float]) -> list[float]:
        """Record this window's typical time per key (invalid ones are not recorded);
        return each key's tail score including it (NaN: too few windows yet)."""
        out = []
        for key, t in zip(keys, typical, strict=True):
            times = self._times.get(key)
            if times is None:
                if len(self._times) >= self.max_keys:
                    self._times.popitem(last=False)
                times = self._times[key] = deque(maxlen=self.windows)
            else:
                self._times.move_to_end(key)
            if scoring.usable(t):
                times.append(float(t))
            out.append(scoring.tail_score(times))
        return out

    def __len__(self) -> int:
        return len(self._times)
