"""Runtime control of a running job: the document a platform engineer or the controller
writes, and the settings a run follows once it is applied.

A ``Control`` comes from the job's StragglerReport ``spec.control`` (Kubernetes), the
ScoreBoard's ``control(job)`` (Ray) or a file; ``control_sources`` reads it on the
reporting rank and ``control_cycle`` hands it to every rank with the report, so all
ranks switch at the same report. Every field is optional: an absent (``None``) field, or
no document at all, means the value ``initialize`` was given. Pure and torch-free: the
wire form is checked here (a ``ValueError`` naming the path and value), so a bad
document is refused whole on the reporting rank and never reaches the others.

Wire form (camelCase, as the CRD's ``spec.control``)::

    {"enabled": false,
     "reportTimeIntervalS": 30, "profilingInterval": 4,
     "thresholds": {"gpuRelative": 0.7, "gpuIndividual": 0.7,
                    "sectionRelative": 0.7, "sectionIndividual": 0.7},
     "probe": {"id": "node-7-1733077800"}}

``probe``: every rank runs the confirmation probe (``probe``) once per new id, at the
report that applies it, and that report carries each rank's result.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from .score_report import PROBE_ID_PATTERN

DEFAULT_THRESHOLD = 0.75
"""NVRx's default of every ``identify_stragglers`` threshold."""

_THRESHOLD_KEYS = {
    "gpuRelative": "gpu_relative",
    "gpuIndividual": "gpu_individual",
    "sectionRelative": "section_relative",
    "sectionIndividual": "section_individual",
}
_CONTROL_KEYS = ("enabled", "reportTimeIntervalS", "profilingInterval", "thresholds", "probe")
_PROBE_ID = re.compile(PROBE_ID_PATTERN)


@dataclass(frozen=True, slots=True)
class Thresholds:
    """``Report.identify_stragglers``' four thresholds; None: NVRx's 0.75."""

    gpu_relative: float | None = None
    gpu_individual: float | None = None
    section_relative: float | None = None
    section_individual: float | None = None

    def resolved(self) -> dict[str, float]:
        """Keyword arguments for ``Report.identify_stragglers``."""
        return {
            "gpu_rel_threshold": _or_default(self.gpu_relative),
            "gpu_indiv_threshold": _or_default(self.gpu_individual),
            "section_rel_threshold": _or_default(self.section_relative),
            "section_indiv_threshold": _or_default(self.section_individual),
        }


def _or_default(value: float | None) -> float:
    return DEFAULT_THRESHOLD if value is None else value


@dataclass(frozen=True, slots=True)
class Control:
    """One control document; see the module docstring for its wire form."""

    enabled: bool | None = None
    report_time_interval_s: float | None = None
    profiling_interval: int | None = None
    thresholds: Thresholds = field(default_factory=Thresholds)
    probe_id: str | None = None
    """Run the confirmation probe for this request (each id once)."""

    @classmethod
    def from_wire(cls, data: Any, *, path: str = "control") -> Control:
        """Checked wire form; raises ValueError naming ``path.field`` and the value."""
        if data is None:
            return cls()
        _check_fields(path, data, _CONTROL_KEYS)
        enabled = data.get("enabled")
        if enabled is not None and not isinstance(enabled, bool):
            raise ValueError(f"{path}.enabled={enabled!r} must be true, false or null")
        interval = data.get("reportTimeIntervalS")
        if interval is not None:
            interval = _seconds(f"{path}.reportTimeIntervalS", interval)
        sampling = data.get("profilingInterval")
        if sampling is not None and (
            isinstance(sampling, bool) or not isinstance(sampling, int) or sampling < 0
        ):
            raise ValueError(f"{path}.profilingInterval={sampling!r} must be an integer >= 0")
        return cls(
            enabled=enabled,
            report_time_interval_s=interval,
            profiling_interval=sampling,
            thresholds=_thresholds(f"{path}.thresholds", data.get("thresholds")),
            probe_id=_probe(f"{path}.probe", data.get("probe")),
        )

    def to_wire(self) -> dict[str, Any]:
        """The wire form, without the fields left at None."""
        out: dict[str, Any] = {}
        if self.enabled is not None:
            out["enabled"] = self.enabled
        if self.report_time_interval_s is not None:
            out["reportTimeIntervalS"] = self.report_time_interval_s
        if self.profiling_interval is not None:
            out["profilingInterval"] = self.profiling_interval
        limits = {
            wire: getattr(self.thresholds, name)
            for wire, name in _THRESHOLD_KEYS.items()
            if getattr(self.thresholds, name) is not None
        }
        if limits:
            out["thresholds"] = limits
        if self.probe_id is not None:
            out["probe"] = {"id": self.probe_id}
        return out


