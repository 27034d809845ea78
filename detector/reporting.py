"""NVRx's ``straggler.reporting`` module path: ``Report``, ``StragglerId`` and the
``ReportGenerator`` found on ``Detector.reporter``.

``from nvidia_resiliency_ext.attribution.straggler.reporting import Report`` becomes
``from pacekeeper.detector.reporting import Report``. ``ReportGenerator`` here is the
view ``Detector.reporter`` is (``reporter_view``): its attributes are NVRx's, but it is
not built from NVRx's constructor arguments (docs/detector.md, "Differences from NVRx").
"""

from .reporter_view import ReportGenerator
from .reports import Report, StragglerId

__all__ = ["Report", "ReportGenerator", "StragglerId"]
