"""In-job straggler detector, a drop-in for ``nvidia_resiliency_ext.straggler``.

``from pacekeeper import detector as straggler`` replaces
``from nvidia_resiliency_ext import straggler``; ``pacekeeper.detector.straggler`` holds
the same names, as NVRx's ``straggler.straggler`` does.
"""

from . import straggler
from .straggler import CallableId, CustomSection, Detector, Report, Statistic, StragglerId

__all__ = [
    "CallableId",
    "CustomSection",
    "Detector",
    "Report",
    "Statistic",
    "StragglerId",
    "straggler",
]
