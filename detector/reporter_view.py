"""``Detector.reporter``: NVRx's report-generator attribute, as a read-only view.

NVRx keeps its ``ReportGenerator`` on ``Detector.reporter``; code written for it reads
``is_computing_rel_scores``, ``gather_on_rank0``, ``rank``, ``world_size``,
``node_name``, ``rank_to_node`` and ``group`` there. This view answers those from the
running detector (rank and world size as the latest report saw them). It is also
callable: ``Detector.reporter()`` returns pacekeeper's publisher for this rank (or
None), as it did before the view existed. NVRx's internals (its ``NameMapper``, min-time
tables, ``generate_report(section_summaries, kernel_summaries)``) have no counterpart:
scoring is shaped differently here (``payload``, ``scoring``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class ReportGenerator:
    """NVRx's ``Detector.reporter`` attributes, read from the live detector."""

    __slots__ = ("_shell",)

    def __init__(self, shell: Any) -> None:
        self._shell = shell
        """The ``Detector`` class: its ``scores_to_compute``, ``gather_on_rank0``,
        ``node_name``, ``_run``, ``_publisher`` and ``_latest_report``."""

    def __call__(self) -> Any:
        """The publisher ``initialize(reporter=...)`` started on this rank, or None (its
        ``stats()`` count published, dropped and refused reports)."""
        return self._shell._publisher

    @property
    def is_computing_rel_scores(self) -> bool:
        return "relative_perf_scores" in self._shell.scores_to_compute

    @property
    def is_computing_indiv_scores(self) -> bool:
        return "individual_perf_scores" in self._shell.scores_to_compute

    @property
    def gather_on_rank0(self) -> bool:
        return bool(self._shell.gather_on_rank0)

    @property
    def node_name(self) -> str:
        return str(self._shell.node_name)

    @property
    def group(self) -> Any:
        """The process group given to ``initialize`` (None: the default group)."""
        run = self._shell._run
        return run.process_group if run is not None else None

    @property
    def rank(self) -> int:
        """This process's rank in the group, as the latest report (or initialize) saw it."""
        run = self._shell._run
        return int(run.info.group_rank) if run is not None else 0

    @property
    def world_size(self) -> int:
        run = self._shell._run
        return int(run.info.group_size) if run is not None else 1

    @property
    def rank_to_node(self) -> Mapping[int, str]:
        """Rank -> node of the latest report this rank produced (empty before one)."""
        report = self._shell._latest_report
        return dict(report.rank_to_node) if report is not None else {}

    def __repr__(self) -> str:
        return (
            f"ReportGenerator(gather_on_rank0={self.gather_on_rank0!r}, rank={self.rank!r}, "
            f"world_size={self.world_size!r}, node_name={self.node_name!r})"
        )
