"""The ``Detector`` shell: NVRx's class-level singleton API over the pure parts.

Hot path: ``detection_section`` (a dict lookup returning a cached handle) and the
handle's enter/exit (see ``sections``). Everything else runs at report time, under the
guard: an internal failure is logged once, counted in ``internal_errors()``, and the
call degrades (``None`` report, no GPU data) instead of raising into training.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar

import numpy as np

from . import env, gather, scoring
from .baselines import RecentBest
from .guard import Guard
from .interval import IntervalTracker
from .payload import KeyIds, RankPayload, score_payloads
from .reports import RankInfo, Report, Statistic, to_score_report
from .score_report import JobIdentity, KernelTiming, Platform, ScoreReport
from .sections import CustomSection, SectionHandle, SectionSummary, SectionTable
from .wrapping import CallableId, check, restore, wrap

logger = logging.getLogger(__name__)

SCORE_NAMES = ("relative_perf_scores", "individual_perf_scores")

ReportListener = Callable[[ScoreReport], None]

NAME_REFRESH_REPORTS = 16
MAX_NAMES = 65536
"""Bound on the id -> name table (sections and kernels) a receiving rank keeps."""

_EMPTY: dict[str, SectionHandle] = {}


def _validate_scores(scores_to_compute: Any) -> tuple[str, ...]:
    if isinstance(scores_to_compute, str):
        if scores_to_compute == "all":
            return SCORE_NAMES
        raise ValueError(
            f"scores_to_compute={scores_to_compute!r}: use 'all' or a list of "
            f"{', '.join(SCORE_NAMES)}"
        )
    try:
        names = tuple(scores_to_compute)
    except TypeError:
        raise ValueError(
            f"scores_to_compute={scores_to_compute!r}: use 'all' or a list of "
            f"{', '.join(SCORE_NAMES)}"
        ) from None
    unknown = [n for n in names if n not in SCORE_NAMES]
    if unknown:
        raise ValueError(
            f"scores_to_compute: unknown score name {unknown[0]!r}; "
            f"known: {', '.join(SCORE_NAMES)} (or 'all')"
        )
    return tuple(dict.fromkeys(names))


def _validate_interval(report_time_interval: Any, profiling_interval: Any) -> None:
    if isinstance(report_time_interval, bool) or not isinstance(report_time_interval, int | float):
        raise ValueError(f"report_time_interval={report_time_interval!r} must be a number")
    if not math.isfinite(report_time_interval) or report_time_interval <= 0:
        raise ValueError(f"report_time_interval={report_time_interval!r} must be > 0 seconds")
    if isinstance(profiling_interval, bool) or not isinstance(profiling_interval, int):
        raise ValueError(f"profiling_interval={profiling_interval!r} must be an integer >= 1")
    if profiling_interval < 1:
        raise ValueError(f"profiling_interval={profiling_interval!r} must be >= 1")


def _ray_context() -> tuple[str | None, str | None]:
    """(Ray job id, Ray node id) when this process is connected to Ray; never imports Ray."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return None, None
    ctx = ray.get_runtime_context()
    return ctx.get_job_id(), ctx.get_node_id()


def _install_reporter(detector: Any, reporter: Any) -> Any:
    """The reporter for this rank, or None. Bad configuration raises ValueError naming
    the option or variable (at initialize, like every other bad input)."""
    if reporter is None and env.reporter_kind() is None:
        return None  # None with the variable set: the reporter reads PACEKEEPER_* itself
    if isinstance(reporter, str) and reporter.strip().lower() == "none":
        return None
    from pacekeeper.detector.reporters import install_reporter

    return install_reporter(detector, reporter)


def _default_job(ray_job_id: str | None) -> JobIdentity:
    name = env.job_name()
    if ray_job_id:
        return JobIdentity(platform=Platform.RAY, name=name or ray_job_id, ray_job_id=ray_job_id)
    if env.on_kubernetes():
        return JobIdentity(
            platform=Platform.KUBERNETES,
            namespace=env.job_namespace() or "default",
            name=name or "unknown",
        )
    return JobIdentity(platform=Platform.LOCAL, name=name or "local")


_COMM_CACHE_MAX = 1 << 16


