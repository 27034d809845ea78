"""Report cadence on 4 real gloo ranks at NVRx's defaults with a nonzero interval.

tests/unit/detector/test_interval.py checks the tracker alone on a fake clock against
NVRx's tracker; this runs it inside the Detector on real ranks: real sleeps, the
agreement collective, and the report gathers whose time lands in the next step. The
issue's case: ``report_time_interval=0.5``, the default adaptive interval, steps of
8 ms +-5% (here paced to deadlines, and slower in stretches). When a new count took
effect at the next multiple of the absolute iteration, gaps of a few steps came after
each change of count (24 ms seen; with that rule put back, this run had 14 gaps under
0.25 s, the shortest 25 ms, and 33 reports against NVRx's 20). On both report paths
(``report_paths``: the interval agreement's maximum climbs and comes back down the tree).
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import nvrx_ranks
import pytest
import report_paths
import torch

WORLD = 4
STEPS = 1200
STEP_S = 0.5 / 62
"""About 8 ms (a count of 62 or 61), and 7% slower in every other 150 steps (58)."""
INTERVAL_S = 0.5


@pytest.fixture(scope="module", params=report_paths.MODES)
def cadence_world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> list[dict[str, Any]]:
    out = tmp_path_factory.mktemp("cadence")
    run = (STEPS, STEP_S, INTERVAL_S)
    report_paths.spawn(request.param, nvrx_ranks.jittery_cadence, WORLD, str(out), run)
    return report_paths.results(out, WORLD)


def nvrx_report_count(calls_per_rank: list[list[float]], interval_s: float) -> int:
    """Reports NVRx's rule makes on these steps, as its tracker's source reads: each
    rank's torch median (float32) of its step times, ``interval / median`` reduced with
    MAX over the ranks, truncated; a report at every multiple of that count from the
    17th call. NVRx takes the median of the first 16 steps only; here it is of every
    step: the job's speed changes (every other 150 steps are slower), and the first 16
    steps of ranks starting on a loaded machine are slow."""
    ratios = []
    for calls in calls_per_rank:
        steps = [b - a for a, b in pairwise(calls)]
        median = torch.median(torch.tensor(steps, dtype=torch.float32))
        ratios.append(float((interval_s / median).item()))
    count = int(max(*ratios, 1))
    n = len(calls_per_rank[0])
    return sum(1 for i in range(17, n + 1) if i % count == 0)


def test_every_rank_reports_at_the_same_iterations(cadence_world: list[dict[str, Any]]) -> None:
    assert all(r["errors"] == {} for r in cadence_world)
    assert all(r["reported"] == cadence_world[0]["reported"] for r in cadence_world)
    assert len(cadence_world[0]["reported"]) >= 5


def test_no_gap_between_reports_is_under_half_the_interval(
    cadence_world: list[dict[str, Any]],
) -> None:
    for rank, result in enumerate(cadence_world):
        # The clock reading just before the call that reported: what the tracker sees.
        times = [result["calls"][i - 1] for i in result["reported"]]
        gaps = zip(result["reported"][1:], (b - a for a, b in pairwise(times)), strict=True)
        short = [(i, round(g, 3)) for i, g in gaps if g < INTERVAL_S / 2]
        assert not short, f"rank {rank}: gaps under {INTERVAL_S / 2} s (iteration, s): {short}"


def test_report_count_is_close_to_nvrx_on_the_same_steps(
    cadence_world: list[dict[str, Any]],
) -> None:
    ours = len(cadence_world[0]["reported"])
    nvrx = nvrx_report_count([r["calls"] for r in cadence_world], INTERVAL_S)
    # Within 10% (the fake clock's test asks 5% of 3,000 steps; this is 1,200). The old
    # rule made 33 reports here against NVRx's 20.
    assert abs(ours - nvrx) <= max(1, round(0.1 * nvrx)), (ours, nvrx)
