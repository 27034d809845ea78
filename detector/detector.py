"""The ``Detector`` shell: NVRx's class-level singleton API over the run it drives.

``initialize`` checks its arguments (``run_config``) and starts a ``RunState`` (the
backend, sections, baselines, identity and interval tracker of one run);
``generate_report`` is ``report_cycle`` over that run; ``shutdown`` drops it. The
class keeps what users read (NVRx's attributes), what outlives a run (listeners, the
latest report, the internal-error counts), and the hot-path handle tables.

Hot path: ``detection_section`` (a dict lookup returning a cached handle) and the
handle's enter/exit (see ``sections``). Everything else runs at report time, under the
guard: an internal failure is logged once, counted in ``internal_errors()``, and the
call degrades (``None`` report, no GPU data) instead of raising into training.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from . import env, report_cycle
from .control import ControlSettings
from .guard import Guard
from .interval import IntervalTracker
from .payload import MAX_NAMES, NAME_REFRESH_REPORTS
from .report_cycle import ReportListener
from .reporter_view import ReportGenerator
from .reports import Report
from .run_config import DEFAULT_PROFILING_INTERVAL, SCORE_NAMES, RunConfig, build_config
from .run_state import RunState
from .score_report import JobIdentity, ScoreReport
from .sections import CustomSection, SectionHandle
from .wrapping import CallableId, check, restore, wrap

if TYPE_CHECKING:
    from pacekeeper.cupti_ext import BackendChoice

__all__ = [
    "MAX_NAMES",
    "NAME_REFRESH_REPORTS",
    "SCORE_NAMES",
    "Detector",
    "DetectorStateError",
    "ReportListener",
]

_EMPTY: dict[str, SectionHandle] = {}


def _install_reporter(detector: Any, reporter: Any) -> Any:
    """The reporter for this rank, or None. Bad configuration raises ValueError naming
    the option or variable (at initialize, like every other bad input)."""
    if reporter is None and env.reporter_kind() is None:
        return None  # None with the variable set: the reporter reads PACEKEEPER_* itself
    if isinstance(reporter, str) and reporter.strip().lower() == "none":
        return None
    from pacekeeper.detector.reporters import install_reporter

    return install_reporter(detector, _with_elastic_incarnation(reporter))


def _with_elastic_incarnation(reporter: Any) -> Any:
    """Under torchrun, the restart count joins the incarnation (``identity``) unless the
    options name one."""
    from collections.abc import Mapping

    from .identity import elastic_incarnation

    incarnation = elastic_incarnation()
    if incarnation is None:
        return reporter
    if reporter is None:
        return {"incarnation": incarnation}
    if isinstance(reporter, str):
        return {"kind": reporter, "incarnation": incarnation}
    if isinstance(reporter, Mapping) and reporter.get("incarnation") is None:
        return {**reporter, "incarnation": incarnation}
    return reporter


def _run_control(config: RunConfig, control: Any, reporter: Any, publisher: Any) -> Any:
    """The run's ``RunControl``, or None when this run exchanges no control (the same
    answer on every rank). Bad values raise ValueError, at initialize."""
    from . import control_sources
    from .control_cycle import RunControl

    if not control_sources.control_mode(control, reporter):
        return None
    env.control_poll_s()  # checked on every rank, used on the reporting one
    base = ControlSettings.initial(config.report_time_interval, config.profiling_interval)
    return RunControl(base, control_sources.make_source(control, publisher))


class DetectorStateError(AssertionError, RuntimeError):
    """``initialize`` twice, or a report before ``initialize``: NVRx asserts there (an
    ``AssertionError``) and raises ``RuntimeError`` from an uninitialised section, so
    this error is both."""


def _is_reporter(run: RunState) -> bool:
    """Will this process be the reporting rank? Before ``init_process_group`` the
    launcher's ``$RANK`` says (torchrun and the operators set it); without it, yes."""
    if run.info.distributed:
        return run.info.is_reporter
    return env.launcher_rank() in (None, 0)


