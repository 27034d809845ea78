"""Rate limits for the reporter's log lines: one line per distinct cause per interval.

A refusal repeats with every report (a wrong job name refuses each one), and a training
process's log is read by people looking for the training's own lines. So the first line
of a cause is printed with its reason; repeats within ``interval_s`` are only counted,
and the next line printed says how many were held back (``(12 more since)``).
"""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

DEFAULT_INTERVAL_S = 300.0
"""Seconds between two lines of the same cause."""
MAX_CAUSES = 256
"""Causes remembered (least recently seen forgotten first): a stream of ever-new causes
costs a line each but no unbounded memory."""

_NUMBERS = re.compile(r"\d+(?:\.\d+)?")


class LogThrottle:
    def __init__(
        self,
        interval_s: float = DEFAULT_INTERVAL_S,
        *,
        max_causes: int = MAX_CAUSES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not interval_s >= 0:
            raise ValueError(f"log interval_s must be >= 0, got {interval_s!r}")
        if max_causes < 1:
            raise ValueError(f"log max_causes must be >= 1, got {max_causes!r}")
        self.interval_s = interval_s
        self.max_causes = max_causes
        self._clock = clock
        # cause -> (time its last line was printed, repeats held back since)
        self._seen: OrderedDict[str, tuple[float, int]] = OrderedDict()
        self._lock = threading.Lock()

    def admit(self, cause: str) -> int | None:
        """None when this occurrence of ``cause`` should not be printed (it is counted);
        otherwise print it now, and the int is how many were held back before it."""
        now = self._clock()
        with self._lock:
            last = self._seen.get(cause)
            if last is not None and now - last[0] < self.interval_s:
                self._seen[cause] = (last[0], last[1] + 1)
                self._seen.move_to_end(cause)
                return None
            self._seen[cause] = (now, 0)
            self._seen.move_to_end(cause)
            while len(self._seen) > self.max_causes:
                self._seen.popitem(last=False)
            return 0 if last is None else last[1]


def more_since(held_back: int) -> str:
    """The suffix of a printed line that stands for ``held_back`` unprinted ones."""
    return f" ({held_back} more since)" if held_back else ""


def message_cause(error: BaseException, text: str | None = None) -> str:
    """A cause key for a refusal: its type and message (``text``, else ``str(error)``)
    with the numbers masked, so 'sequence 41 refused' and 'sequence 42 refused' are one
    cause, while a wrong job and a schema refusal are two."""
    text = _NUMBERS.sub("#", str(error) if text is None else text)[:200]
    return f"{type(error).__name__}: {text}"
