"""NVRx's ``straggler.straggler`` module path: the same names as ``pacekeeper.detector``."""

from .detector import Detector
from .reports import Report, Statistic, StragglerId
from .sections import CustomSection
from .wrapping import CallableId

__all__ = ["CallableId", "CustomSection", "Detector", "Report", "Statistic", "StragglerId"]
