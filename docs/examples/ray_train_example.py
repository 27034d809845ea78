"""Ray Train + pacekeeper: two CPU workers (gloo) whose straggler scores land in the
ScoreBoard actor, then read back the way a controller would.

    python docs/examples/ray_train_example.py            # starts a local Ray
    RAY_ADDRESS=auto python docs/examples/ray_train_example.py   # an existing cluster

The training function is ``pacekeeper.detector.reporters.ray_train_example``
(importable, so the test suite runs the very same code).
"""

from __future__ import annotations

import os
import tempfile

import ray

from pacekeeper.detector.reporters.ray_scoreboard import get_scoreboard
from pacekeeper.detector.reporters.ray_train_example import run
from pacekeeper.detector.score_report import ScoreReport


def main() -> None:
    if os.environ.get("RAY_ADDRESS"):
        ray.init()
    else:
        ray.init(num_cpus=2, include_dashboard=False, object_store_memory=100 * 1024**2)
    with tempfile.TemporaryDirectory() as storage:
        result = run(num_workers=2, steps=6, report_every=3, storage_path=storage)
    print("worker metrics:", result.metrics)
    job = f"ray:{ray.get_runtime_context().get_job_id()}"
    latest = ScoreReport.from_wire(ray.get(get_scoreboard().latest.remote(job)))
    print("job", job, "report", latest.sequence, "worst rank", latest.summary.worst_rank)
    for r in latest.ranks:
        print(f"  rank {r.rank} on {r.node}: forward score {r.section_relative.get('forward')}")


if __name__ == "__main__":
    main()
