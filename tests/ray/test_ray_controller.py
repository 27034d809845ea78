"""The Ray-side runner of the decision core, against the ScoreBoard on real Ray."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from controller_helpers import (
    STATE_KEY_BYTES,
    Clock,
    placed_report,
    ray_policy,
    start_workers,
    where,
)
from ray_helpers import driver_job, register

from pacekeeper.controller.actuators.ray import drain_supported
from pacekeeper.controller.core.decisions import Reason, Verdict
from pacekeeper.controller.core.policy import ActionKind
from pacekeeper.controller.sources.ray_scoreboard import (
    KvStateStore,
    RayRunner,
    ScoreBoardSource,
)
from pacekeeper.detector.reporters.ray_scoreboard import ScoreBoard

HERE = Path(__file__).parent
NOTIFY_TAINT = {
    "notify": {"enabled": True, "timeoutS": 60},
    "taintNode": {"enabled": True, "timeoutS": 60},
}


def _acts(decisions: Any) -> list[tuple[ActionKind | None, str]]:
    return [(d.action, d.subject) for d in decisions if d.verdict is Verdict.ACT]


def test_runner_climbs_the_ladder_and_a_restarted_runner_repeats_nothing(
    ray_cluster: str, badge: Any
) -> None:
    import ray

    board = (
        ray.remote(ScoreBoard).options(num_cpus=0).remote(store_prefix=f"t-{uuid.uuid4().hex[:6]}/")
    )
    token = register(board, badge)
    store = KvStateStore(key=f"test/state/{uuid.uuid4().hex[:6]}", signing_key=STATE_KEY_BYTES)
    clock = Clock()
    job = driver_job("ctl")
    workers = start_workers(2)
    placements = where(workers)
    node = placements[0][1]

    def runner() -> RayRunner:
        source = ScoreBoardSource(board)
        return RayRunner(ray_policy(NOTIFY_TAINT), source=source, store=store, clock=clock)

    def publish(seq: int) -> None:
        report = placed_report(job, seq, clock.now, placements, slow={3: 0.4})
        ray.get(board.publish.remote(report.to_json(), token, "a"))

    publish(0)
    first = runner().run_once()
    # Node names are Ray's node ids: the report's own names are only the job's claim.
    assert _acts(first.decisions) == [(ActionKind.NOTIFY, f"node/{node}")]
    # A new runner (the old one died) on the same window: nothing is decided again.
    again = runner().run_once()
    assert _acts(again.decisions) == []
    clock.advance(61)
    publish(1)
    later = runner().run_once()
    assert _acts(later.decisions) == [(ActionKind.TAINT_NODE, f"node/{node}")]
    state = store.load()
    assert node in state.cluster.nodes
    for w in [*workers, board]:
        ray.kill(w)


def test_observe_mode_holds_with_the_would_be_action(ray_cluster: str, badge: Any) -> None:
    import ray

    board = ray.remote(ScoreBoard).options(num_cpus=0).remote(persist=False)
    token = register(board, badge)
    job = driver_job("obs")
    clock = Clock()
    workers = start_workers(1)
    placements = where(workers)
    report = placed_report(job, 0, clock.now, placements, slow={9: 0.3})
    ray.get(board.publish.remote(report.to_json(), token, "a"))
    runner = RayRunner(
        ray_policy(NOTIFY_TAINT, mode="observe"),
        source=ScoreBoardSource(board),
        store=KvStateStore(key=f"test/state/{uuid.uuid4().hex[:6]}", signing_key=STATE_KEY_BYTES),
        clock=clock,
    )
    result = runner.run_once()
    holds = [d for d in result.decisions if d.reason is Reason.OBSERVE_MODE]
    assert holds and holds[0].action is ActionKind.NOTIFY
    assert holds[0].subject == f"node/{placements[0][1]}"
    assert _acts(result.decisions) == [] and result.drained == []
    for w in [*workers, board]:
        ray.kill(w)


def test_runner_drains_the_ray_node_hosting_the_slow_worker() -> None:
    proc = subprocess.run(
        [sys.executable, str(HERE / "ray_drain_job.py")],
        cwd=HERE, env=os.environ | {"PYTHONPATH": str(HERE)},
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    verdict = json.loads(proc.stdout.strip().splitlines()[-1])
    assert verdict["forged"] == {"drained": [], "acts": [], "untrusted": True}, (
        "a report placing ranks in processes that are not the job's moves nothing"
    )
    node = verdict["node"]
    assert verdict["drained"] == [node]
    assert verdict["actions"][:3] == [
        f"act:notify:node/{node}",
        f"act:taintNode:node/{node}",
        f"act:drainNode:node/{node}",
    ]
    assert verdict["new_work_pending"] is True and verdict["board_answers"] is True


def test_drain_is_gated_on_the_ray_version() -> None:
    assert drain_supported("2.60.0") and drain_supported("3.1.0")
    assert not drain_supported("2.9.3") and not drain_supported("nightly")


def test_a_runner_that_believes_the_reports_placements_may_not_enforce() -> None:
    with pytest.raises(ValueError, match="enforce mode needs verify_placement"):
        RayRunner(
            ray_policy(NOTIFY_TAINT),
            source=ScoreBoardSource(board=object(), verify_placement=False),
            store=KvStateStore(signing_key=STATE_KEY_BYTES),
        )
