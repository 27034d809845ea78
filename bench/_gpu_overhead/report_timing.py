"""What ``generate_report`` costs on one rank, ours against NVRx: first and warm
reports after traced steps, our backend's ``collect`` alone and idle, and a cProfile
of where a report's time goes. Apart from the paired blocks because a report is
timed call by call, outside any A/B pair."""

from __future__ import annotations

import contextlib
import statistics
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .mode import Mode
from .report_phases import report_phases
from .workloads import Step


def report_times(det: Any, step: Step, section_kw: dict[str, Any], repeats: int) -> dict[str, Any]:
    """generate_report on one rank after 40 traced steps, repeated; first and warm. For
    ours, also the backend's ``collect`` (the CUPTI part of a report) on its own."""
    import torch

    def timed(call: Callable[[], Any]) -> tuple[float, Any]:
        for _ in range(40):
            with det.detection_section("step", **section_kw):
                step()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = call()
        return (time.perf_counter() - t0) * 1e3, out

    counts: list[dict[str, int]] = []
    runs = []
    latest = getattr(det, "latest_score_report", None)
    for _ in range(repeats):
        runs.append(timed(det.generate_report))
        timing = getattr(latest(), "kernel_timing", None) if latest else None
        if timing is not None:
            # Issue 19: every window's kernels accounted for (40 steps' worth each).
            counts.append(
                {
                    k: getattr(timing, f"{k}_records")
                    for k in ("attributed", "unattributed", "held", "dropped")
                }
            )
    times = [t for t, _ in runs]
    report_out = runs[-1][1]
    backend = getattr(det, "_backend", None)
    collect = getattr(backend, "collect", None)
    collect_ms = [timed(collect)[0] for _ in range(repeats)] if collect else []
    collect_parts = dict(getattr(backend, "last_collect", {}))
    idle_ms: list[float] = []
    if collect:
        # A second collect right after one has nothing to hand over: the fence alone.
        for _ in range(repeats):
            collect()
            t0 = time.perf_counter()
            collect()
            idle_ms.append((time.perf_counter() - t0) * 1e3)
    return {
        "first_ms": times[0],
        "warm_ms_median": statistics.median(times[1:]),
        "warm_ms_min": min(times[1:]),
        "kernel_keys_in_report": len(getattr(report_out, "local_kernel_summaries", {}) or {}),
        "kernel_counts": counts,
        "collect_ms_median": statistics.median(collect_ms) if collect_ms else None,
        "collect_idle_ms_median": statistics.median(idle_ms) if idle_ms else None,
        "last_collect_after_steps": collect_parts,
        # How CUPTI keeps its buffers (buffer_policy.py; the environment chooses).
        "cupti_buffers": dict(getattr(getattr(backend, "_session", None), "start_info", {})),
        "gpu_scores": dict(getattr(report_out, "gpu_relative_perf_scores", {}) or {}),
    }


def profile_reports(det: Any, step: Step, repeats: int, top: int = 20) -> list[dict[str, Any]]:
    """cProfile over ``repeats`` reports (40 traced steps before each, not profiled):
    the functions with the most own time, per report. Profiling inflates Python-heavy
    parts; read the shares, not the totals."""
    import cProfile
    import pstats

    import torch

    prof = cProfile.Profile()
    for _ in range(repeats):
        for _ in range(40):
            with det.detection_section("step", profile_cuda=True):
                step()
        torch.cuda.synchronize()
        prof.enable()
        det.generate_report()
        prof.disable()
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    rows = sorted(stats.items(), key=lambda kv: kv[1][2], reverse=True)[:top]

    def name(file: str, line: int, fn: str) -> str:
        return f"{Path(file).name}:{line}({fn})"

    return [
        {
            "function": name(file, line, fn),
            "calls_per_report": nc / repeats,
            "own_us_per_report": tt / repeats * 1e6,
            "cumulative_us_per_report": ct / repeats * 1e6,
            # Where a builtin's time comes from (numpy's tolist, sorted, len...): its
            # three costliest callers, own time per report in each.
            "callers_own_us": {
                name(*caller): round(c_tt / repeats * 1e6, 1)
                for caller, (_, _, c_tt, _) in sorted(
                    callers.items(), key=lambda kv: kv[1][2], reverse=True
                )[:3]
            },
        }
        for (file, line, fn), (_, nc, tt, ct, callers) in rows
    ]


def bench_reports(
    step: Step,
    repeats: int,
    names: list[str],
    modes: dict[str, Callable[[], Mode]],
    rounds: int = 1,
) -> dict[str, Any]:
    """Each mode's reports, the modes in turn; ``rounds`` times over, so a host whose
    speed drifts (NVRx's report read 0.80 ms in one run and 1.41 in the next) is
    compared within each round: ``ratio_to_nvrx`` is ours over NVRx's warm median of the
    same round, per round. Phases and the cProfile come from the first round."""
    out: dict[str, Any] = {}
    per_round: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names:
            mode = modes[name]()
            try:
                mode.setup()
                times = report_times(mode.det, step, {"profile_cuda": True}, repeats)  # type: ignore[attr-defined]
                per_round[name].append(times["warm_ms_median"])
                if r == 0:
                    out[name] = times
                    if name.startswith("ours"):
                        out[name]["phases"] = report_phases(mode.det, step, repeats)  # type: ignore[attr-defined]
                        out[name]["profile"] = profile_reports(mode.det, step, repeats)  # type: ignore[attr-defined]
            except Exception:
                out.setdefault(name, {})["error"] = traceback.format_exc(limit=3)
            finally:
                with contextlib.suppress(Exception):
                    mode.teardown()
    nvrx = per_round.get("nvrx", [])
    for name, medians in per_round.items():
        if name not in out:
            continue
        out[name]["rounds_warm_ms_median"] = medians
        if name != "nvrx" and len(nvrx) == len(medians) and medians:
            ratios = [a / b for a, b in zip(medians, nvrx, strict=True)]
            out[name]["ratio_to_nvrx"] = {
                "per_round": ratios,
                "median": statistics.median(ratios),
                "max": max(ratios),
            }
    return out
