"""Run in its own process and its own single-node Ray cluster (a drain makes the node
take no new work, which would starve the shared test cluster): a job with a slow rank
on this node reports to the ScoreBoard; the Ray-side runner, in enforce mode, climbs
notify -> taint -> drain and drains the node through Ray. First, the same job publishes
reports that place its ranks in processes Ray does not record as the job's (this very
driver, a pid that is no Ray worker): nothing moves. Prints a JSON verdict."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import ray
from controller_helpers import Clock, placed_report, ray_policy, start_workers, where

from pacekeeper.controller.core.decisions import Reason
from pacekeeper.controller.sources.ray_scoreboard import KvStateStore, RayRunner
from pacekeeper.detector.reporters.ray_badge import create_badge
from pacekeeper.detector.reporters.ray_scoreboard import get_scoreboard
from pacekeeper.detector.score_report import JobIdentity, Platform

LADDER = {
    "notify": {"enabled": True, "timeoutS": 60},
    "taintNode": {"enabled": True, "timeoutS": 60},
    "drainNode": {"enabled": True, "timeoutS": 60},
}


def climb(runner: RayRunner, publish: Any, clock: Clock) -> tuple[list[str], list[str], bool]:
    """Up to 20 passes, one report each; (act decisions, drained node ids, untrusted)."""
    actions: list[str] = []
    drained: list[str] = []
    untrusted = False
    for seq in range(20):
        publish(seq)
        result = runner.run_once()
        actions += [f"{d.verdict.value}:{d.action.value}:{d.subject}"
                    for d in result.decisions if d.action is not None]  # fmt: skip
        drained += result.drained
        untrusted |= any(d.reason is Reason.UNTRUSTED_REPORT for d in result.refused)
        if result.failed:
            print("actions failed:", result.failed, file=sys.stderr)
            break
        if drained:
            break
        clock.advance(60)
    return actions, drained, untrusted


def main() -> None:
    ray.init(num_cpus=1, include_dashboard=False, object_store_memory=80 * 1024**2,
             log_to_driver=False)  # fmt: skip
    node_id = ray.get_runtime_context().get_node_id()
    board = get_scoreboard()
    token = ray.get(board.register.remote(
        f"ray:{ray.get_runtime_context().get_job_id()}", create_badge(60)))["token"]  # fmt: skip
    job = JobIdentity(platform=Platform.RAY, name="drain",
                      ray_job_id=ray.get_runtime_context().get_job_id())  # fmt: skip
    placements = where(start_workers(2))
    key_dir = tempfile.mkdtemp()
    store = KvStateStore.from_key_file(Path(key_dir) / "state.key")
    clock = Clock()

    def forged(seq: int) -> None:
        # The real node, but processes Ray does not place in this job.
        fake = [(os.getpid(), node_id), (1, node_id)]
        report = placed_report(job, seq, clock.now, fake, slow={3: 0.4})
        ray.get(board.publish.remote(report.to_json(), token, "forged"))

    acts, gone, untrusted = climb(RayRunner(ray_policy(LADDER), store=store, clock=clock),
                                  forged, clock)  # fmt: skip
    forged_verdict = {"drained": gone, "acts": [a for a in acts if a.startswith("act:")],
                      "untrusted": untrusted}  # fmt: skip

    def honest(seq: int) -> None:
        report = placed_report(job, seq, clock.now, placements, slow={3: 0.4})
        ray.get(board.publish.remote(report.to_json(), token, "honest"))

    actions, drained, _ = climb(RayRunner(ray_policy(LADDER), store=store, clock=clock),
                                honest, clock)  # fmt: skip

    @ray.remote(num_cpus=1)
    def new_work() -> int:
        return 1

    try:
        ray.get(new_work.remote(), timeout=3)
        pending = False
    except ray.exceptions.GetTimeoutError:
        pending = True
    alive = ray.get(board.ping.remote(), timeout=10)
    print(json.dumps({"node": node_id, "drained": drained, "actions": actions,
                      "new_work_pending": pending, "board_answers": alive,
                      "forged": forged_verdict}))  # fmt: skip
    ray.shutdown()


if __name__ == "__main__":
    main()
