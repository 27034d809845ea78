"""Runtime control on real gloo ranks: rank 0's control document changes the report
interval, disables and re-enables detection and retunes sampling mid-run, and every rank
applies each change at the same report."""

from __future__ import annotations

import pickle
from itertools import pairwise
from typing import Any

import control_ranks
import pytest

from pacekeeper.detector.local_world import spawn_world

WORLD = 3


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    out = tmp_path_factory.mktemp("control")
    spawn_world(control_ranks.controlled_world, WORLD, str(out))
    return [pickle.loads((out / f"rank{r}.pkl").read_bytes()) for r in range(WORLD)]


def _first_report_from(records: list[tuple[Any, ...]], it: int) -> tuple[Any, ...]:
    return next(r for r in records if r[0] >= it)


def test_every_rank_reports_at_the_same_iterations_under_the_same_control(
    world: list[dict[str, Any]],
) -> None:
    assert all(w["errors"] == {} for w in world), [w["errors"] for w in world]
    first = world[0]["records"]
    assert len(first) > 10
    for other in world[1:]:
        assert other["records"] == first


def test_a_new_interval_applies_at_the_next_report_on_every_rank(
    world: list[dict[str, Any]],
) -> None:
    records = world[0]["records"]
    before = [r for r in records if r[0] < 60]
    assert before and all(r[2] == 0.05 for r in before)
    switched = _first_report_from(records, 60)
    assert switched[2] == 0.25  # the first report after the write applied it
    assert switched[5] > 0  # applied at a report, not at initialize
    # ~10 ms steps: a count of about 5 iterations per 50 ms, about 25 per 250 ms, from
    # the next iteration on (the tracker's count, re-estimated at every report).
    counts_before = [r[6] for r in records if 30 <= r[0] < 60]
    counts_after = [r[6] for r in records if switched[0] < r[0] < 150]
    assert counts_before and max(counts_before) <= 8
    assert counts_after and min(counts_after) >= 3 * max(counts_before)


def test_disabled_detection_produces_nothing_until_enabled_again(
    world: list[dict[str, Any]],
) -> None:
    records = world[0]["records"]
    off = _first_report_from(records, 150)
    on = _first_report_from(records, 220)
    disabled = [r for r in records if off[0] <= r[0] < on[0]]
    assert disabled and all(r[1] is False for r in disabled)
    assert on[1] is True
    reports = dict((it, (seq, num)) for it, seq, num in world[0]["reports"])
    assert all(reports[r[0]][0] is None for r in disabled)  # rank 0 got no report
    produced = [seq for it, (seq, _) in sorted(reports.items()) if seq is not None]
    assert produced == list(range(1, len(produced) + 1))  # no sequence lost or reused
    # The enabling report covers a window that was not timed: the next one is produced.
    assert reports[on[0]][0] is None
    assert reports[_first_report_from(records, on[0] + 1)[0]][0] is not None


def test_sampling_and_thresholds_retuned_at_the_same_report(world: list[dict[str, Any]]) -> None:
    records = world[0]["records"]
    on = _first_report_from(records, 220)
    assert (on[3], on[4]) == (2, 0.5)
    assert all(w["profiling_interval"] == 2 for w in world)
    later = [r[0] for r in records if r[0] >= on[0]]
    reports = dict((it, (seq, num)) for it, seq, num in world[0]["reports"])
    # Every second entry timed: a window of n iterations holds about n / 2 samples.
    windows = [(b - a, reports[b][1]) for a, b in pairwise(later)]
    assert windows and all(abs(num - n / 2) <= 1 for n, num in windows), windows
