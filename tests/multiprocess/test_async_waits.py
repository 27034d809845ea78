"""Async collectives' waits count where the job waits: ``Work.wait()`` after an
``async_op=True`` call or a batch of point-to-point transfers (issue 17: only the
launch was timed). Two real gloo ranks, rank 1 joining late; the detector's own report
collectives, for which rank 1 is just as late, count for nothing."""

from __future__ import annotations

import pickle

import pytest
import victim_worlds

from pacekeeper.detector.local_world import spawn_world

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def waits(tmp_path_factory: pytest.TempPathFactory) -> dict[int, dict]:
    out = tmp_path_factory.mktemp("async-waits")
    spawn_world(victim_worlds.async_world, 2, str(out))
    return {r: pickle.loads((out / f"rank{r}.pkl").read_bytes()) for r in range(2)}


def test_the_early_rank_waits_in_work_wait_not_at_launch(waits: dict[int, dict]) -> None:
    early, late = waits[0]["waits"], waits[1]["waits"]
    late_ns = victim_worlds.LATE_S * 1e9
    assert early["all_reduce launch"] < 0.5 * late_ns  # launching does not wait
    assert early["all_reduce"] > 0.6 * late_ns
    assert early["p2p"] > 0.6 * late_ns
    # The late rank found its peer waiting.
    assert late["all_reduce"] < 0.5 * late_ns and late["p2p"] < 0.5 * late_ns


def test_the_detectors_own_collectives_are_no_wait_of_the_jobs(waits: dict[int, dict]) -> None:
    assert waits[0]["waits"]["report"] < 0.3 * victim_worlds.LATE_S * 1e9
    assert waits[0]["errors"] == {} and waits[1]["errors"] == {}
