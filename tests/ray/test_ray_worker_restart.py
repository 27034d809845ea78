"""restartRank on Ray: the runner restarts exactly the slow rank's worker process."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from typing import Any

import pytest
from controller_helpers import Clock, ray_policy

from pacekeeper.controller.actuators.errors import GiveUp
from pacekeeper.controller.actuators.ray import RayActuators
from pacekeeper.controller.core.decisions import Verdict
from pacekeeper.controller.core.policy import ActionKind
from pacekeeper.controller.sources.ray_scoreboard import (
    KvStateStore,
    RayRunner,
    ScoreBoardSource,
)
from pacekeeper.detector.reporters.ray_scoreboard import ScoreBoard
from pacekeeper.detector.score_report import (
    JobIdentity,
    Platform,
    RankScores,
    ScoreReport,
)

RESTART = {
    "notify": {"enabled": True, "timeoutS": 60},
    "restartRank": {"enabled": True, "timeoutS": 600, "maxAttempts": 1},
}


def _report(job: JobIdentity, seq: int, clock: Clock, placements: list[tuple[int, str]]) -> Any:
    ranks = [
        RankScores(
            rank=r, node="node-0", ray_node_id=node_id, pid=pid,
            section_relative={"step": 0.5 if r == 1 else 1.0},
            section_samples=100,
        )
        for r, (pid, node_id) in enumerate(placements)
    ]  # fmt: skip
    return ScoreReport.build(
        job=job, sequence=seq, generated_at=clock.now, window_s=60.0, ranks=ranks
    )


def test_runner_restarts_only_the_slow_ranks_worker(ray_cluster: str) -> None:
    import ray

    # Defined here so Ray ships it by value (the test module is not importable there).
    class Worker:
        """Stands in for a Ray Train worker: an actor Ray restarts when its process dies."""

        def where(self) -> tuple[int, str]:
            return os.getpid(), ray.get_runtime_context().get_node_id()

    workers = [
        ray.remote(Worker).options(num_cpus=0, max_restarts=1, max_task_retries=-1).remote()
        for _ in range(2)
    ]
    before = ray.get([w.where.remote() for w in workers])
    board = (
        ray.remote(ScoreBoard).options(num_cpus=0).remote(store_prefix=f"r-{uuid.uuid4().hex[:6]}/")
    )
    store = KvStateStore(key=f"test/state/{uuid.uuid4().hex[:6]}")
    clock = Clock()
    job = JobIdentity(platform=Platform.RAY, name="restart", ray_job_id=uuid.uuid4().hex[:8])
    runner = RayRunner(
        ray_policy(RESTART), source=ScoreBoardSource(board), store=store, clock=clock
    )
    acted: list[tuple[ActionKind | None, str]] = []
    restarted: list[str] = []
    for seq in range(3):
        report = _report(job, seq, clock, before)
        ray.get(board.publish.remote(report.to_json(), job.key, "a"))
        result = runner.run_once()
        acted += [(d.action, d.subject) for d in result.decisions if d.verdict is Verdict.ACT]
        restarted += result.restarted
        clock.advance(61)
    assert (ActionKind.RESTART_RANK, "node/node-0") in acted
    assert restarted == ["rank 1: terminated"]
    after = ray.get([w.where.remote() for w in workers], timeout=60)
    assert after[0] == before[0], "the healthy rank's worker is untouched"
    assert after[1][0] != before[1][0], "the slow rank's worker runs in a new process"
    assert runner.run_once().restarted == [], "nothing is restarted twice"
    for w in workers:
        ray.kill(w)
    ray.kill(board)


def test_a_pid_that_is_not_a_ray_worker_is_never_signalled(ray_cluster: str) -> None:
    import ray

    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        node_id = ray.get_runtime_context().get_node_id()
        out = RayActuators().restart_workers(
            [{"rank": 5, "rayNodeId": node_id, "pid": bystander.pid}]
        )
        assert out[0].startswith("rank 5: refused"), out
        assert bystander.poll() is None, "the bystander still runs"
    finally:
        bystander.kill()
        bystander.wait()


def test_a_report_without_placement_gives_up_clearly() -> None:
    with pytest.raises(GiveUp, match="names no Ray node and pid"):
        RayActuators().restart_workers([])