def _check_fields(path: str, data: Any, allowed: tuple[str, ...]) -> None:
    if not isinstance(data, Mapping):
        raise ValueError(f"{path}={data!r} must be an object")
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise ValueError(f"{path}: unknown field(s) {', '.join(map(repr, unknown))}")


def _seconds(path: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{path}={value!r} must be a number of seconds")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{path}={value!r} must be >= 0 seconds and finite")
    return float(value)


def _probe(path: str, data: Any) -> str | None:
    if data is None:
        return None
    _check_fields(path, data, ("id",))
    pid = data.get("id")
    if not isinstance(pid, str) or not _PROBE_ID.fullmatch(pid):
        raise ValueError(
            f"{path}.id={pid!r} must be 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return pid


def _thresholds(path: str, data: Any) -> Thresholds:
    if data is None:
        return Thresholds()
    _check_fields(path, data, tuple(_THRESHOLD_KEYS))
    values: dict[str, float | None] = {}
    for wire, name in _THRESHOLD_KEYS.items():
        v = data.get(wire)
        if v is not None:
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0.0 <= v <= 1.0:
                raise ValueError(f"{path}.{wire}={v!r} is outside [0, 1]")
            v = float(v)
        values[name] = v
    return Thresholds(**values)


@dataclass(frozen=True, slots=True)
class ControlSettings:
    """What a run follows now: ``initialize``'s values with the applied control over them."""

    enabled: bool
    report_time_interval: float
    profiling_interval: int
    thresholds: Thresholds
    control: Control | None
    """The document these came from (None: none applied, ``initialize``'s values)."""
    report: int = 0
    """Sequence number of the report at which these were applied (0: at initialize)."""

    @classmethod
    def initial(cls, report_time_interval: float, profiling_interval: int) -> ControlSettings:
        return cls(True, report_time_interval, profiling_interval, Thresholds(), None)

    def under(self, control: Control | None, *, report: int) -> ControlSettings:
        """The settings ``control`` gives over these (``initialize``'s)."""
        c = control or Control()
        return ControlSettings(
            enabled=self.enabled if c.enabled is None else c.enabled,
            report_time_interval=(
                self.report_time_interval
                if c.report_time_interval_s is None
                else c.report_time_interval_s
            ),
            profiling_interval=(
                self.profiling_interval if c.profiling_interval is None else c.profiling_interval
            ),
            thresholds=c.thresholds,
            control=control,
            report=report,
        )

    def same_as(self, other: ControlSettings) -> bool:
        """Equal in everything a run follows (not in where or when they were applied)."""
        return (
            self.enabled == other.enabled
            and self.report_time_interval == other.report_time_interval
            and self.profiling_interval == other.profiling_interval
            and self.thresholds == other.thresholds
        )


class ControlExchange(Protocol):
    """What a run holds for runtime control (``control_cycle.RunControl``); a protocol so
    the run's state need not import the cycle that works on it."""

    settings: ControlSettings

    def exchange(self, run: Any, info: Any) -> bool: ...

    def discard_window(self, run: Any) -> None: ...

    def close(self) -> None: ...
