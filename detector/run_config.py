"""``Detector.initialize``'s own arguments, checked and gathered into a ``RunConfig``.

Separate from the shell so the rules for bad input (a ``ValueError`` naming the argument,
raised before anything starts) read in one place and test without a detector running.
Environment variables are ``env``'s; the process group is checked by ``gather``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

SCORE_NAMES = ("relative_perf_scores", "individual_perf_scores")


@dataclass(frozen=True, slots=True)
class RunConfig:
    """The validated NVRx arguments of one ``initialize``."""

    scores_to_compute: tuple[str, ...]
    gather_on_rank0: bool
    profiling_interval: int
    report_time_interval: float
    node_name: str | None
    """As given; ``identity.resolve_node_name`` fills in the default."""


def build_config(
    scores_to_compute: Sequence[str] | str,
    gather_on_rank0: bool,
    profiling_interval: int,
    report_time_interval: float,
    node_name: str | None,
) -> RunConfig:
    """Check ``initialize``'s arguments in its order; raises ValueError naming the first bad one."""
    scores = validate_scores(scores_to_compute)
    validate_interval(report_time_interval, profiling_interval)
    if node_name is not None and (not isinstance(node_name, str) or not node_name):
        raise ValueError(f"node_name={node_name!r} must be a non-empty string or None")
    return RunConfig(
        scores_to_compute=scores,
        gather_on_rank0=bool(gather_on_rank0),
        profiling_interval=profiling_interval,
        report_time_interval=float(report_time_interval),
        node_name=node_name,
    )


def validate_scores(scores_to_compute: Any) -> tuple[str, ...]:
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


def validate_interval(report_time_interval: Any, profiling_interval: Any) -> None:
    if isinstance(report_time_interval, bool) or not isinstance(report_time_interval, int | float):
        raise ValueError(f"report_time_interval={report_time_interval!r} must be a number")
    if not math.isfinite(report_time_interval) or report_time_interval <= 0:
        raise ValueError(f"report_time_interval={report_time_interval!r} must be > 0 seconds")
    if isinstance(profiling_interval, bool) or not isinstance(profiling_interval, int):
        raise ValueError(f"profiling_interval={profiling_interval!r} must be an integer >= 1")
    if profiling_interval < 1:
        raise ValueError(f"profiling_interval={profiling_interval!r} must be >= 1")
