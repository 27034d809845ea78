"""NVRx's ``straggler.reporting`` module path: ``Report``, ``StragglerId`` and
``ReportGenerator``.

``from nvidia_resiliency_ext.attribution.straggler.reporting import Report`` becomes
``from pacekeeper.detector.reporting import Report``. ``ReportGenerator`` is built as
NVRx's is, ``ReportGenerator(scores_to_compute, gather_on_rank0=, pg=, node_name=)``,
and scores hand-made summaries with pacekeeper's rules (``report_generator``);
``Detector.reporter``, a view of the running detector (``reporter_view``), is an
instance of it for ``isinstance``.
"""

from .report_generator import ReportGenerator
from .reports import Report, StragglerId

__all__ = ["Report", "ReportGenerator", "StragglerId"]
