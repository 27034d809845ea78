"""In-job straggler detector, a drop-in for ``nvidia_resiliency_ext.straggler``.

``from pacekeeper import detector as straggler`` replaces
``from nvidia_resiliency_ext import straggler``; ``pacekeeper.detector.straggler`` holds
the same names, as NVRx's ``straggler.straggler`` does, and NVRx's documented submodules
``reporting``, ``statistics`` and ``interval_tracker`` are here under those names.
"""

from . import interval_tracker, reporting, statistics, straggler
from .straggler import CallableId, CustomSection, Detector, Report, Statistic, StragglerId

__all__ = [
    "CallableId",
    "CustomSection",
    "Detector",
    "Report",
    "Statistic",
    "StragglerId",
    "interval_tracker",
    "reporting",
    "statistics",
    "straggler",
]