def _stats(s: Any, scale: float) -> dict[Statistic, float]:
    """NVRx's per-key statistics from anything with min/max/median/mean/std_ns and num."""
    return {
        Statistic.MIN: s.min_ns * scale,
        Statistic.MAX: s.max_ns * scale,
        Statistic.MED: s.median_ns * scale,
        Statistic.AVG: s.mean_ns * scale,
        Statistic.STD: s.std_ns * scale,
        Statistic.NUM: s.num,
    }


class Detector:
    """Straggler detector, used through class methods (NVRx's singleton shape)."""

    initialized: ClassVar[bool] = False
    scores_to_compute: ClassVar[tuple[str, ...]] = ()
    gather_on_rank0: ClassVar[bool] = True
    profiling_interval: ClassVar[int] = 1
    report_time_interval: ClassVar[float] = 60.0
    node_name: ClassVar[str] = ""
    custom_sections: ClassVar[dict[str, CustomSection]] = {}
    report_interval_tracker: ClassVar[IntervalTracker | None] = None

    _locations: ClassVar[dict[tuple[str, int], str]] = {}
    _comm_extra: ClassVar[Any] = None
    _comm_verdicts: ClassVar[dict[str, bool]] = {}
    _cuda_handles: ClassVar[dict[str, SectionHandle]] = _EMPTY
    _cpu_handles: ClassVar[dict[str, SectionHandle]] = _EMPTY
    _table: ClassVar[SectionTable | None] = None
    _guard: ClassVar[Guard] = Guard()
    _backend: ClassVar[Any] = None
    _backend_choice: ClassVar[Any] = None
    _group: ClassVar[Any] = None
    _info: ClassVar[gather.GroupInfo | None] = None
    _settings: ClassVar[env.DetectorSettings] = env.DetectorSettings()
    _section_baselines: ClassVar[RecentBest | None] = None
    _kernel_baselines: ClassVar[RecentBest | None] = None
    _key_ids: ClassVar[KeyIds] = KeyIds()
    _sent_kernel_names: ClassVar[set[int]] = set()
    _names: ClassVar[dict[int, str]] = {}
    _rank_info: ClassVar[RankInfo | None] = None
    _job: ClassVar[JobIdentity | None] = None
    _sequence: ClassVar[int] = 0
    _window_start: ClassVar[float] = 0.0
    _patched: ClassVar[list[Any]] = []
    _latest: ClassVar[ScoreReport | None] = None
    _listeners: ClassVar[list[ReportListener]] = []
    _lock: ClassVar[threading.RLock] = threading.RLock()
    _publisher: ClassVar[Any] = None

    def __new__(cls, *args: Any, **kwargs: Any) -> Detector:
        raise RuntimeError(f"class {cls.__name__} should not be instantiated; use its classmethods")

    # --- lifecycle ---------------------------------------------------------------

    @classmethod
    def initialize(  # noqa: PLR0917 - NVRx's positional signature
        cls,
        scores_to_compute: Sequence[str] | str = "all",
        gather_on_rank0: bool = True,
        profiling_interval: int = 1,
        report_time_interval: float = 60,
        node_name: str | None = None,
        process_group: Any = None,
        *,
        job: JobIdentity | None = None,
        kernel_timing: str | None = None,
        reporter: Any = None,
    ) -> None:
        """Start detecting (NVRx keywords, plus ``process_group`` and keyword-only extras).

        Args:
            scores_to_compute: ``"all"`` or a list of ``relative_perf_scores``,
                ``individual_perf_scores``.
            gather_on_rank0: report every rank's scores on group rank 0 (others get None);
                if False every rank gets a report with its own scores.
            profiling_interval: time every n-th entry of each section.
            report_time_interval: seconds between reports of
                ``generate_report_if_interval_elapsed``.
            node_name: node name in reports; default ``$NODE_NAME`` on Kubernetes, else
                the host name.
            process_group: torch.distributed group to report over (default WORLD).
            job: identity put into ``ScoreReport``s; default from the environment.
            kernel_timing: ``auto|cupti|events|none`` (default ``$PACEKEEPER_KERNEL_TIMING``).
            reporter: where the reporting rank publishes each ``ScoreReport``:
                ``ray``, ``kubernetes``, ``auto``, ``none``, or a mapping of reporter
                options (docs/transports.md). Default: ``$PACEKEEPER_REPORTER`` when set
                (an annotated job gets it from its environment), else nowhere, as NVRx.

        Raises ValueError naming the argument on bad input, RuntimeError if already
        initialised.
        """
        with cls._lock:
            if cls.initialized:
                raise RuntimeError("Detector is already initialized; call shutdown() first")
            scores = _validate_scores(scores_to_compute)
            _validate_interval(report_time_interval, profiling_interval)
            if node_name is not None and (not isinstance(node_name, str) or not node_name):
                raise ValueError(f"node_name={node_name!r} must be a non-empty string or None")
            settings = env.read_settings()
            info = gather.describe_group(process_group)

            from pacekeeper.cupti_ext import select_backend
            from pacekeeper.cupti_ext.kernel_keys import comm_pattern_from_env

            comm_extra = comm_pattern_from_env()
            guard = Guard()
            # The GPU score reads kernel statistics over every traced section entry;
            # per-section breakdowns would be folded and snapshotted for nobody.
            backend, choice = select_backend(kernel_timing, section_stats=False)
            logger.info(
                "kernel timing backend selected",
                extra={"backend": choice.name, "reason": choice.reason},
            )
            table = SectionTable(
                backend=None if choice.name == "none" else backend,
                guard=guard,
                profiling_interval=profiling_interval,
                capacity=settings.max_section_samples,
                max_sections=settings.max_sections,
            )
            ray_job, ray_node = guard.call("ray_context", _ray_context, (None, None))
            node = node_name or (env.node_name() if env.on_kubernetes() else None)
            node = node or socket.gethostname() or "<unknown>"

            cls.scores_to_compute = scores
            cls.gather_on_rank0 = bool(gather_on_rank0)
            cls.profiling_interval = profiling_interval
            cls.report_time_interval = float(report_time_interval)
            cls.node_name = node
            cls._guard = guard
            cls._settings = settings
            cls._backend = backend
            cls._backend_choice = choice
            cls._comm_extra = comm_extra
            cls._comm_verdicts = {}  # the pattern may have changed
            cls._group = process_group
            cls._info = info
            cls._table = table
            cls.custom_sections = table.sections
            cls._section_baselines = RecentBest(settings.baseline_windows, settings.max_sections)
            cls._kernel_baselines = RecentBest(
                settings.baseline_windows, 4 * settings.max_kernel_keys
            )
            cls._key_ids = KeyIds()
            cls._sent_kernel_names = set()
            cls._names = {}
            cls._rank_info = RankInfo(
                rank=info.global_rank,
                node=node,
                pod=env.pod_name(),
                ray_node_id=ray_node,
                pid=os.getpid(),
            )
            cls._job = job if job is not None else _default_job(ray_job)
            cls._sequence = 0
            cls._window_start = time.monotonic()
            cls._patched = []
            cls._latest = None
            cls.report_interval_tracker = IntervalTracker(
                cls.report_time_interval, profiling_interval, cls._sync_step_time
            )
            cls._cuda_handles = table.cuda_handles
            cls._cpu_handles = table.cpu_handles
            cls.initialized = True
            cls._publisher = None
            if info.is_reporter and cls.gather_on_rank0:
                try:
                    cls._publisher = _install_reporter(cls, reporter)
                except Exception:
                    cls.shutdown()  # bad reporter configuration: leave nothing half-started
                    raise

    @classmethod
    def shutdown(cls) -> None:
        """Stop detecting: restore wrapped callables, release the backend. Idempotent."""
        with cls._lock:
            if not cls.initialized:
                return
            publisher, cls._publisher = cls._publisher, None
            if publisher is not None:
                from pacekeeper.detector.reporters import uninstall_reporter

                uninstall_reporter(cls, publisher)  # never raises
            cls.restore_original_callables()
            backend = cls._backend
            if backend is not None:
                cls._guard.call("backend.shutdown", backend.shutdown, None)
            cls._cuda_handles = _EMPTY
            cls._cpu_handles = _EMPTY
            cls._table = None
            cls._backend = None
            cls.report_interval_tracker = None
            cls.initialized = False

    # --- sections (hot path) -----------------------------------------------------

    @classmethod
    def detection_section(cls, name: str | None = None, profile_cuda: bool = True) -> SectionHandle:
        """Context manager timing the code inside it as section ``name``.

        Without a name the section is named after the ``with`` statement's file and line.
        ``profile_cuda`` also attributes the kernels launched inside to the GPU score.
        """
        table = cls._cuda_handles if profile_cuda else cls._cpu_handles
        if name is not None:
            handle = table.get(name)
            if handle is not None:
                return handle
            frame = sys._getframe(1)
            return cls._section(name, profile_cuda, _location(frame))
        # Unnamed: the name is the `with` statement's place; cache it per (file, line)
        # so only the first entry pays for formatting it.
        frame = sys._getframe(1)
        key = (frame.f_code.co_filename, frame.f_lineno)
        location = cls._locations.get(key)
        if location is None:
            location = _location(frame)
            if len(cls._locations) < 65536:
                cls._locations[key] = location
        handle = table.get(location)
        if handle is not None:
            return handle
        return cls._section(location, profile_cuda, location)

    @classmethod
    def _section(cls, name: str, profile_cuda: bool, location: str) -> SectionHandle:
        table = cls._table
        if table is None or not cls.initialized:
            raise RuntimeError("Detector is not initialized.")
        if not isinstance(name, str):
            raise TypeError(f"section name must be a str, got {type(name).__name__}")
        return table.handle(name, profile_cuda, location)

    # --- wrapping ----------------------------------------------------------------

    @classmethod
    def wrap_callables(cls, callable_ids: Sequence[CallableId], profile_cuda: bool = True) -> None:
        """Time each ``getattr(id.obj, id.name)`` call as section ``str(id)``."""
        for cid in callable_ids:
            check(cid)
            handle = cls._section(str(cid), profile_cuda, str(cid))
            cls._patched.append(wrap(cid, handle))

    @classmethod
    def restore_original_callables(cls) -> None:
        """Undo every ``wrap_callables``, latest first."""
        while cls._patched:
            restore(cls._patched.pop())

    # --- reports -----------------------------------------------------------------

    @classmethod
    def _sync_step_time(cls, local_s: float) -> float:
        info = cls._info
        if info is None:
            return local_s
        return cls._guard.call(
            "interval.sync",
            lambda: gather.all_reduce_max(local_s, info, cls._group),
            math.nan,
        )

    @classmethod
    def generate_report_if_interval_elapsed(cls) -> Report | None:
        """Call once per iteration on every rank; reports when the interval has elapsed."""
        if not cls.initialized or cls.report_interval_tracker is None:
            raise RuntimeError("Detector is not initialized.")
        tracker = cls.report_interval_tracker
        cls._guard.call("interval", tracker.iter_increase, None)
        if tracker.is_interval_elapsed():
            return cls.generate_report()
        return None

    @classmethod
    def is_interval_elapsed(cls) -> bool:
        """True if the latest ``generate_report_if_interval_elapsed`` call reported."""
        tracker = cls.report_interval_tracker
        return tracker is not None and tracker.is_interval_elapsed()

    @classmethod
    def generate_report(cls) -> Report | None:
        """Score the window since the last report; a collective over the process group.

        Every rank of the group must call it. Returns the report (on group rank 0 only
        when ``gather_on_rank0``), or None; on an internal failure, None (logged, counted).
        """
        if not cls.initialized or cls._info is None:
            raise RuntimeError("Detector is not initialized.")
        t0 = time.perf_counter_ns()
        info = cls._info
        now = time.monotonic()
        window_s = now - cls._window_start
        cls._window_start = now
        cls._sequence += 1
        sequence = cls._sequence
        assert cls._rank_info is not None
        empty: tuple[RankPayload, dict[str, Any], dict[str, Any]] = (
            RankPayload.empty(cls._rank_info),
            {},
            {},
        )
        payload, sec_summ, ker_summ = cls._guard.call("report.local", cls._local_payload, empty)

        relative = "relative_perf_scores" in cls.scores_to_compute
        individual = "individual_perf_scores" in cls.scores_to_compute
        failed = object()
        gathered: Any
        if cls.gather_on_rank0:
            gathered = cls._guard.call(
                "report.gather",
                lambda: gather.gather_to_reporter(payload, info, cls._group),
                failed,
            )
            if gathered is failed or gathered is None:
                return None
        elif relative:
            gathered = cls._guard.call(
                "report.gather", lambda: gather.all_gather(payload, info, cls._group), failed
            )
            if gathered is failed:
                return None
        else:
            gathered = [payload]

        # Only now do we know the names reached the receiver.
        if len(cls._sent_kernel_names) > MAX_NAMES:
            cls._sent_kernel_names.clear()
        cls._sent_kernel_names.update(payload.names)

        def build() -> tuple[Report, list[RankPayload]]:
            payloads = [p for p in gathered if isinstance(p, RankPayload)]
            for p in payloads:
                if len(cls._names) + len(p.names) > MAX_NAMES:
                    cls._names.clear()
                cls._names.update(p.names)
            scores = score_payloads(
                payloads,
                cls._names,
                relative=relative,
                individual=individual,
                only_rank=None if cls.gather_on_rank0 else info.global_rank,
            )
            if not cls.gather_on_rank0:
                payloads = [p for p in payloads if p.info.rank == info.global_rank]
            report = Report(
                gpu_relative_perf_scores=scores.gpu_relative,
                section_relative_perf_scores=scores.section_relative,
                gpu_individual_perf_scores=scores.gpu_individual,
                section_individual_perf_scores=scores.section_individual,
                rank_to_node=scores.rank_to_node,
                local_section_summaries=sec_summ,
                local_kernel_summaries=ker_summ,
                generate_report_elapsed_time=(time.perf_counter_ns() - t0) * 1e-6,
                gather_on_rank0=cls.gather_on_rank0,
                rank=info.global_rank,
            )
            return report, payloads

        built = cls._guard.call("report.score", build, None)
        if built is None:
            return None
        report, payloads = built
        cls._publish(report, payloads, sequence, window_s)
        return report

    @classmethod
    def _local_payload(cls) -> tuple[RankPayload, dict[str, Any], dict[str, Any]]:
        assert cls._table is not None and cls._rank_info is not None
        backend = cls._backend
        if backend is not None and cls._backend_choice.name != "none":
            cls._guard.call("cuda.synchronize", _cuda_synchronize, None)
        sections = cls._table.drain()
        window = None
        if backend is not None:
            window = cls._guard.call("backend.collect", backend.collect, None)
        return cls._payload_from(sections, window)

    @classmethod
    def _payload_from(
        cls, sections: list[SectionSummary], window: Any
    ) -> tuple[RankPayload, dict[str, Any], dict[str, Any]]:
        assert cls._rank_info is not None
        assert cls._section_baselines is not None and cls._kernel_baselines is not None
        sec_names = [s.name for s in sections]
        sec_med = np.array([s.median_ns for s in sections], dtype=np.float64)
        sec_base = cls._section_baselines.update_many(sec_names, sec_med)
        sec_ind = scoring.individual_scores(sec_med, sec_base)
        sec_ids = cls._key_ids.ids(sec_names)
        names = dict(zip(sec_ids.tolist(), sec_names, strict=True))
        sec_summ = {s.name: _stats(s, 1e-6) for s in sections}

        kernels = dict(window.kernels) if window is not None else {}
        # Communication kernels wait for the slowest peer and make fast ranks look slow.
        # The CUPTI backend leaves them out already; this catches any other backend,
        # with the one rule cupti_ext defines (plus $PACEKEEPER_COMM_KERNEL_PATTERN).
        kernels = {k: v for k, v in kernels.items() if not cls._is_comm(k)}
        if len(kernels) > cls._settings.max_kernel_keys:
            # Bounded payload under dynamic shapes: keep where the time goes.
            top = sorted(kernels.items(), key=lambda kv: kv[1].total_ns, reverse=True)
            kernels = dict(top[: cls._settings.max_kernel_keys])
        ker_names = list(kernels)
        ker_med = np.array([kernels[k].median_ns for k in ker_names], dtype=np.float64)
        ker_tot = np.array([kernels[k].total_ns for k in ker_names], dtype=np.float64)
        ker_base = cls._kernel_baselines.update_many(ker_names, ker_med)
        gpu_ind = (
            scoring.gpu_individual_score(ker_med, ker_base, ker_tot) if ker_names else math.nan
        )
        ker_ids = cls._key_ids.ids(ker_names)
        # Kernel names travel once per id, and all of them again every
        # NAME_REFRESH_REPORTS reports, so a receiver that lost or trimmed its table
        # (bounded under dynamic shapes) learns them back.
        refresh = cls._sequence % NAME_REFRESH_REPORTS == 1
        for kid, kname in zip(ker_ids.tolist(), ker_names, strict=True):
            if refresh or kid not in cls._sent_kernel_names:
                names[kid] = kname
        ker_summ = {k: _stats(v, 1e-3) for k, v in kernels.items()}
        info = RankInfo(
            rank=cls._rank_info.rank,
            node=cls._rank_info.node,
            pod=cls._rank_info.pod,
            ray_node_id=cls._rank_info.ray_node_id,
            section_samples=int(sum(s.num for s in sections)),
            kernel_samples=int(window.records) if window is not None else 0,
            dropped_records=int(window.dropped_records) if window is not None else 0,
        )
        payload = RankPayload(
            info, sec_ids, sec_med, sec_ind, ker_ids, ker_med, ker_tot, gpu_ind, names
        )
        return payload, sec_summ, ker_summ

    @classmethod
    def _is_comm(cls, key: str) -> bool:
        # Kernel keys repeat every report: remember the verdict (a regex search each,
        # ~0.5 ms of a 200-kernel report). Keys are bounded upstream; the cache too.
        cache = cls._comm_verdicts
        verdict = cache.get(key)
        if verdict is None:
            from pacekeeper.cupti_ext.kernel_keys import is_comm_kernel

            if len(cache) >= _COMM_CACHE_MAX:
                cache.clear()
            verdict = cache[key] = bool(is_comm_kernel(key, cls._comm_extra))
        return verdict

    @classmethod
    def _publish(
        cls, report: Report, payloads: list[RankPayload], sequence: int, window_s: float
    ) -> None:
        info = cls._info
        assert info is not None and cls._job is not None
        choice = cls._backend_choice

        def convert() -> ScoreReport:
            return to_score_report(
                report,
                job=cls._job,  # type: ignore[arg-type]
                sequence=sequence,
                generated_at=datetime.now(UTC),
                window_s=window_s,
                rank_info={p.info.rank: p.info for p in payloads},
                world_size=info.world_size,
                kernel_timing=KernelTiming(
                    backend=choice.name if choice else "none",
                    reason=choice.reason if choice else "",
                ),
            )

        score_report = cls._guard.call("report.convert", convert, None)
        if score_report is None:
            return
        cls._latest = score_report
        for listener in list(cls._listeners):
            cls._guard.call("listener", functools.partial(listener, score_report), None)

    # --- beyond NVRx: reporters and health ---------------------------------------

    @classmethod
    def latest_score_report(cls) -> ScoreReport | None:
        """The ScoreReport of the latest report this rank produced, or None."""
        return cls._latest

    @classmethod
    def reporter(cls) -> Any:
        """The publisher ``initialize(reporter=...)`` started on this rank, or None
        (its ``stats()`` count published, dropped and refused reports)."""
        return cls._publisher

    @classmethod
    def add_report_listener(cls, listener: ReportListener) -> None:
        """Call ``listener(score_report)`` after each report this rank produces (group
        rank 0 when ``gather_on_rank0``, else every rank). A raising listener is logged
        and counted, never propagated. Listeners stay registered across shutdown."""
        with cls._lock:
            if listener not in cls._listeners:
                cls._listeners.append(listener)

    @classmethod
    def remove_report_listener(cls, listener: ReportListener) -> None:
        with cls._lock:
            if listener in cls._listeners:
                cls._listeners.remove(listener)

    @classmethod
    def internal_errors(cls) -> dict[str, int]:
        """Internal failures since ``initialize``, by where they happened."""
        return cls._guard.counts()

    @classmethod
    def kernel_timing_backend(cls) -> str:
        """Name of the kernel-timing backend in use (``none`` on CPU-only machines)."""
        choice = cls._backend_choice
        return choice.name if choice is not None else "none"


def _location(frame: Any) -> str:
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


def _cuda_synchronize() -> None:
    # Only reached with a GPU backend: a CPU-only job makes no CUDA call at all.
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()
