"""NVRx's ``straggler.interval_tracker`` module path: ``ReportIntervalTracker``, NVRx's
fixed-count tracker (``interval``; the Detector's own tracker adapts by default)."""

from .interval import ReportIntervalTracker

__all__ = ["ReportIntervalTracker"]