class Detector:
    """Straggler detector, used through class methods (NVRx's singleton shape)."""

    initialized: ClassVar[bool] = False
    scores_to_compute: ClassVar[list[str]] = []
    gather_on_rank0: ClassVar[bool] = True
    profiling_interval: ClassVar[int] = 1
    report_time_interval: ClassVar[float] = 60.0
    node_name: ClassVar[str] = ""
    custom_sections: ClassVar[dict[str, CustomSection]] = {}
    report_interval_tracker: ClassVar[IntervalTracker | None] = None
    cupti_manager: ClassVar[Any] = None
    """The run's kernel-timing backend (NVRx's attribute name; ``kernel_timing_backend()``
    names it); None when not running."""
    original_callables: ClassVar[dict[CallableId, Any]] = {}
    """What ``wrap_callables`` replaced, by id, until restored (NVRx's attribute)."""

    _run: ClassVar[RunState | None] = None
    # The hot path reads these straight off the class (no lookup through the run).
    _cuda_handles: ClassVar[dict[str, SectionHandle]] = _EMPTY
    _cpu_handles: ClassVar[dict[str, SectionHandle]] = _EMPTY
    _locations: ClassVar[dict[tuple[str, int], str]] = {}
    # The run's guard and backend choice, kept past shutdown so internal_errors() and
    # kernel_timing_backend() still answer for the run that ended.
    _guard: ClassVar[Guard] = Guard()
    _backend_choice: ClassVar[BackendChoice | None] = None
    _backend: ClassVar[Any] = None
    """The run's backend while it runs (benchmarks reach into it)."""
    _patched: ClassVar[list[Any]] = []
    _convert: ClassVar[report_cycle.Convert | None] = None
    """Makes the latest report's ScoreReport when first asked for, once (it caches)."""
    _latest_report: ClassVar[Report | None] = None
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
        profiling_interval: int = DEFAULT_PROFILING_INTERVAL,
        report_time_interval: float = 60,
        node_name: str | None = None,
        process_group: Any = None,
        *,
        job: JobIdentity | None = None,
        kernel_timing: str | None = None,
        reporter: Any = None,
        missing_scores: str = "nan",
        adaptive_interval: bool = True,
        report_timeout_s: float | None = None,
        report_backend: str | None = None,
        control: Any = None,
        time_collectives: bool = True,
    ) -> None:
        """Start detecting (NVRx's arguments, then pacekeeper's: ``process_group`` and
        keyword-only extras). May run before ``init_process_group``, as in NVRx's example:
        rank and world size are read at every report.

        Args:
            scores_to_compute: ``"all"``, ``relative_perf_scores``,
                ``individual_perf_scores``, or a list of those names.
            gather_on_rank0: report every rank's scores on group rank 0 (others get None);
                if False every rank gets a report with its own scores.
            profiling_interval: time every n-th entry of each section (0: every entry).
            report_time_interval: seconds between reports of
                ``generate_report_if_interval_elapsed`` (0: every
                ``max(1, profiling_interval)`` iterations once the step time is known).
            node_name: node name in reports; default ``$NODE_NAME`` on Kubernetes, else
                the host name.
            process_group: torch.distributed group whose ranks report together (default
                WORLD); not in NVRx.
            job: identity put into ``ScoreReport``s; default from the environment.
            kernel_timing: ``auto|cupti|events|none`` (default ``$PACEKEEPER_KERNEL_TIMING``).
            reporter: where the reporting rank publishes each ``ScoreReport``:
                ``ray``, ``kubernetes``, ``auto``, ``none``, or a mapping of reporter
                options (docs/transports.md). Default: ``$PACEKEEPER_REPORTER`` when set
                (an annotated job gets it from its environment), else nowhere, as NVRx.
            missing_scores: ``"nan"`` (NVRx): a computed score kind lists every rank, NaN
                where nothing could be scored; ``"absent"``: such scores are left out.
            adaptive_interval: re-estimate the report interval at every report (True);
                False fixes it once, as NVRx.
            report_timeout_s: how long one report collective may wait on the detector's
                own process group before the report returns None (default
                ``$PACEKEEPER_REPORT_TIMEOUT_S``, else 60).
            report_backend: backend of that group: None (gloo), another backend name, or
                ``"job"`` to run on the job's group itself, as NVRx (no timeout of ours).
            control: runtime control (docs/detector.md): ``"auto"`` (default, or
                ``$PACEKEEPER_CONTROL``: on when a reporter is configured, read through
                it), ``"none"``, ``"file:PATH"``, or an object with ``latest()``. Give
                the same value on every rank: it adds a broadcast to every report.
            time_collectives: time the job's blocking ``torch.distributed`` collectives
                and take the wait out of the sections around them (True; docs/detector.md,
                "Culprit and victims"); DDP models are found and watched without a call
                (``watch_ddp``; docs/detector.md, "Topology without set_topology").

        Raises ValueError naming the argument on bad input, ``DetectorStateError`` (an
        ``AssertionError``, as NVRx's assert, and a ``RuntimeError``) if already
        initialised.
        """
        with cls._lock:
            if cls.initialized:
                raise DetectorStateError("Detector is already initialized; call shutdown() first")
            config = build_config(
                scores_to_compute,
                gather_on_rank0,
                profiling_interval,
                report_time_interval,
                node_name,
                missing_scores=missing_scores,
                adaptive_interval=adaptive_interval,
                report_timeout_s=report_timeout_s,
                report_backend=report_backend,
                # The sentinel default tells a 1 the user wrote (every profiled entry
                # traced, as NVRx does) from one left unset (sampled per window).
                interval_given=profiling_interval is not DEFAULT_PROFILING_INTERVAL,
            )
            run = RunState.start(
                config, process_group=process_group, kernel_timing=kernel_timing, job=job
            )
            cls.scores_to_compute = config.scores_to_compute
            cls.gather_on_rank0 = config.gather_on_rank0
            cls.profiling_interval = config.profiling_interval
            cls.report_time_interval = config.report_time_interval
            cls.node_name = run.node_name
            cls._run = run
            cls._guard = run.guard
            cls._backend = run.backend
            cls.cupti_manager = run.backend
            cls._backend_choice = run.choice
            cls.custom_sections = run.table.sections
            cls._patched = []
            cls.original_callables = {}
            cls._convert = None
            cls._latest_report = None
            cls.report_interval_tracker = run.tracker
            cls._cuda_handles = run.table.cuda_handles
            cls._cpu_handles = run.table.cpu_handles
            cls.initialized = True
            cls._publisher = None
            run.time_collectives = time_collectives
            if time_collectives:
                _time_collectives(run.guard)
            report_cycle.discover(run, at_start=True)
            try:
                if cls.gather_on_rank0 and _is_reporter(run):
                    cls._publisher = _install_reporter(cls, reporter)
                run.control = _run_control(config, control, reporter, cls._publisher)
            except Exception:
                cls.shutdown()  # bad reporter or control configuration: nothing half-started
                raise

    @classmethod
    def shutdown(cls) -> None:
        """Stop detecting: restore wrapped callables, release the backend. Idempotent."""
        with cls._lock:
            if not cls.initialized:
                return
            if cls._run is not None:
                cls._run.close_control()
            publisher, cls._publisher = cls._publisher, None
            if publisher is not None:
                from pacekeeper.detector.reporters import uninstall_reporter

                uninstall_reporter(cls, publisher)  # never raises
            cls.restore_original_callables()
            run, cls._run = cls._run, None
            if run is not None:
                run.close()
            cls._cuda_handles = _EMPTY
            cls._cpu_handles = _EMPTY
            cls._backend = None
            cls.cupti_manager = None
            cls.report_interval_tracker = None
            cls.initialized = False

    @classmethod
    def set_topology(
        cls,
        *,
        coords: Mapping[str, int] | None = None,
        mesh: Any = None,
        groups: Mapping[str, Any] | None = None,
        group: str | None = None,
    ) -> None:
        """Say where this rank sits in the job's parallel layout (call on every rank, any
        time after ``initialize``): a named ``DeviceMesh``, the process group of each
        dimension, the coordinates themselves (``{"dp": 1, "pp": 3, "tp": 0}``), and/or
        a role name. Reports then carry each rank's ``group`` and ``coords``, and the
        controller compares ranks with their peers (docs/detector.md, "Peer groups").
        ValueError names the argument on bad input; without ``initialize`` it raises
        ``DetectorStateError``."""
        from .topology import topology_of

        topology = topology_of(coords=coords, mesh=mesh, groups=groups, group=group)
        with cls._lock:
            if cls._run is None:
                raise DetectorStateError("Detector is not initialized; call initialize() first")
            cls._run.payloads.topology = topology

    @classmethod
    def watch_ddp(cls, model: Any, process_group: Any = None) -> bool:
        """Time the wait at the end of each backward of a ``DistributedDataParallel``
        ``model`` (its reducer talks to the process group from C++, past the collective
        wrappers): registers DDP's default mean all-reduce as a communication hook that
        times its last bucket. False when the model has a hook of its own (DDP takes one).
        The detector does this itself for the DDP models it finds (at initialize and the
        first report); call it for a model built later, or to name its group.
        """
        from .collectives import watch_ddp

        return watch_ddp(model, process_group)

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
        run = cls._run
        if run is None or not cls.initialized:
            raise DetectorStateError("Detector is not initialized.")
        if not isinstance(name, str):
            raise TypeError(f"section name must be a str, got {type(name).__name__}")
        return run.table.handle(name, profile_cuda, location)

    # --- wrapping ----------------------------------------------------------------

    @classmethod
    def wrap_callables(cls, callable_ids: Sequence[CallableId], profile_cuda: bool = True) -> None:
        """Time each ``getattr(id.obj, id.name)`` call as section ``str(id)``."""
        for cid in callable_ids:
            check(cid)
            handle = cls._section(str(cid), profile_cuda, str(cid))
            original = getattr(cid.obj, cid.name)
            cls._patched.append(wrap(cid, handle))
            cls.original_callables.setdefault(cid, original)
            run = cls._run
            if run is not None:  # a DDP model's method: its backward wait is timed too
                report_cycle.watch_if_ddp(run, cid.obj)

    @classmethod
    def restore_original_callables(cls) -> None:
        """Undo every ``wrap_callables``, latest first."""
        while cls._patched:
            restore(cls._patched.pop())
        cls.original_callables = {}

    # --- reports -----------------------------------------------------------------

    @classmethod
    def generate_report_if_interval_elapsed(cls) -> Report | None:
        """Call once per iteration on every rank; reports when the interval has elapsed."""
        if not cls.initialized or cls.report_interval_tracker is None:
            raise DetectorStateError("Detector is not initialized.")
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
        run = cls._run
        if not cls.initialized or run is None:
            raise DetectorStateError("Detector is not initialized.")
        # NVRx's attributes are read here, not frozen at initialize: a user may set them.
        produced = report_cycle.generate(
            run, scores_to_compute=cls.scores_to_compute, gather_on_rank0=cls.gather_on_rank0
        )
        if run.control is not None:  # NVRx's attributes say what the run follows now
            cls.profiling_interval = run.control.settings.profiling_interval
            cls.report_time_interval = run.control.settings.report_time_interval
        if produced is None:
            return None
        report, convert = produced
        cls._latest_report = report
        cls._convert = convert
        if cls._listeners:
            score_report = convert()
            if score_report is not None:
                report_cycle.notify(run.guard, cls._listeners, score_report)
        return report

    # --- beyond NVRx: reporters and health ---------------------------------------

    @classmethod
    def latest_score_report(cls) -> ScoreReport | None:
        """The ScoreReport of the latest report this rank produced, or None."""
        convert = cls._convert
        return None if convert is None else convert()

    reporter: ClassVar[ReportGenerator]
    """NVRx's report-generator attributes (``reporter.rank``, ``.world_size``, ...);
    calling it, ``Detector.reporter()``, returns the publisher ``initialize(reporter=...)``
    started on this rank, or None."""

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
    def control_state(cls) -> ControlSettings | None:
        """The settings runtime control has this run follow (None: no control exchange,
        or not running): enabled, report interval, sampling, thresholds, and since which
        report. The same on every rank."""
        run = cls._run
        return run.control.settings if run is not None and run.control is not None else None

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


Detector.reporter = ReportGenerator(Detector)


def _time_collectives(guard: Any) -> None:
    # Only in a process that has torch already: a torch-free job, or one whose detector
    # starts before it imports torch, is not made to import it here (the first report
    # that finds a process group installs the wrappers then: ``RunState.refresh``).
    if "torch" not in sys.modules:
        return
    from .collectives import install

    guard.call("collectives.install", install, None)
