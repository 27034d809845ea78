"""NVRx's ``straggler.name_mapper`` module path: ``NameMapper``.

``from nvidia_resiliency_ext.attribution.straggler.name_mapper import NameMapper``
becomes ``from pacekeeper.detector.name_mapper import NameMapper``. NVRx's generator
numbers section and kernel names with it so that ranks can exchange ids instead of
names; ``reporting.ReportGenerator().name_mapper`` is one, and
``Detector.reporter.name_mapper`` holds the same tables (``reporter_view``).
``gather_and_assign_ids`` agrees the ids across the ranks of ``pg`` with one
all-gather of the names (NVRx first all-reduces whether any rank has a new name and
skips the gather when none has; the ids come out the same).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .reporter_view import NameMapper as _Tables


class NameMapper(_Tables):
    """Consecutive ids from 0 per kind; a name keeps its id; every rank of ``pg`` that
    calls ``gather_and_assign_ids`` gets the same ids (sections of rank 0, 1, ... then
    kernels of rank 0, 1, ...)."""

    def __init__(self, pg: Any = None) -> None:
        super().__init__()
        self.group = pg

    def gather_and_assign_ids(
        self, kernel_names: Sequence[str], section_names: Sequence[str]
    ) -> None:
        """Collective over ``pg`` when torch.distributed is initialized: every rank calls it."""
        gathered: list[Any] = [(list(section_names), list(kernel_names))]
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            size = dist.get_world_size(self.group)
            if size > 1:
                out: list[Any] = [None] * size
                dist.all_gather_object(out, gathered[0], group=self.group)
                gathered = out
        for sections, _ in gathered:
            for name in sections:
                self._assign_section_id(name)
        for _, kernels in gathered:
            for name in kernels:
                self._assign_kernel_id(name)
