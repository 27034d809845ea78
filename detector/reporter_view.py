"""``Detector.reporter``: NVRx's report-generator attribute, as a read-only view.

NVRx keeps its ``ReportGenerator`` on ``Detector.reporter``; code written for it reads
``is_computing_rel_scores``, ``gather_on_rank0``, ``rank``, ``world_size``,
``node_name``, ``rank_to_node`` and ``group`` there. This view answers those from the
running detector (rank and world size as the latest report saw them). It is also
callable: ``Detector.reporter()`` returns pacekeeper's publisher for this rank (or
None), as it did before the view existed.

``name_mapper`` is NVRx's ``NameMapper`` as its users read it (NVRx's
``test_wrap_callables`` copies ``id_to_section_name``): consecutive ids from 0, a name
keeps its id for the run. Sections are numbered in the order the group reported them
(every rank's, when rank 0 gathers) then this rank's own, kernels in the order this
rank's reports held them; NVRx agrees ids across ranks with an all-gather, this view
does not (the payload carries its own id table), so two ranks may number differently.
A generator built from NVRx's constructor, with ``generate_report(section_summaries,
kernel_summaries)``, is ``report_generator.ReportGenerator`` (this view is registered as
an instance of it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class NameMapper:
    """NVRx's name <-> id tables (its attribute and method names)."""

    def __init__(self) -> None:
        self.section_name_to_id: dict[str, int] = {}
        self.id_to_section_name: dict[int, str] = {}
        self.kernel_name_to_id: dict[str, int] = {}
        self.id_to_kernel_name: dict[int, str] = {}
        self.section_counter = 0
        self.kernel_counter = 0

    def _assign_section_id(self, section_name: str) -> int:
        sid = self.section_name_to_id.get(section_name)
        if sid is None:
            sid = self.section_name_to_id[section_name] = self.section_counter
            self.id_to_section_name[sid] = section_name
            self.section_counter += 1
        return sid

    def _assign_kernel_id(self, kernel_name: str) -> int:
        kid = self.kernel_name_to_id.get(kernel_name)
        if kid is None:
            kid = self.kernel_name_to_id[kernel_name] = self.kernel_counter
            self.id_to_kernel_name[kid] = kernel_name
            self.kernel_counter += 1
        return kid

    def get_section_name(self, section_id: int) -> str:
        return self.id_to_section_name[section_id]

    def get_section_id(self, section_name: str) -> int:
        return self.section_name_to_id[section_name]

    def get_kernel_name(self, kernel_id: int) -> str:
        return self.id_to_kernel_name[kernel_id]

    def get_kernel_id(self, kernel_name: str) -> int:
        return self.kernel_name_to_id[kernel_name]


class ReportGenerator:
    """NVRx's ``Detector.reporter`` attributes, read from the live detector."""

    __slots__ = ("_mapped_run", "_mapper", "_shell")

    def __init__(self, shell: Any) -> None:
        self._mapper = NameMapper()
        self._mapped_run: Any = None
        """The run the mapper numbers names for: a new initialize starts from 0."""
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

    @property
    def name_mapper(self) -> NameMapper:
        """Ids of the section and kernel names seen since initialize (NVRx's table)."""
        shell = self._shell
        run = shell._run
        if run is not self._mapped_run:
            self._mapper, self._mapped_run = NameMapper(), run
        mapper = self._mapper
        for name in list(getattr(run, "seen_sections", ())) + list(shell.custom_sections):
            mapper._assign_section_id(name)
        report = shell._latest_report
        if report is not None:
            for name in report.local_section_summaries:
                mapper._assign_section_id(name)
            for name in report.local_kernel_summaries:
                mapper._assign_kernel_id(name)
        return mapper

    def __repr__(self) -> str:
        return (
            f"ReportGenerator(gather_on_rank0={self.gather_on_rank0!r}, rank={self.rank!r}, "
            f"world_size={self.world_size!r}, node_name={self.node_name!r})"
        )
