"""``Detector.initialize``'s own arguments, checked and gathered into a ``RunConfig``.

Separate from the shell so the rules for bad input (a ``ValueError`` naming the argument,
raised before anything starts) read in one place and test without a detector running.
Environment variables are ``env``'s; the process group is checked by ``gather``.

What NVRx accepts is accepted with NVRx's meaning: ``report_time_interval=0`` (report
every ``max(1, profiling_interval)`` iterations once the step time is known),
``profiling_interval=0`` (time every entry, where NVRx divides by zero at the first
section entry), and a bare score name for ``scores_to_compute`` (NVRx tests membership
with ``in``). What NVRx would silently misread still raises: a negative or infinite
interval, a score name that is neither known nor ``"all"``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

SCORE_NAMES = ("relative_perf_scores", "individual_perf_scores")

MissingScores = Literal["nan", "absent"]
MISSING_SCORES: tuple[MissingScores, ...] = ("nan", "absent")

REPORT_ON_JOB_GROUP = "job"
"""``report_backend`` value that runs the detector's collectives on the job's own group,
as NVRx does (no separate group, no timeout of the detector's own)."""

_SEPARATORS = re.compile(r"[\s,;|+]+")


class _DefaultInterval(int):
    """``profiling_interval``'s default: 1, told apart from a 1 the user passed."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "1"


DEFAULT_PROFILING_INTERVAL: int = _DefaultInterval(1)
"""``initialize``'s default ``profiling_interval`` (1, NVRx's). Left at it, kernel
tracing samples entries by the per-window rule (cupti_ext/sampling.py); any value
passed, 1 too, is traced at exactly that cadence, as NVRx does."""


@dataclass(frozen=True, slots=True)
class RunConfig:
    """The validated arguments of one ``initialize``."""

    scores_to_compute: list[str]
    gather_on_rank0: bool
    profiling_interval: int
    """As given (0 allowed); sections time every ``max(1, profiling_interval)``-th entry."""
    report_time_interval: float
    node_name: str | None
    """As given; ``identity.resolve_node_name`` fills in the default."""
    missing_scores: MissingScores = "nan"
    adaptive_interval: bool = True
    report_timeout_s: float | None = None
    """None: ``$PACEKEEPER_REPORT_TIMEOUT_S``, else 60 s (``env``)."""
    report_backend: str | None = None
    """None: gloo; ``"job"``: the job's group itself; else a torch.distributed backend."""
    interval_given: bool = True
    """Whether the user chose ``profiling_interval``. True: every entry the sections
    profile has its kernels traced, as NVRx does; False (``DEFAULT_PROFILING_INTERVAL``,
    or a bare 1 from a caller that cannot tell): a per-window share of them
    (cupti_ext/sampling.py)."""


def build_config(
    scores_to_compute: Sequence[str] | str,
    gather_on_rank0: bool,
    profiling_interval: int,
    report_time_interval: float,
    node_name: str | None,
    *,
    missing_scores: str = "nan",
    adaptive_interval: bool = True,
    report_timeout_s: float | None = None,
    report_backend: str | None = None,
    interval_given: bool | None = None,
) -> RunConfig:
    """Check ``initialize``'s arguments in its order; raises ValueError naming the first bad one."""
    scores = validate_scores(scores_to_compute)
    validate_interval(report_time_interval, profiling_interval)
    if node_name is not None and (not isinstance(node_name, str) or not node_name):
        raise ValueError(f"node_name={node_name!r} must be a non-empty string or None")
    if missing_scores not in MISSING_SCORES:
        raise ValueError(f"missing_scores={missing_scores!r}: use 'nan' (NVRx) or 'absent'")
    if report_timeout_s is not None:
        validate_timeout("report_timeout_s", report_timeout_s)
    if report_backend is not None and (not isinstance(report_backend, str) or not report_backend):
        raise ValueError(
            f"report_backend={report_backend!r}: use None (gloo), 'job' or a backend name"
        )
    return RunConfig(
        scores_to_compute=scores,
        gather_on_rank0=bool(gather_on_rank0),
        profiling_interval=int(profiling_interval),
        interval_given=(
            is_interval_given(profiling_interval) if interval_given is None else interval_given
        ),
        report_time_interval=float(report_time_interval),
        node_name=node_name,
        missing_scores="nan" if missing_scores == "nan" else "absent",
        adaptive_interval=bool(adaptive_interval),
        report_timeout_s=None if report_timeout_s is None else float(report_timeout_s),
        report_backend=report_backend,
    )


def is_interval_given(profiling_interval: int) -> bool:
    """Whether ``profiling_interval`` is the user's choice, where the caller did not
    say (``build_config(interval_given=None)``): the sentinel default is not, any value
    but 1 is, and a bare 1 is taken for NVRx's default (a caller passing the default on
    as a plain 1 cannot tell it from a choice), so such jobs keep per-window sampling.
    ``initialize`` tells for certain with ``interval_given=profiling_interval is not
    DEFAULT_PROFILING_INTERVAL``."""
    if isinstance(profiling_interval, _DefaultInterval):
        return False
    return profiling_interval != 1


def _unknown(scores_to_compute: Any) -> ValueError:
    return ValueError(
        f"scores_to_compute={scores_to_compute!r}: use 'all', a score name or a list of "
        f"{', '.join(SCORE_NAMES)}"
    )


def validate_scores(scores_to_compute: Any) -> list[str]:
    """The score names to compute, in ``SCORE_NAMES`` order when ``"all"``.

    A string is read as NVRx's ``in`` test reads it: ``"all"``, one name, or names run
    together (``"relative_perf_scores,individual_perf_scores"``).
    """
    if isinstance(scores_to_compute, str):
        names: tuple[Any, ...] = tuple(n for n in _SEPARATORS.split(scores_to_compute) if n)
        if not names:
            raise _unknown(scores_to_compute)
    else:
        try:
            names = tuple(scores_to_compute)
        except TypeError:
            raise _unknown(scores_to_compute) from None
    # Every name is checked before "all" widens the list: a typo beside it is still a typo.
    unknown = [n for n in names if n not in SCORE_NAMES and n != "all"]
    if unknown:
        raise ValueError(
            f"scores_to_compute: unknown score name {unknown[0]!r}; "
            f"known: {', '.join(SCORE_NAMES)} (or 'all')"
        )
    if "all" in names:
        return list(SCORE_NAMES)
    return list(dict.fromkeys(names))


def validate_interval(report_time_interval: Any, profiling_interval: Any) -> None:
    if isinstance(report_time_interval, bool) or not isinstance(report_time_interval, int | float):
        raise ValueError(f"report_time_interval={report_time_interval!r} must be a number")
    if not math.isfinite(report_time_interval) or report_time_interval < 0:
        raise ValueError(
            f"report_time_interval={report_time_interval!r} must be >= 0 seconds and finite"
        )
    if isinstance(profiling_interval, bool) or not isinstance(profiling_interval, int):
        raise ValueError(f"profiling_interval={profiling_interval!r} must be an integer >= 0")
    if profiling_interval < 0:
        raise ValueError(f"profiling_interval={profiling_interval!r} must be >= 0")


def validate_timeout(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name}={value!r} must be a number of seconds")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name}={value!r} must be > 0 seconds and finite")
