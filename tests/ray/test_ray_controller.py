"""The Ray-side runner of the decision core, against the ScoreBoard on real Ray."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from controller_helpers import Clock, ray_policy

from pacekeeper.controller.actuators.ray import drain_supported
from pacekeeper.controller.core.decisions import Reason, Verdict
from pacekeeper.controller.core.policy import ActionKind
from pacekeeper.controller.simulation.synthetic import synthetic_report
from pacekeeper.controller.sources.ray_scoreboard import (
    KvStateStore,
    RayRunner,
    ScoreBoardSource,
)
from pacekeeper.detector.reporters.ray_scoreboard import ScoreBoard
from pacekeeper.detector.score_report import JobIdentity, Platform

HERE = Path(__file__).parent
NOTIFY_TAINT = {
    "notify": {"enabled": True, "timeoutS": 60},
    "taintNode": {"enabled": True, "timeoutS": 60},
}


def _acts(decisions: Any) -> list[tuple[ActionKind | None, str]]:
    return [(d.action, d.subject) for d in decisions if d.verdict is Verdict.ACT]


def test_runner_climbs_the_ladder_and_a_restarted_runner_repeats_nothing(
    ray_cluster: str,
) -> None:
    import ray

    board = (
        ray.remote(ScoreBoard).options(num_cpus=0).remote(store_prefix=f"t-{uuid.uuid4().hex[:6]}/")
    )
    store = KvStateStore(key=f"test/state/{uuid.uuid4().hex[:6]}")
    clock = Clock()
    job = JobIdentity(platform=Platform.RAY, name="ctl", ray_job_id=uuid.uuid4().hex[:8])

    def runner() -> RayRunner:
        source = ScoreBoardSource(board)
        return RayRunner(ray_policy(NOTIFY_TAINT), source=source, store=store, clock=clock)

    def publish(seq: int) -> None:
        report = synthetic_report(
            job=job, sequence=seq, world_size=16, slow={3: 0.4}, generated_at=clock.now
        )
        ray.get(board.publish.remote(report.to_json(), job.key, "a"))

    publish(0)
    first = runner().run_once()
    assert _acts(first.decisions) == [(ActionKind.NOTIFY, "node/node-00000")]
    # A new runner (the old one died) on the same window: nothing is decided again.
    again = runner().run_once()
    assert _acts(again.decisions) == []
    clock.advance(61)
    publish(1)
    later = runner().run_once()
    assert _acts(later.decisions) == [(ActionKind.TAINT_NODE, "node/node-00000")]
    state = store.load()
    assert "node-00000" in state.cluster.nodes
    ray.kill(board)


def test_observe_mode_holds_with_the_would_be_action(ray_cluster: str) -> None:
    import ray

    board = ray.remote(ScoreBoard).options(num_cpus=0).remote(persist=False)
    job = JobIdentity(platform=Platform.RAY, name="obs", ray_job_id=uuid.uuid4().hex[:8])
    clock = Clock()
    report = synthetic_report(job=job, world_size=16, slow={9: 0.3}, generated_at=clock.now)
    ray.get(board.publish.remote(report.to_json(), job.key, "a"))
    runner = RayRunner(
        ray_policy(NOTIFY_TAINT, mode="observe"),
        source=ScoreBoardSource(board),
        store=KvStateStore(key=f"test/state/{uuid.uuid4().hex[:6]}"),
        clock=clock,
    )
    result = runner.run_once()
    holds = [d for d in result.decisions if d.reason is Reason.OBSERVE_MODE]
    assert holds and holds[0].action is ActionKind.NOTIFY and holds[0].subject == "node/node-00001"
    assert _acts(result.decisions) == [] and result.drained == []
    ray.kill(board)


def test_runner_drains_the_ray_node_hosting_the_slow_worker() -> None:
    proc = subprocess.run(
        [sys.executable, str(HERE / "ray_drain_job.py")],
        cwd=HERE, env=os.environ | {"PYTHONPATH": str(HERE)},
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    verdict = json.loads(proc.stdout.strip().splitlines()[-1])
    assert verdict["drained"] == [verdict["node"]]
    assert verdict["actions"][:3] == [
        "act:notify:node/node-00000",
        "act:taintNode:node/node-00000",
        "act:drainNode:node/node-00000",
    ]
    assert verdict["new_work_pending"] is True and verdict["board_answers"] is True


def test_drain_is_gated_on_the_ray_version() -> None:
    assert drain_supported("2.60.0") and drain_supported("3.1.0")
    assert not drain_supported("2.9.3") and not drain_supported("nightly")
