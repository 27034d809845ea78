"""The Ray Train example (TorchTrainer, 2 CPU workers, gloo) reports to the ScoreBoard."""

from __future__ import annotations

from pathlib import Path

from pacekeeper.detector.reporters.ray_scoreboard import get_scoreboard
from pacekeeper.detector.reporters.ray_train_example import run
from pacekeeper.detector.score_report import Platform, ScoreReport


def test_ray_train_example_publishes_both_workers_scores_with_the_slow_one_worst(
    ray_cluster: str, tmp_path: Path
) -> None:
    import ray

    result = run(num_workers=2, steps=6, report_every=3, storage_path=str(tmp_path))
    assert result.error is None
    assert result.return_value["reports_published"] == 2
    job_id = ray.get_runtime_context().get_job_id()
    board = get_scoreboard()
    history = [ScoreReport.from_wire(w) for w in ray.get(board.window.remote(f"ray:{job_id}"))]
    assert len(history) == 2
    latest = history[-1]
    assert latest.job.platform is Platform.RAY and latest.job.ray_job_id == job_id
    assert [r.rank for r in latest.ranks] == [0, 1]
    assert all(r.ray_node_id for r in latest.ranks)
    forward = {r.rank: r.section_relative["forward"] for r in latest.ranks}
    assert forward[1] < 0.75 < forward[0]
