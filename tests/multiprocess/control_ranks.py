"""Rank body of the runtime-control test: a training loop whose control document changes
mid-run (written by rank 0 at fixed iterations, read only by rank 0)."""

from __future__ import annotations

import json
import os
import pickle
import time
from typing import Any

from pacekeeper.detector import Detector
from pacekeeper.detector.reports import Statistic

# (iteration before which rank 0 writes it, the document)
SCHEDULE: tuple[tuple[int, dict[str, Any] | None], ...] = (
    (60, {"reportTimeIntervalS": 0.25}),
    (150, {"enabled": False, "reportTimeIntervalS": 0.25}),
    (220, {"reportTimeIntervalS": 0.05, "profilingInterval": 2,
           "thresholds": {"sectionRelative": 0.5}}),
)  # fmt: skip
ITERATIONS = 300


def _write(path: str, doc: dict[str, Any] | None) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f)
    os.replace(tmp, path)


def controlled_world(rank: int, world_size: int, out_dir: str) -> None:
    path = os.path.join(out_dir, "control.json")
    # Only rank 0 reads its source; the others point at nothing, so whatever they
    # apply reached them through the report's broadcast.
    source = f"file:{path}" if rank == 0 else f"file:{path}.not-there-{rank}"
    Detector.initialize(
        report_time_interval=0.05, node_name=f"n{rank}", kernel_timing="none", control=source
    )
    schedule = dict(SCHEDULE)
    records: list[tuple[Any, ...]] = []
    reports: list[tuple[int, int | None, float | None]] = []
    for it in range(1, ITERATIONS + 1):
        if rank == 0 and it in schedule:
            _write(path, schedule[it])
        with Detector.detection_section("step", profile_cuda=False):
            time.sleep(0.008 + 0.001 * rank)  # ranks out of step in wall time
        time.sleep(0.002)
        report = Detector.generate_report_if_interval_elapsed()
        if Detector.is_interval_elapsed():
            state = Detector.control_state()
            assert state is not None
            tracker = Detector.report_interval_tracker
            assert tracker is not None
            records.append(
                (it, state.enabled, state.report_time_interval, state.profiling_interval,
                 state.thresholds.section_relative, state.report, tracker.iter_interval)
            )  # fmt: skip
            if rank == 0:
                latest = Detector.latest_score_report()
                num = None
                if report is not None:
                    step = report.local_section_summaries.get("step", {})
                    num = step.get(Statistic.NUM, 0)
                reports.append((it, None if report is None else latest.sequence, num))  # type: ignore[union-attr]
    result = {
        "records": records,
        "reports": reports,
        "errors": Detector.internal_errors(),
        "profiling_interval": Detector.profiling_interval,
    }
    Detector.shutdown()
    with open(os.path.join(out_dir, f"rank{rank}.pkl"), "wb") as f:
        pickle.dump(result, f)


def probe_world(rank: int, world_size: int, out_dir: str) -> None:
    """Reports under a control file that asks for the probe: nothing, ``p1`` twice, then
    ``p2``; rank 0 keeps each report's per-rank probe ids and devices."""
    path = os.path.join(out_dir, "control.json")
    source = f"file:{path}" if rank == 0 else f"file:{path}.not-there-{rank}"
    Detector.initialize(
        report_time_interval=3600, node_name=f"n{rank}", kernel_timing="none", control=source
    )
    seen: list[dict[int, Any]] = []
    for doc in (None, {"probe": {"id": "p1"}}, {"probe": {"id": "p1"}}, {"probe": {"id": "p2"}}):
        if rank == 0:
            _write(path, doc)
        with Detector.detection_section("step", profile_cuda=False):
            time.sleep(0.005)
        Detector.generate_report()
        latest = Detector.latest_score_report() if rank == 0 else None
        if latest is not None:
            seen.append({r.rank: r.probe for r in latest.ranks})
    with open(os.path.join(out_dir, f"rank{rank}.pkl"), "wb") as f:
        pickle.dump({"seen": seen, "errors": Detector.internal_errors()}, f)
    Detector.shutdown()
