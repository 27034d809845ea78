"""What the framework callbacks share: starting the Detector, and what they do with a
report on the reporting rank: judge it against thresholds (the callback's, unless
runtime control set others), log stragglers and the best and worst scores, and sum a
score mapping up for a framework's metric logger.

Kept apart from the callbacks so Lightning's and Hugging Face's read the same, and test
without either framework installed.
"""

from __future__ import annotations

import logging
import math
import statistics
from collections.abc import Mapping
from typing import Any

from ..control import Thresholds
from ..detector import Detector
from ..reports import Report


def in_force(own: Thresholds) -> Thresholds:
    """A callback's thresholds (None: that kind is not judged) with runtime control's
    over them (docs/detector.md)."""
    state = Detector.control_state()
    if state is None:
        return own
    c = state.thresholds
    return Thresholds(
        own.gpu_relative if c.gpu_relative is None else c.gpu_relative,
        own.gpu_individual if c.gpu_individual is None else c.gpu_individual,
        own.section_relative if c.section_relative is None else c.section_relative,
        own.section_individual if c.section_individual is None else c.section_individual,
    )


def start_detector(callback: Any) -> None:
    """``Detector.initialize`` with a callback's settings (gathered on rank 0)."""
    Detector.initialize(
        scores_to_compute=callback.scores_to_compute,
        gather_on_rank0=True,
        profiling_interval=callback.profiling_interval,
        report_time_interval=callback.report_time_interval,
        **callback.detector_options,
    )


_KEYS = (
    ("straggler_gpus_relative", "gpu_relative"),
    ("straggler_gpus_individual", "gpu_individual"),
    ("straggler_sections_relative", "section_relative"),
    ("straggler_sections_individual", "section_individual"),
)


def judge(report: Report, thresholds: Thresholds) -> dict[str, Any]:
    """``identify_stragglers``' four keys, each empty where its threshold is None."""
    limits = in_force(thresholds)
    # A threshold of 0 flags nothing (scores are never below 0): the kinds not judged.
    found = report.identify_stragglers(
        gpu_rel_threshold=limits.gpu_relative or 0.0,
        section_rel_threshold=limits.section_relative or 0.0,
        gpu_indiv_threshold=limits.gpu_individual or 0.0,
        section_indiv_threshold=limits.section_individual or 0.0,
    )
    return {key: found[key] if getattr(limits, name) is not None else type(found[key])()
            for key, name in _KEYS}  # fmt: skip


def any_found(stragglers: Mapping[str, Any]) -> bool:
    return any(bool(v) for v in stragglers.values())


def log_stragglers(logger: logging.Logger, stragglers: Mapping[str, Any]) -> None:
    for key, found in stragglers.items():
        if found:
            logger.warning("stragglers detected", extra={"kind": key, "stragglers": found})


def format_scores(
    rank_to_score: Mapping[int, float], rank_to_node: Mapping[int, str], num: int
) -> str:
    """The ``num`` worst and best ranks (every rank when that is all of them), worst first;
    NaN scores (nothing measured) last."""
    ranked = sorted(rank_to_score.items(), key=lambda rs: (math.isnan(rs[1]), rs[1]))
    lines = []
    if len(ranked) > 2 * num:
        lines.append(f" worst {num} of {len(ranked)} ranks:")
        lines += [_line(r, s, rank_to_node) for r, s in ranked[:num]]
        lines.append(f" best {num} of {len(ranked)} ranks:")
        lines += [_line(r, s, rank_to_node) for r, s in reversed(ranked[-num:])]
    else:
        lines += [_line(r, s, rank_to_node) for r, s in ranked]
    return "\n".join(lines)


def _line(rank: int, score: float, rank_to_node: Mapping[int, str]) -> str:
    return f"  rank={rank} node={rank_to_node.get(rank, '<unk>')} score={score:.2f}"


def log_scores(logger: logging.Logger, report: Report, num: int) -> None:
    """Logs each score kind the report has, best and worst ``num`` ranks (INFO)."""
    for title, scores in (
        ("GPU relative performance", report.gpu_relative_perf_scores),
        ("GPU individual performance", report.gpu_individual_perf_scores),
    ):
        if scores:
            logger.info("%s:\n%s", title, format_scores(scores, report.rank_to_node, num))


def score_stats(prefix: str, scores: Mapping[int, float]) -> dict[str, float]:
    """``{prefix}/min``, ``/median``, ``/max`` over the ranks that have a score (NaN
    when none has)."""
    values = [v for v in scores.values() if not math.isnan(v)]
    if not values:
        return {f"{prefix}/{k}": math.nan for k in ("min", "median", "max")}
    return {
        f"{prefix}/min": min(values),
        f"{prefix}/median": statistics.median(values),
        f"{prefix}/max": max(values),
    }


def metrics(report: Report) -> dict[str, float]:
    """Min, median and max of every GPU score kind and section score, for a metric logger."""
    out: dict[str, float] = {}
    if report.gpu_relative_perf_scores:
        out |= score_stats("gpu_relative_perf", report.gpu_relative_perf_scores)
    if report.gpu_individual_perf_scores:
        out |= score_stats("gpu_individual_perf", report.gpu_individual_perf_scores)
    for name, scores in report.section_relative_perf_scores.items():
        out |= score_stats(f"section_relative_perf/{name}", scores)
    return out


def examine(
    logger: logging.Logger, report: Report, thresholds: Thresholds, num: int
) -> dict[str, Any]:
    """What a callback does with a report on the reporting rank: judge it, log the
    stragglers and (``num`` > 0) the best and worst GPU scores; returns the stragglers."""
    stragglers = judge(report, thresholds)
    log_stragglers(logger, stragglers)
    if num > 0:
        log_scores(logger, report, num)
    return stragglers
