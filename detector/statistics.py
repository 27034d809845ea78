"""NVRx's ``straggler.statistics`` module path: ``Statistic``, the keys of a report's
summaries (``from pacekeeper.detector.statistics import Statistic``)."""

from .reports import Statistic

__all__ = ["Statistic"]
