"""One run of the detector: what ``initialize`` starts and ``shutdown`` releases.

The ``Detector`` shell keeps NVRx's class-level attributes and the hot-path handle
tables; everything else a run needs lives in one ``RunState``: the guard, the
environment settings, the kernel-timing backend, the report group (the job's group and
the detector's own), the section table, the job and rank identity, the payload builder
with its baselines, the receiver's name table, the report sequence and the interval
tracker. ``start`` is initialize's work after its arguments are checked
(``run_config``); bad environment values and process groups still raise ``ValueError``
here, before anything is kept. ``refresh`` re-reads the rank and world size at every
report, as NVRx does: ``initialize`` may run before ``init_process_group``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from . import collectives, env, gather, identity
from .guard import Guard
from .interval import IntervalTracker
from .local_payload import PayloadBuilder
from .report_group import ReportGroup
from .sections import SectionTable

if TYPE_CHECKING:
    from pacekeeper.cupti_ext import BackendChoice, KernelTimingBackend

    from .control import ControlExchange
    from .run_config import RunConfig
    from .score_report import JobIdentity

logger = logging.getLogger(__name__)


class RunState:
    """The parts of one run, built by ``start``; the shell drops it at shutdown."""

    def __init__(
        self,
        config: RunConfig,
        *,
        guard: Guard,
        backend: KernelTimingBackend,
        choice: BackendChoice,
        group: ReportGroup,
        info: gather.GroupInfo,
        table: SectionTable,
        node_name: str,
        ray_node: str | None,
        job: JobIdentity,
        payloads: PayloadBuilder,
    ) -> None:
        self.config = config
        self.guard = guard
        self.backend = backend
        self.choice = choice
        self.group = group
        self.process_group = group.job_group
        self.info = info
        """The job group as the latest report saw it (``refresh``)."""
        self.table = table
        self.node_name = node_name
        self._ray_node = ray_node
        self.job = job
        self.payloads = payloads
        self.time_collectives = False
        """Wrap the job's collectives once a process group exists (``collectives``)."""
        self.names: dict[int, str] = {}
        """The receiver's id -> name table (bounded by ``payload.MAX_NAMES``)."""
        self.seen_sections: dict[str, None] = {}
        """Sections any rank reported since initialize, in order (NVRx's name table)."""
        self.sequence = 0
        self.window_start = time.monotonic()
        self.gpu_uuid: str | None = None
        """This rank's GPU (``identity.gpu_uuid``), once a report found it."""
        self._gpu_known = False
        """True once the GPU is found, or no report can ever find one."""
        self.control: ControlExchange | None = None
        """Runtime control (``control_cycle``), when this run exchanges it."""
        self.tracker = IntervalTracker(
            config.report_time_interval,
            config.profiling_interval,
            self.sync_step_time,
            adaptive=config.adaptive_interval,
        )

    @classmethod
    def start(
        cls,
        config: RunConfig,
        *,
        process_group: Any,
        kernel_timing: str | None,
        job: JobIdentity | None,
    ) -> RunState:
        """Read the settings, describe the group, select the backend, resolve identity."""
        settings = env.read_settings()
        info = gather.describe_group(process_group)
        timeout_s = config.report_timeout_s or settings.report_timeout_s
        group = ReportGroup(process_group, backend=config.report_backend, timeout_s=timeout_s)

        from pacekeeper.cupti_ext import select_backend
        from pacekeeper.cupti_ext.kernel_keys import comm_pattern_from_env

        comm_extra = comm_pattern_from_env()
        guard = Guard()
        # The GPU score reads kernel statistics over every traced section entry;
        # per-section breakdowns would be folded and snapshotted for nobody.
        sampling = _sampling_options(config)
        backend, choice = select_backend(kernel_timing, section_stats=False, **sampling)
        if choice.name == "cupti":
            _log_sampling(config, sampling)
        logger.info(
            "kernel timing backend selected",
            extra={"backend": choice.name, "reason": choice.reason},
        )
        table = SectionTable(
            backend=None if choice.name == "none" else backend,
            guard=guard,
            profiling_interval=max(1, config.profiling_interval),
            capacity=settings.max_section_samples,
            max_sections=settings.max_sections,
        )
        ray_job, ray_node = guard.call("ray_context", identity.ray_context, (None, None))
        node = identity.resolve_node_name(config.node_name)
        payloads = PayloadBuilder(
            rank_info=identity.rank_info(info, node, ray_node),
            settings=settings,
            table=table,
            backend=backend,
            choice=choice,
            guard=guard,
            comm_extra=comm_extra,
        )
        return cls(
            config,
            guard=guard,
            backend=backend,
            choice=choice,
            group=group,
            info=info,
            table=table,
            node_name=node,
            ray_node=ray_node,
            job=job if job is not None else identity.default_job(ray_job),
            payloads=payloads,
        )

    def next_window(self) -> tuple[int, float]:
        """Close the report window: the next sequence number and the window's length (s)."""
        now = time.monotonic()
        window_s = now - self.window_start
        self.window_start = now
        self.sequence += 1
        return self.sequence, window_s

    def refresh(self) -> gather.GroupInfo:
        """Read the job group's ranks now; a rank that changed (the group appeared after
        ``initialize``) travels in this report's payload."""
        info = self.group.describe()
        if info != self.info:
            self.info = info
            if info.distributed and self.time_collectives and not collectives.installed():
                self.guard.call("collectives.install", collectives.install, None)
            if self.payloads.rank_info.rank != info.global_rank:
                self.payloads.rank_info = identity.rank_info(
                    info, self.node_name, self._ray_node, self.gpu_uuid
                )
        if not self._gpu_known:
            self._find_gpu()
        return info

    def _find_gpu(self) -> None:
        """Name this rank's GPU in its payloads from the first report that finds CUDA in
        use; read once, since a process keeps its device (a later ``set_device`` to
        another GPU is not followed)."""
        found = self.guard.call("identity.gpu_uuid", identity.gpu_uuid, None)
        if found is None:
            possible = self.guard.call("identity.gpu", identity.gpu_in_use_possible, False)
            self._gpu_known = not possible
            return
        self._gpu_known = True
        self.gpu_uuid = found
        self.payloads.rank_info = replace(self.payloads.rank_info, gpu_uuid=found)

    def sync_step_time(self, local_s: float) -> float:
        """The interval tracker's agreement: the largest step time over the group."""

        def agree() -> float:
            value: float = self.group.collective(gather.all_reduce_max, local_s, self.refresh())
            return value

        return self.guard.call("interval.sync", agree, float("nan"))

    def close_control(self) -> None:
        """Stop reading runtime control (before the reporter it reads through closes)."""
        if self.control is not None:
            self.guard.call("control.close", self.control.close, None)

    def close(self) -> None:
        """Release the control source and the backend (never raises)."""
        self.close_control()
        self.guard.call("backend.shutdown", self.backend.shutdown, None)


