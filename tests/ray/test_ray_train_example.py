"""The Ray Train example (TorchTrainer, 2 CPU workers, gloo) reports to the ScoreBoard:
examples/ray_train_example.py run as a user runs it, against this module's cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pacekeeper.detector.reporters.ray_scoreboard import get_scoreboard
from pacekeeper.detector.score_report import Platform, ScoreReport

EXAMPLE = Path(__file__).parents[2] / "examples" / "ray_train_example.py"


def test_ray_train_example_publishes_both_workers_scores_with_the_slow_one_worst(
    ray_cluster: str, tmp_path: Path
) -> None:
    import ray

    done = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        env={**os.environ, "RAY_ADDRESS": ray_cluster},
        capture_output=True, text=True, timeout=240, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["error"] is None
    assert summary["return_value"]["reports_published"] == 2
    job = summary["job"]
    board = get_scoreboard()
    history = [ScoreReport.from_wire(w) for w in ray.get(board.window.remote(job))]
    assert len(history) == 2
    latest = history[-1]
    assert latest.job.platform is Platform.RAY and f"ray:{latest.job.ray_job_id}" == job
    assert [r.rank for r in latest.ranks] == [0, 1]
    assert all(r.ray_node_id for r in latest.ranks)
    forward = {r.rank: r.section_relative["forward"] for r in latest.ranks}
    assert forward[1] < 0.75 < forward[0]
