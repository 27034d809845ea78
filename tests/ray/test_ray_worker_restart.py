"""restartRank on Ray: the runner restarts exactly the slow rank's worker process, and
only a process Ray records as a live actor of the reporting job."""

from __future__ import annotations

import json
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

from pacekeeper.controller.actuators.errors import GiveUp
from pacekeeper.controller.actuators.ray import RayActuators
from pacekeeper.controller.core.decisions import Reason, Verdict
from pacekeeper.controller.core.policy import ActionKind
from pacekeeper.controller.sources.ray_scoreboard import (
    KvStateStore,
    PassResult,
    RayRunner,
    ScoreBoardSource,
)
from pacekeeper.detector.reporters.ray_scoreboard import ScoreBoard

HERE = Path(__file__).parent
RESTART = {
    "notify": {"enabled": True, "timeoutS": 60},
    "restartRank": {"enabled": True, "timeoutS": 600, "maxAttempts": 1},
}


class _Setup:
    """A board this process's job is registered with, and an enforce-mode runner."""

    def __init__(self, badge: Any) -> None:
        import ray

        self.board = ray.remote(ScoreBoard).options(num_cpus=0).remote(
            store_prefix=f"r-{uuid.uuid4().hex[:6]}/"
        )  # fmt: skip
        self.token = register(self.board, badge)
        self.clock = Clock()
        self.job = driver_job("restart")
        self.runner = RayRunner(
            ray_policy(RESTART),
            source=ScoreBoardSource(self.board),
            store=KvStateStore(key=f"test/state/{uuid.uuid4().hex[:6]}",
                               signing_key=STATE_KEY_BYTES),
            clock=self.clock,
        )  # fmt: skip

    def publish_and_pass(self, seq: int, placements: list[tuple[int, str]]) -> PassResult:
        import ray

        report = placed_report(self.job, seq, self.clock.now, placements, world_size=2,
                               slow={1: 0.5})  # fmt: skip
        ray.get(self.board.publish.remote(report.to_json(), self.token, "a"))
        result = self.runner.run_once()
        self.clock.advance(61)
        return result


def _workers(n: int) -> list[Any]:
    return start_workers(n, max_restarts=1)


def test_runner_restarts_only_the_slow_ranks_worker(ray_cluster: str, badge: Any) -> None:
    import ray

    workers = _workers(2)
    before = where(workers)
    setup = _Setup(badge)
    acted: list[tuple[ActionKind | None, str]] = []
    restarted: list[str] = []
    for seq in range(3):
        result = setup.publish_and_pass(seq, before)
        acted += [(d.action, d.subject) for d in result.decisions if d.verdict is Verdict.ACT]
        restarted += result.restarted
    assert (ActionKind.RESTART_RANK, f"node/{before[1][1]}") in acted
    assert restarted == ["rank 1: terminated"]
    after = where(workers)
    assert after[0] == before[0], "the healthy rank's worker is untouched"
    assert after[1][0] != before[1][0], "the slow rank's worker runs in a new process"
    assert setup.runner.run_once().restarted == [], "nothing is restarted twice"
    for w in [*workers, setup.board]:
        ray.kill(w)


def test_a_report_placing_a_rank_in_another_jobs_worker_restarts_nothing(
    ray_cluster: str, badge: Any
) -> None:
    """The slow rank 'runs' in a real Ray worker of another job: Ray does not place it in
    the reporting job, so the report is refused, recorded and counted; nothing moves."""
    import ray

    name = f"bystander-{uuid.uuid4().hex[:6]}"
    started = subprocess.run(
        [sys.executable, str(HERE / "other_job.py"), "bystander", ray_cluster, name],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr[-3000:]
    other = json.loads(started.stdout.strip().splitlines()[-1])
    bystander = ray.get_actor(name, namespace="pacekeeper-tests-others")
    try:
        mine = _workers(1)
        setup = _Setup(badge)
        placements = [where(mine)[0], (other["pid"], other["node"])]
        results = [setup.publish_and_pass(seq, placements) for seq in range(3)]
        assert all(r.restarted == [] for r in results)
        assert not [d for r in results for d in r.decisions if d.verdict is Verdict.ACT]
        refused = [d for r in results for d in r.refused]
        assert [d.reason for d in refused] == [Reason.UNTRUSTED_REPORT] * 3, "once per report"
        assert f"pid {other['pid']} is not an actor of the job" in refused[0].evidence["error"]
        assert setup.runner.stats()["untrusted_reports"] == 3
        assert ray.get(bystander.where.remote())[0] == other["pid"], "the bystander still runs"
        for w in [*mine, setup.board]:
            ray.kill(w)
    finally:
        ray.kill(bystander)


def test_a_worker_gone_since_its_report_is_not_restarted(ray_cluster: str, badge: Any) -> None:
    """Checked again just before acting: the report placed the rank in a live actor of
    the job, but by the time the runner acts that actor is dead (its pid may be anyone's
    now): a hold with the reason, no signal."""
    import ray

    workers = _workers(2)
    placements = where(workers)
    setup = _Setup(badge)
    first = setup.publish_and_pass(0, placements)
    assert [(d.action, d.verdict) for d in first.decisions if d.action] == [
        (ActionKind.NOTIFY, Verdict.ACT)
    ]
    ray.kill(workers[1], no_restart=True)
    second = setup.publish_and_pass(1, placements)
    assert second.restarted == []
    (held,) = [d for d in second.decisions if d.action is ActionKind.RESTART_RANK]
    assert held.verdict is Verdict.HOLD and held.reason is Reason.UNTRUSTED_REPORT
    assert held.evidence["wouldBe"] == "act"
    assert "rank 1: pid" in held.evidence["refused"][0]
    assert held in second.refused and setup.runner.stats()["refused_actions"] == 1
    for w in [workers[0], setup.board]:
        ray.kill(w)


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