def _sampling_options(config: RunConfig) -> dict[str, Any]:
    """The CUPTI backend's sampling: fixed where ``PACEKEEPER_KERNEL_SAMPLE_EVERY`` or a
    ``profiling_interval`` the user gave says so (cupti_ext/sampling.py), else left to
    the backend's per-window rule (no option passed)."""
    from pacekeeper.cupti_ext.cupti_env import sample_every_from_env
    from pacekeeper.cupti_ext.sampling import fixed_sample_every

    fixed = fixed_sample_every(
        interval_given=config.interval_given, env_value=sample_every_from_env()
    )
    return {} if fixed is None else {"sample_every": fixed}


def _log_sampling(config: RunConfig, sampling: dict[str, Any]) -> None:
    """Say once, at initialize, which entries get their kernels traced."""
    interval = max(1, config.profiling_interval)
    if not sampling:
        logger.info(
            "kernel tracing samples profiled entries per window (profiling_interval left "
            "at its default); pass profiling_interval, or set "
            "PACEKEEPER_KERNEL_SAMPLE_EVERY=N, to fix the cadence",
            extra={"profiling_interval": interval},
        )
    else:
        logger.info(
            "kernel tracing fixed: one profiled entry in sample_every",
            extra={"profiling_interval": interval, "sample_every": sampling["sample_every"]},
        )
