"""Runtime control inside a report: the reporting rank's document, broadcast on the
report's group, applied on every rank at the same report.

At the start of each report (``report_cycle.generate``), group rank 0 takes its
source's newest document and broadcasts it on the detector's own group (the one the
report then gathers on), so every rank sees the same document at the same report and
switches there: the report interval (the tracker's next count, from the next
iteration), the sampling of sections (``profiling_interval``, an attribute each section
reads on entry: the hot path is unchanged), the thresholds integrations use, and
whether reports are produced at all. A disabled run keeps counting iterations and
still meets at every report for the broadcast (so it can be enabled again), but
gathers, scores and publishes nothing and times almost nothing: its sections sample
one entry in 2**62. The report that enables it again is not produced either (its
window was not timed); the next one is, over a window that started there. Torch-free:
the broadcast is ``gather``'s.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from . import gather
from .control import Control, ControlSettings

if TYPE_CHECKING:
    from .control_sources import ControlSource
    from .run_state import RunState

logger = logging.getLogger(__name__)

DISABLED_SAMPLING = 1 << 62
"""``profiling_interval`` of every section while the run is disabled."""


class RunControl:
    """One run's control: the source (reporting rank only) and the settings in force."""

    def __init__(self, base: ControlSettings, source: ControlSource | None) -> None:
        self.base = base
        """``initialize``'s values: what a missing document or field means."""
        self.settings = base
        self.source = source
        self.probed: str | None = None
        """The last probe request this run answered (each id runs once)."""

    def exchange(self, run: RunState, info: gather.GroupInfo) -> bool:
        """Agree on this report's settings (a collective) and apply them; True when this
        report is to be produced: not while disabled, nor at the report that enables
        (its window was not timed), the same on every rank."""
        offered: Control | None = None
        if info.is_reporter and self.source is not None:
            offered = run.guard.call("control.read", self.source.latest, self.settings.control)
        agreed = run.group.collective(gather.broadcast_from_reporter, offered, info)
        if agreed is not None and not isinstance(agreed, Control):
            raise TypeError(f"control broadcast carried a {type(agreed).__name__}")
        new = self.base.under(agreed, report=run.sequence + 1)
        if new.same_as(self.settings):
            produce = new.enabled
        else:
            produce = new.enabled and self.settings.enabled
            self._apply(run, new)
        if not produce:
            self.discard_window(run)
        elif agreed is not None and agreed.probe_id not in (None, self.probed):
            self._probe(run, agreed.probe_id)
        return produce

    def _probe(self, run: RunState, probe_id: str | None) -> None:
        """The confirmation probe, on every rank at the same report (all got the same
        document): its result rides this report's payload. A failure is logged and
        counted and the report goes out without it."""
        from . import probe

        self.probed = probe_id
        if probe_id is None:
            return
        result = run.guard.call("probe", lambda: probe.run(probe_id), None)
        run.payloads.probe = result
        if result is not None:
            logger.info(
                "confirmation probe run",
                extra={"probe": result.to_wire(), "report": run.sequence + 1},
            )

    def _apply(self, run: RunState, new: ControlSettings) -> None:
        old, self.settings = self.settings, new
        if _sampling(new) != _sampling(old):
            run.table.set_profiling_interval(_sampling(new))
        if (new.report_time_interval, new.profiling_interval) != (
            old.report_time_interval,
            old.profiling_interval,
        ):
            run.tracker.retune(new.report_time_interval, new.profiling_interval)
        logger.info(
            "runtime control applied",
            extra={
                "report": new.report,
                "enabled": new.enabled,
                "report_time_interval": new.report_time_interval,
                "profiling_interval": new.profiling_interval,
                "control": None if new.control is None else new.control.to_wire(),
            },
        )

    @staticmethod
    def discard_window(run: RunState) -> None:
        """Drop what this window timed (a disabled report), and start the next one now."""
        run.table.drain()
        backend = run.backend
        if run.choice.name != "none":
            run.guard.call("backend.collect", backend.collect, None)
        run.window_start = time.monotonic()

    def close(self) -> None:
        from .control_sources import close_source

        close_source(self.source)
        self.source = None


def _sampling(settings: ControlSettings) -> int:
    if not settings.enabled:
        return DISABLED_SAMPLING
    return max(1, settings.profiling_interval)
