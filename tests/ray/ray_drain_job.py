"""Run in its own process and its own single-node Ray cluster (a drain makes the node
take no new work, which would starve the shared test cluster): a job with a slow rank
on this node reports to the ScoreBoard; the Ray-side runner, in enforce mode, climbs
notify -> taint -> drain and drains the node through Ray. Prints a JSON verdict."""

from __future__ import annotations

import json
import sys

import ray
from controller_helpers import Clock, ray_policy

from pacekeeper.controller.simulation.synthetic import synthetic_report
from pacekeeper.controller.sources.ray_scoreboard import RayRunner
from pacekeeper.detector.reporters.ray_scoreboard import get_scoreboard
from pacekeeper.detector.score_report import JobIdentity, Platform


def main() -> None:
    ray.init(num_cpus=1, include_dashboard=False, object_store_memory=80 * 1024**2,
             log_to_driver=False)  # fmt: skip
    node_id = ray.get_runtime_context().get_node_id()
    board = get_scoreboard()
    job = JobIdentity(platform=Platform.RAY, name="drain", ray_job_id="d1")
    ladder = {
        "notify": {"enabled": True, "timeoutS": 60},
        "taintNode": {"enabled": True, "timeoutS": 60},
        "drainNode": {"enabled": True, "timeoutS": 60},
    }
    clock = Clock()
    runner = RayRunner(ray_policy(ladder), clock=clock)
    actions: list[str] = []
    drained: list[str] = []
    for seq in range(20):
        report = synthetic_report(
            job=job, sequence=seq, world_size=16, slow={3: 0.4}, generated_at=clock.now,
            ray_node_ids={"node-00000": node_id, "node-00001": "f" * 56},
        )  # fmt: skip
        ray.get(board.publish.remote(report.to_json(), job.key, "inc"))
        result = runner.run_once()
        actions += [f"{d.verdict.value}:{d.action.value}:{d.subject}"
                    for d in result.decisions if d.action is not None]  # fmt: skip
        drained += result.drained
        if result.failed:
            print("actions failed:", result.failed, file=sys.stderr)
            break
        if drained:
            break
        clock.advance(60)

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
                      "new_work_pending": pending, "board_answers": alive}))  # fmt: skip
    ray.shutdown()


if __name__ == "__main__":
    main()
