"""``pacekeeper status ray``'s rows on real Ray: after the Ray-side runner notified and
tainted for a slow rank, the row names that rank, the taint it keeps and its budget."""

from __future__ import annotations

import uuid
from typing import Any

from controller_helpers import (
    STATE_KEY_BYTES,
    Clock,
    placed_report,
    ray_policy,
    start_workers,
    where,
)
from ray_helpers import driver_job, register

from pacekeeper.controller.cli.status import ray_rows
from pacekeeper.controller.cli.status_view import status_table
from pacekeeper.controller.sources.ray_scoreboard import KvStateStore, RayRunner, ScoreBoardSource
from pacekeeper.detector.reporters.ray_scoreboard import ScoreBoard

LADDER = {
    "notify": {"enabled": True, "timeoutS": 60},
    "taintNode": {"enabled": True, "timeoutS": 60},
}


def test_status_rows_show_the_slow_rank_the_taint_and_the_budget(
    ray_cluster: str, badge: Any
) -> None:
    import ray

    board = ray.remote(ScoreBoard).options(num_cpus=0).remote(persist=False)
    token = register(board, badge)
    store = KvStateStore(key=f"test/state/{uuid.uuid4().hex[:6]}", signing_key=STATE_KEY_BYTES)
    clock = Clock()
    job = driver_job("status")
    workers = start_workers(2)
    placements = where(workers)
    node = placements[0][1]
    runner = RayRunner(ray_policy(LADDER), source=ScoreBoardSource(board), store=store, clock=clock)
    for seq in range(2):
        report = placed_report(job, seq, clock.now, placements, slow={3: 0.4})
        ray.get(board.publish.remote(report.to_json(), token, "a"))
        runner.run_once()
        clock.advance(61)
    try:
        (row,) = ray_rows(board, store.load(), ray.get, clock.now)
        assert row.worst[0].rank == 3 and row.worst[0].score == 0.4
        assert f"taint on {node}" in row.marks
        assert row.actions_last_hour >= 1
        assert row.ladders == (f"{node}: taintNode x1",)
        assert row.verdict is None  # Ray keeps no decision records
        status_table([row], "t")
    finally:
        for w in [*workers, board]:
            ray.kill(w)
